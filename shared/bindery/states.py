"""Export states and the failure codes a caller can see. Each code is documented once, in README."""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


ENDED = frozenset({State.FAILED, State.CANCELLED, State.EXPIRED})


class FailureCode(StrEnum):
    EMPTY_BOOK = "empty_book"
    TOO_LARGE_FOR_FORMAT = "too_large_for_format"
    RENDER_FAILED = "render_failed"
    WORKER_LOST = "worker_lost"
    QUEUE_TIMEOUT = "queue_timeout"


class Queue(StrEnum):
    """Which sweep a row is waiting for. It is the partition key of the sparse `by_due` index, and a row
    sits in at most one of these at a time (or in none, once it has nothing left to happen to it)."""

    STALE = "stale"  # pending: failed by the stale sweep once `due_at` passes
    EXPIRE = "expire"  # ready: its link lapses at `due_at`
    UNLINK = "unlink"  # ended, and may still have bytes in S3 after `due_at`
    RETIRE = "retire"  # a cut no build can read after `due_at`: its chapters and text are removed
    PURGE = "purge"  # a deleted book whose exports are still to be ended
