"""Batches as callers see them: many exports of the caller's books as one job, with one answer when it ends.

Each target is an ordinary export, built and guarded as one is; the batch adds what ties them together: one
write that creates them all (or none), counts that the targets' endings move exactly once, an ending when
the last of them ends, and a cancel that ends every one.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from typing import Any

from bindery import engine, errors
from bindery.capacity import RETRY_AFTER_OVER_CAP, SHARD_TRIES, most_targets, over_budget, service_full
from bindery.clock import Clock, iso
from bindery.config import Settings
from bindery.errors import not_found
from bindery.exports import ExportRequests
from bindery.idempotency import idempotency_for, key_reused
from bindery.ids import new_id, valid_id
from bindery.limits import MAX_BATCH_SHARDS, CallerClass
from bindery.objects import Objects
from bindery.observability import logger, metrics, state_change
from bindery.paging import decode_cursor, encode_cursor, page_size
from bindery.purges import Purges
from bindery.settlement import after_ending, settle_batch
from bindery.states import BatchStatus, State
from bindery.storage import (
    Batch,
    BatchCreated,
    BatchRows,
    Export,
    ExportRows,
    KeyReused,
    NotFound,
    OverBudget,
    Replayed,
    Revoked,
    ShardFull,
    Target,
    TooManyBatches,
)

RETRY_AFTER_RUNNING = 5


def plan_shards(room: dict[int, int], n: int) -> dict[int, int] | None:
    """How many of `n` targets each shard takes: the roomiest first (ties at random), at most
    MAX_BATCH_SHARDS of them, so that the batch stays one transaction. None: they cannot hold it."""
    order = sorted(room, key=lambda k: (-room[k], random.random()))[:MAX_BATCH_SHARDS]
    plan: dict[int, int] = {}
    left = n
    for k in order:
        if left <= 0 or room[k] <= 0:
            break
        plan[k] = min(room[k], left)
        left -= plan[k]
    return plan if left <= 0 else None


class BatchRequests:
    """Create, read, list and cancel: what an API caller does with its batches; and the batch sweep, which
    ends what a cancel or a last ending left unended. Each target is ended and shown as an export is, by
    the export requests' own cancel and view; a bundle's ended link is unlinked by the library."""

    def __init__(
        self,
        settings: Settings,
        batch_rows: BatchRows,
        export_rows: ExportRows,
        objects: Objects,
        clock: Clock,
        exports: ExportRequests,
        purges: Purges,
    ):
        self.settings, self.objects, self.clock = settings, objects, clock
        self.batch_rows, self.export_rows = batch_rows, export_rows
        self.exports, self.purges = exports, purges

    def create_batch(
        self, caller: str, caller_class: CallerClass, given: Any, idempotency_key: str | None
    ) -> tuple[dict[str, Any], bool]:
        """Accept a batch. Returns its view and whether this call created it (False for a replay)."""
        limits = self.settings.limits(caller_class)
        wanted = _targets(given, most_targets(self.settings, limits))
        idempotency_ids = None
        if idempotency_key is not None:
            idempotency_ids = idempotency_for(caller, idempotency_key, ["POST /batches", wanted])
        book_ids = {book_id for book_id, _, _ in wanted}
        # A book that is not the caller's makes the whole request a 404, as for a missing book, and it is
        # found before anything is written.
        if not all(valid_id(b) for b in book_ids) or not self.batch_rows.books_owned(book_ids, caller):
            raise not_found()
        now = self.clock()
        batch_id = new_id(now)
        for attempt in range(2 * SHARD_TRIES):
            if attempt:
                # Another batch took the room this one planned on: read again after a moment.
                time.sleep(random.uniform(0, 0.02 * attempt))
            plan = plan_shards(self.export_rows.shard_room(), len(wanted))
            if plan is None:
                raise service_full(self.settings.max_live_exports_total)
            shards = [k for k, count in plan.items() for _ in range(count)]
            targets = [
                Export(
                    id=new_id(now, shard),
                    book_id=book_id,
                    format=fmt,
                    state=State.PENDING,
                    requested_at=now,
                    counted_against=caller,
                    options=chosen,
                    caller_class=caller_class.value,
                    batch_id=batch_id,
                )
                for (book_id, fmt, chosen), shard in zip(wanted, shards, strict=True)
            ]
            batch = Batch(
                id=batch_id,
                caller=caller,
                caller_class=caller_class.value,
                status=BatchStatus.RUNNING.value,
                targets=tuple(Target(t.id, t.book_id, t.format) for t in targets),
                targets_done=0,
                n_ready=0,
                n_failed=0,
                n_cancelled=0,
                bytes=0,
                created_at=now,
            )
            view = self.batch_view(batch, targets, now)
            idempotency = None if idempotency_ids is None else (*idempotency_ids, view)
            outcome = self.batch_rows.create_batch(
                batch, targets, limits=limits, shards=plan, now=now, idempotency=idempotency
            )
            if not isinstance(outcome, ShardFull):
                break
        match outcome:
            case BatchCreated():
                metrics.add_metric(name="BatchesRequested", unit="Count", value=1)
                state_change(batch_id, "", "batch requested", targets=len(targets))
                return view, True
            case Replayed(response=response):
                return response, False
            case KeyReused():
                raise key_reused()
            case TooManyBatches(live_ids=live):
                raise errors.TooManyLiveExports(
                    f"you have {len(live)} batches in progress, the most allowed at once; wait for one to "
                    "end or cancel one",
                    code="too_many_live_batches",
                    live_batches=list(live),
                    retry_after=RETRY_AFTER_OVER_CAP,
                )
            case OverBudget(usage=usage):
                raise over_budget(usage, limits.storage_bytes)
            case ShardFull():
                raise service_full(self.settings.max_live_exports_total)
        raise AssertionError(outcome)

    def read_batch(self, caller: str, batch_id: str) -> dict[str, Any]:
        """The batch and each target's state. It reads, and writes nothing."""
        now = self.clock()
        found = self.batch_rows.read_batch(caller, batch_id, now) if valid_id(batch_id) else None
        if found is None:
            raise not_found("batch")
        return self.batch_view(found[0], found[1], now, bundle=found[2])

    def list_batches(self, caller: str, limit: Any, cursor: str | None) -> dict[str, Any]:
        size = page_size(limit)
        start_after = decode_cursor(cursor) if cursor is not None else None
        now = self.clock()
        page, next_after = self.batch_rows.list_batches(caller, limit=size, start_after=start_after, now=now)
        return {
            "batches": [self.batch_view(b, None, now) for b in page],
            "next_cursor": encode_cursor(next_after) if next_after else None,
        }

    def cancel_batch(self, caller: str, batch_id: str) -> None:
        """Cancel the batch: its pending targets are cancelled and its ready ones' links end now, their
        files deleted before the answer. Should this stop halfway, the batch sweep ends the rest."""
        batch = self.batch_rows.cancel_batch(caller, batch_id, self.clock()) if valid_id(batch_id) else None
        if batch is None:
            raise not_found("batch")
        cancelled = batch.status == BatchStatus.CANCELLED
        state_change(batch_id, "", "batch cancelled" if cancelled else "batch links revoked")
        self.end_targets(batch)

    def end_targets(self, batch: Batch, *, unlink: bool = True) -> None:
        """End every target of a cancelled (or revoked) batch (the cancel's own work, and the sweep's
        backstop); once none is pending, the batch leaves the sweep's queue. `unlink`: a ready target's
        bytes are deleted now, before the answer; the sweep (which deletes no object) leaves them to the
        GC's unlink. The bundle goes first: one link to every file, it is the one to end soonest."""
        found = self.batch_rows.read_batch(batch.caller, batch.id, self.clock())
        bundle = None if found is None else found[2]
        if bundle is not None and bundle.state in (State.PENDING, State.READY):
            # The bundle has no book and so no owner to check: it is ended as a deleted book's exports are
            # (pending cancelled, a ready link ended now and its file deleted).
            ended = self.export_rows.end_for_deleted_book(bundle, self.clock())
            if isinstance(ended, Revoked) and unlink:
                self.purges.unlink_now(ended)
        now = self.clock()
        for target in batch.targets:
            if unlink:
                with contextlib.suppress(errors.NotFound):  # its book was deleted: the purge ends its exports
                    self.exports.cancel(batch.caller, target.book_id, target.export_id)
            else:
                cancelled = self.export_rows.cancel_export(
                    target.book_id, target.export_id, batch.caller, now
                )
                if not isinstance(cancelled, NotFound):
                    after_ending(self.batch_rows, cancelled.target, now)
        found = self.batch_rows.read_batch(batch.caller, batch.id, self.clock())
        if found is not None and all(e.state != State.PENDING for e in found[1]):
            self.batch_rows.batch_cleared(batch.caller, batch.id, now)

    def settle_batches(self, out_of_time: Callable[[], bool] = lambda: False) -> dict[str, int]:
        """The batch sweep: a running batch whose last ending did not end it is ended now (or looked at
        again later); a cancelled one whose targets did not all end has the rest ended. It stops when
        `out_of_time`; what it did not reach stays due for the next run."""
        now = self.clock()
        counts = {"settled": 0, "deferred": 0, "cleared": 0}
        for caller, batch_id in self.batch_rows.due_batches(now, self.settings.sweep_batch):
            if out_of_time():
                break
            found = self.batch_rows.read_batch(caller, batch_id, now)
            if found is None:
                continue
            batch = found[0]
            try:
                if batch.status == BatchStatus.CANCELLED or batch.revoked_at is not None:
                    self.end_targets(batch, unlink=False)
                    counts["cleared"] += 1
                elif settle_batch(self.batch_rows, caller, batch_id, now) is not None:
                    counts["settled"] += 1
                else:
                    self.batch_rows.defer_batch(caller, batch_id, now)
                    counts["deferred"] += 1
            except Exception:
                logger.exception("batch sweep step failed", extra={"batch_id": batch_id})
        return counts

    def batch_view(
        self, batch: Batch, targets: list[Export] | None, now: float, *, bundle: Export | None = None
    ) -> dict[str, Any]:
        """The batch as its caller sees it; with `targets` (the rows), each target's state and the counts
        by state, and its bundle, which a list leaves out."""
        status = batch.status
        body: dict[str, Any] = {
            "id": batch.id,
            "status": status,
            "targets_total": batch.targets_total,
            "targets_done": batch.targets_done,
            "ended": {"ready": batch.n_ready, "failed": batch.n_failed, "cancelled": batch.n_cancelled},
            "bytes": batch.bytes,
            "created_at": iso(batch.created_at),
            "finished_at": iso(batch.finished_at),
            "revoked_at": iso(batch.revoked_at),
        }
        if targets is not None and len(targets) == batch.targets_total:
            # One answer, one moment: its counts are those of the rows it shows, read after the batch row
            # (an ending landing between the two reads moved the rows, which it shows, and the counters,
            # which it does not). A row only moves on, so the batch row's status stays true of them. Where a
            # row is gone (its TTL, long after every target ended), the counters are final and shown.
            ended_ready = [e for e in targets if e.state in (State.READY, State.EXPIRED)]
            body["ended"] = {
                "ready": len(ended_ready),
                "failed": sum(e.state == State.FAILED for e in targets),
                "cancelled": sum(e.state == State.CANCELLED for e in targets),
            }
            body["targets_done"] = sum(body["ended"].values())
            body["bytes"] = sum(e.size_bytes or 0 for e in ended_ready)
        if targets is not None:
            views = [self.exports.view(e, book=None, now=now) for e in targets]
            counts = {s.value: 0 for s in State}
            for v in views:
                counts[v["state"]] += 1
            if status == BatchStatus.RUNNING and all(e.attempt == 0 for e in targets):
                body["status"] = "queued"  # no target has been started yet
            body["counts"] = counts
            body["targets"] = [
                {
                    "export_id": v["id"],
                    "book_id": v["book_id"],
                    "format": v["format"],
                    "state": v["state"],
                    "failure_code": v["failure_code"],
                }
                for v in views
            ]
            body["bundle"] = None if bundle is None else self.bundle_view(batch, bundle, now)
        return body

    def bundle_view(self, batch: Batch, bundle: Export, now: float) -> dict[str, Any]:
        """The batch's one download: its state, and while it is ready a fresh link that lapses when the
        bundle's row says, as any export's does."""
        state = bundle.state
        if state == State.READY and bundle.expires_at is not None and now >= bundle.expires_at:
            state = State.EXPIRED
        body: dict[str, Any] = {
            "id": bundle.id,
            "state": state.value,
            "size_bytes": bundle.size_bytes,
            "sha256": bundle.sha256,
            "expires_at": iso(bundle.expires_at),
            "failure_code": bundle.failure_code,
            "download_url": None,
            "download_expires_at": None,
        }
        if state == State.READY and bundle.path and bundle.expires_at is not None:
            seconds = int(min(bundle.expires_at, now + self.settings.presign_max_seconds) - now)
            if seconds >= 1:
                name = f"batch-{batch.id}.zip"
                body["download_url"] = self.objects.presign_download(
                    bundle.path, name, engine.ZIP.content_type, seconds
                )
                body["download_expires_at"] = iso(now + seconds)
        return body


