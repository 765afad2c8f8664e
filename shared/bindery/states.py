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


class BatchStatus(StrEnum):
    """A batch is running until every target has ended; then done (every target ready), partial (some),
    or failed (none); or cancelled by its caller."""

    RUNNING = "running"
    DONE = "done"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"


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
    DELIVER = "deliver"  # a webhook delivery: its next attempt is due, or its attempt's lease runs out
    WITHDRAW = "withdraw"  # a deleted webhook endpoint whose waiting deliveries are still to be withdrawn
    BATCH = "batch"  # a batch not yet ended: the sweep settles it should its last ending not have


class DeliveryState(StrEnum):
    """A webhook delivery's states. queued -> in_flight -> acked (a 2xx), rejected (a 4xx but 408, 409, 425
    and 429: not retried), or back to queued for its next attempt; expired when its budget or window ran
    out; withdrawn when its endpoint or its export's book was deleted before it was sent."""

    QUEUED = "queued"
    IN_FLIGHT = "in_flight"
    ACKED = "acked"
    REJECTED = "rejected"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"


# A delivery attempt's error when its lease ran out before its sender recorded an answer: its sender died,
# or its claim was applied and every answer to it lost. It may never have been sent.
NO_ANSWER_RECORDED = "no_answer_recorded"

DELIVERY_ENDED = frozenset(
    {DeliveryState.ACKED, DeliveryState.REJECTED, DeliveryState.EXPIRED, DeliveryState.WITHDRAWN}
)

# The event kinds a webhook can subscribe to: an export's terminal transitions, a batch's ending, and the
# early end of an ended batch's links (`revoked`: its status stays what it ended as).
EXPORT_EVENT_TYPES = tuple(f"bindery.export.{s}" for s in ("ready", "failed", "cancelled", "expired"))
BATCH_EVENT_TYPES = tuple(f"bindery.batch.{s}" for s in ("done", "partial", "failed", "cancelled", "revoked"))
EVENT_TYPES = EXPORT_EVENT_TYPES + BATCH_EVENT_TYPES


class ClaimRefusal(StrEnum):
    """Why a worker may not build: no such row; ended already; another attempt's lease is running; or the
    last attempt has been spent (the stale sweep ends the row, not another build)."""

    GONE = "gone"
    ENDED = "ended"
    HELD = "held"
    EXHAUSTED = "exhausted"


class Ending(StrEnum):
    """How an attempt's ending came out: it ended the row; the row was not its to end (ended, or
    re-claimed); or (a finish only) the book was deleted while the row waited, and the row is still the
    attempt's."""

    ENDED = "ended"
    REFUSED = "refused"
    BOOK_DELETED = "book_deleted"


class Cancel(StrEnum):
    """What a cancel came to: a pending export cancelled, a ready link revoked (its bytes gone at once),
    or an export that had ended already (nothing to do)."""

    CANCELLED = "cancelled"
    REVOKED = "revoked"
    ENDED = "ended"


class BuildOutcome(StrEnum):
    """What one delivery of a build message came to: what the worker logs and the tests read."""

    READY = "ready"
    FAILED_EMPTY_BOOK = "failed:empty_book"
    FAILED_TOO_LARGE_FOR_FORMAT = "failed:too_large_for_format"
    FAILED_RENDER_FAILED = "failed:render_failed"
    FAIL_REFUSED = "fail_refused"  # another ending won
    FINISH_REFUSED = "finish_refused"  # ended or re-claimed meanwhile: this attempt's bytes are removed
    CANCELLED_BOOK_DELETED = "cancelled:book_deleted"
    CANCEL_REFUSED = "cancel_refused"
    REFUSED_GONE = "refused:gone"
    REFUSED_ENDED = "refused:ended"
    REFUSED_EXHAUSTED = "refused:exhausted"
    DROPPED = "dropped"  # a message that names no export

    @classmethod
    def failed(cls, code: FailureCode) -> BuildOutcome:
        return cls(f"failed:{code.value}")

    @classmethod
    def refused(cls, reason: ClaimRefusal) -> BuildOutcome:
        return cls(f"refused:{reason.value}")