def _targets(given: Any, most: int) -> list[tuple[str, str, dict[str, Any]]]:
    """(book, format, options) for each target as asked, or the 4xx that names the target at fault."""
    if not isinstance(given, list) or not given:
        raise errors.BadRequest("exports must be a non-empty array of targets", code="invalid_field")
    if len(given) > most:
        raise errors.Unprocessable(
            f"a batch holds at most {most} exports; this one has {len(given)}",
            code="too_many_targets",
            limit=most,
        )
    wanted = []
    for n, target in enumerate(given):
        try:
            if not isinstance(target, dict) or set(target) - {"book_id", "format", "options"}:
                raise errors.BadRequest(
                    "a target is an object of book_id, format and options", code="invalid_field"
                )
            book_id = target.get("book_id")
            if book_id is None:
                raise errors.BadRequest("missing field: book_id", code="missing_field")
            if not isinstance(book_id, str):
                raise errors.BadRequest("book_id must be a string", code="invalid_field")
            if "format" not in target:  # as a single export's request says it
                raise errors.BadRequest("missing field: format", code="missing_field")
            if "options" in target and target["options"] is None:  # left out, it is {}; never null
                raise errors.BadRequest("options must be a JSON object", code="invalid_options")
            fmt, chosen = engine.format_and_options(target.get("format"), target.get("options"))
        except errors.BinderyError as exc:
            raise type(exc)(f"exports[{n}]: {exc.message}", code=exc.code, index=n, **exc.details) from None
        wanted.append((book_id, fmt, chosen))
    return wanted
