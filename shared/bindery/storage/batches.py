"""Batches: many exports as one job, created in one transaction with every target, and ended exactly once.

A batch's row lives under its caller (CALLER#<sub> / BATCH#<id>), so another caller's id reads as a missing
one by its key alone. Its targets are ordinary export rows that name it (`batch_id`); the write that ends
each one moves the batch's counts (`bindery.storage.endings`), and the batch service ends the batch after
the last one (`bindery.batches.settle_batch`, with the `batch` queue of `by_due` as the backstop): it
decides how the batch ended and what its bundle is, and :meth:`BatchRows.end_batch` writes it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from pynamodb.expressions.condition import size

from bindery.config import Settings
from bindery.faults import StorageError, item_or_none, translate_faults
from bindery.limits import Limits
from bindery.states import BatchStatus, Queue
from bindery.storage.caps import shard_refused, take_shards, under_budget
from bindery.storage.conditions import ItemRefused, Tx, update_if
from bindery.storage.exports import pending_row
from bindery.storage.idempotency import KeyRows, key_seen
from bindery.storage.table import (
    BatchesDue,
    BatchItem,
    ExportItem,
    LiveItem,
    Models,
    Rows,
    batch_sk,
    book_pk,
    caller_pk,
    expired_ttl,
    export_sk,
    to_export,
)
from bindery.storage.types import (
    Batch,
    BatchCreated,
    BatchOutcome,
    Export,
    OverBudget,
    ShardFull,
    Target,
    TooManyBatches,
)

# How long a running batch waits in the `batch` queue before the sweep looks at it (and again after that,
# until it has ended): the backstop for an ending whose settle was lost with its process.
BATCH_CHECK_SECONDS = 600
# A cancel ends its targets itself, before its answer; the sweep finishes one whose process died, a minute on.
CANCEL_CHECK_SECONDS = 60
# The ended statuses that had a target ready, and so links a cancel ends (a failed batch has none).
_WITH_LINKS = (BatchStatus.DONE.value, BatchStatus.PARTIAL.value)


@translate_faults
class BatchRows(Rows):
    def __init__(self, settings: Settings, models: Models, keys: KeyRows):
        super().__init__(settings, models)
        self.keys = keys

    def books_owned(self, book_ids: set[str], caller: str) -> bool:
        """Whether the caller owns every one of these books (one consistent BatchGetItem per 100). A book
        never changes hands, so what this read says of ownership stays true; a book deleted after it is
        the deleted-book path every export already has (its build is cancelled)."""
        keys = [(book_pk(b), "BOOK") for b in book_ids]
        owned = {
            item.pk.removeprefix("BOOK#")
            for item in self.models.book.batch_get(keys, consistent_read=True)
            if item.owner == caller
        }
        return owned == book_ids

    def create_batch(
        self,
        batch: Batch,
        targets: list[Export],
        *,
        limits: Limits,
        shards: dict[int, int],
        now: float,
        idempotency: tuple[str, str, dict[str, Any]] | None,
    ) -> BatchOutcome:
        """ONE TransactWriteItems: the batch's row, every target's export row, the Idempotency-Key, the
        caller's live item (a place among its live batches, under its budget) and the global cap's shards
        the targets' ids name (`shards`: how many each takes). All of it is written, or none."""
        caller = batch.caller
        tx = Tx()
        key = None
        if idempotency is not None:
            key = idempotency[:2]
            self.keys.take_key(tx, key, idempotency[2], now, export_id=batch.id)
        row = self.models.batch(
            caller_pk(caller),
            batch_sk(batch.id),
            batch_id=batch.id,
            caller_class=batch.caller_class,
            counted_against=caller,
            status=BatchStatus.RUNNING.value,
            targets=json.dumps([t._asdict() for t in batch.targets], separators=(",", ":")),
            targets_total=batch.targets_total,
            targets_done=0,
            n_ready=0,
            n_failed=0,
            n_cancelled=0,
            bytes=0,
            created_at=now,
            key_digest=key[0] if key else None,
            queue=Queue.BATCH.value,
            due_at=now + BATCH_CHECK_SECONDS,
        )
        tx.put("batch", row, BatchItem.pk.does_not_exist(), old=True)
        for n, export in enumerate(targets):
            # The key is the batch's (its row carries the digest), not any one target's.
            row_n = pending_row(self.models, self.settings, export, caller, None, now)
            tx.put(f"export:{n}", row_n, ExportItem.pk.does_not_exist())
        # The cap on live batches is checked against the set it counts, in the write that grows it.
        tx.update(
            "live",
            self.models.live(caller_pk(caller), "LIVE"),
            [LiveItem.batch_ids.add({batch.id})],
            (LiveItem.batch_ids.does_not_exist() | (size(LiveItem.batch_ids) < limits.live_batches))
            & under_budget(limits),
            old=True,
        )
        take_shards(tx, self.models, self.settings, shards)
        refused = tx.commit(self._connection())
        if refused is None:
            return BatchCreated(batch.id)
        mine = refused.old(BatchItem, "batch")
        if mine is not None and mine.created_at == now and mine.status == BatchStatus.RUNNING.value:
            return BatchCreated(batch.id)  # this very write, applied by a try whose answer was lost
        seen = key_seen(refused, key)
        if seen is not None:
            return seen
        if refused.failed("live"):
            old = refused.old(LiveItem, "live")
            usage = int(old.usage or 0) if old is not None else 0
            if usage >= limits.storage_bytes:
                return OverBudget(usage)
            return TooManyBatches(tuple(sorted(old.batch_ids or ())) if old is not None else ())
        if shard_refused(refused):
            return ShardFull(-1)
        raise StorageError(f"batch {batch.id} or one of its exports exists already (an id collision)")

    def read_batch(
        self, caller: str, batch_id: str, now: float
    ) -> tuple[Batch, list[Export], Export | None] | None:
        """The caller's batch, then its targets' rows and its bundle's (a GetItem, then one BatchGetItem):
        None when there is no such batch of this caller's. The two reads are moments apart, and an ending
        may land between them; the rows only move on (a target never returns to pending), so the rows read
        second are the later truth, and a view that counts must count them (`BatchRequests.batch_view`),
        not the batch row's counters."""
        item = self._batch_item(caller, batch_id, now)
        if item is None:
            return None
        batch = _to_batch(item)
        keys = [(book_pk(t.book_id), export_sk(t.export_id)) for t in batch.targets]
        if batch.bundle_id is not None:
            keys.append((book_pk(batch.id), export_sk(batch.bundle_id)))
        rows = {i.export_id: to_export(i) for i in self.models.export.batch_get(keys, consistent_read=True)}
        targets = [rows[t.export_id] for t in batch.targets if t.export_id in rows]
        return batch, targets, rows.get(batch.bundle_id) if batch.bundle_id is not None else None

    def _batch_item(self, caller: str, batch_id: str, now: float) -> BatchItem | None:
        item = item_or_none(
            lambda: self.models.batch.get(caller_pk(caller), batch_sk(batch_id), consistent_read=True)
        )
        return None if item is None or expired_ttl(item.ttl, now) else item

    def read_batch_row(self, caller: str, batch_id: str) -> Batch | None:
        """The batch's row alone, read consistently (one GetItem): the counts its settlement decides from."""
        item = item_or_none(
            lambda: self.models.batch.get(caller_pk(caller), batch_sk(batch_id), consistent_read=True)
        )
        return None if item is None else _to_batch(item)

    def end_batch(self, batch: Batch, status: BatchStatus, bundle: Export | None, now: float) -> bool:
        """End a running batch as `status`, with its bundle's pending row when it has one (made by the batch
        service), and give back its place among its caller's live batches, in one write. False: it had
        ended already (another settle won, or this one's own resend, its answer lost)."""
        caller = batch.caller
        tx = Tx()
        bundle_id = []
        if bundle is not None:
            # One zip of its ready files: a row of its own, which the stream makes a build message of.
            tx.put("bundle", pending_row(self.models, self.settings, bundle, caller, None, now))
            bundle_id = [BatchItem.bundle_id.set(bundle.id)]
        tx.update(
            "batch",
            self.models.batch(caller_pk(caller), batch_sk(batch.id)),
            [
                *bundle_id,
                BatchItem.status.set(status.value),
                BatchItem.transition.set(f"bindery.batch.{status.value}"),
                BatchItem.finished_at.set(now),
                BatchItem.queue.remove(),
                BatchItem.due_at.remove(),
                BatchItem.ttl.set(now + self.settings.ended_retention_seconds),
            ],
            # `status = running` lets a batch end once (two last endings, a sweep and a worker, race to it);
            # `targets_done = total` re-checks in the write what the read saw.
            (BatchItem.status == BatchStatus.RUNNING.value) & (BatchItem.targets_done == batch.targets_total),
        )
        tx.update(
            "live", self.models.live(caller_pk(caller), "LIVE"), [LiveItem.batch_ids.delete({batch.id})]
        )
        return tx.commit(self._connection()) is None

    def list_batches(
        self, caller: str, *, limit: int, start_after: str | None, now: float
    ) -> tuple[list[Batch], str | None]:
        """One page of the caller's batches, newest first (ids sort by time)."""
        last_key = None
        if start_after is not None:
            last_key = {"pk": {"S": caller_pk(caller)}, "sk": {"S": batch_sk(start_after)}}
        results = self.models.batch.query(
            caller_pk(caller),
            BatchItem.sk.startswith("BATCH#"),
            scan_index_forward=False,
            consistent_read=True,
            limit=limit,
            last_evaluated_key=last_key,
            page_size=limit,
        )
        page = [_to_batch(item) for item in results if not expired_ttl(item.ttl, now)]
        next_after = None
        if results.last_evaluated_key is not None:
            next_after = results.last_evaluated_key["sk"]["S"].removeprefix("BATCH#")
        return page, next_after

    def cancel_batch(self, caller: str, batch_id: str, now: float) -> Batch | None:
        """Cancel the caller's batch. A running one is marked cancelled and gives back its place among the
        caller's live batches, in one write; its targets are then ended one by one by the caller of this,
        and the `batch` queue holds the batch (due a minute later) until every one has, should that caller
        die first. One that had ended keeps how and when it ended: the end of its links is recorded as a
        time of its own (:meth:`_revoke_batch`). None: no such batch."""
        tx = Tx()
        tx.update(
            "batch",
            self.models.batch(caller_pk(caller), batch_sk(batch_id)),
            [
                BatchItem.status.set(BatchStatus.CANCELLED.value),
                BatchItem.transition.set("bindery.batch.cancelled"),
                BatchItem.finished_at.set(now),
                BatchItem.queue.set(Queue.BATCH.value),
                BatchItem.due_at.set(now + CANCEL_CHECK_SECONDS),
            ],
            # `pk exists`: a cancel must not make a batch out of nothing, nor (`ttl`) out of one whose
            # retention has run out and that TTL has yet to delete. `status = running`: a batch that has
            # ended (settled, or cancelled already) keeps its status, its finished_at and the event its
            # receivers acted on; a second cancel changes nothing and publishes nothing.
            BatchItem.pk.exists()
            & (BatchItem.ttl.does_not_exist() | (BatchItem.ttl > now))
            & (BatchItem.status == BatchStatus.RUNNING.value),
            old=True,
        )
        tx.update(
            "live", self.models.live(caller_pk(caller), "LIVE"), [LiveItem.batch_ids.delete({batch_id})]
        )
        refused = tx.commit(self._connection())
        if refused is not None:
            old = refused.old(BatchItem, "batch")
            if old is None or expired_ttl(old.ttl, now):
                return None
            if old.status in _WITH_LINKS and old.revoked_at is None:
                self._revoke_batch(caller, batch_id, now)
        found = self.read_batch(caller, batch_id, now)
        return None if found is None else found[0]

    def _revoke_batch(self, caller: str, batch_id: str, now: float) -> None:
        """An ended batch's links end now: `revoked_at` records when, and the row's `transition` names the
        one event that says so (`bindery.batch.revoked`). The batch joins the `batch` queue, so the sweep ends
        its targets' links and its bundle's should the caller's process die before it has."""
        # Refused: revoked already (perhaps by this very write, resent).
        with contextlib.suppress(ItemRefused):
            update_if(
                self.client,
                self.models.batch,
                caller_pk(caller),
                batch_sk(batch_id),
                [
                    BatchItem.revoked_at.set(now),
                    BatchItem.transition.set("bindery.batch.revoked"),
                    BatchItem.queue.set(Queue.BATCH.value),
                    BatchItem.due_at.set(now + CANCEL_CHECK_SECONDS),
                ],
                # `revoked_at` absent: the links end once, so there is one time and one event. Only `done`
                # and `partial` have links to end; the status itself is never written here.
                BatchItem.status.is_in(*_WITH_LINKS) & BatchItem.revoked_at.does_not_exist(),
            )

    def batch_cleared(self, caller: str, batch_id: str, now: float) -> None:
        """A cancelled (or revoked) batch whose every target has ended leaves the `batch` queue, and is kept
        as long as any ended batch is (TTL; a settled batch keeps the TTL its settle gave it)."""
        # Refused: neither cancelled nor revoked, so it stays where it is.
        with contextlib.suppress(ItemRefused):
            update_if(
                self.client,
                self.models.batch,
                caller_pk(caller),
                batch_sk(batch_id),
                [
                    BatchItem.queue.remove(),
                    BatchItem.due_at.remove(),
                    BatchItem.ttl.set(BatchItem.ttl | (now + self.settings.ended_retention_seconds)),
                ],
                (BatchItem.status == BatchStatus.CANCELLED.value) | BatchItem.revoked_at.exists(),
            )

    def due_batches(self, now: float, limit: int) -> list[tuple[str, str]]:
        """(caller, batch id) of batches the sweep is to look at now."""
        return [
            (item.pk.removeprefix("CALLER#"), item.sk.removeprefix("BATCH#"))
            for item in self.models.batch.by_due.query(
                Queue.BATCH.value, BatchesDue.due_at <= now, limit=limit
            )
        ]

    def defer_batch(self, caller: str, batch_id: str, now: float) -> None:
        """A running batch whose targets have not all ended: look again later."""
        with contextlib.suppress(ItemRefused):  # refused: it left the queue meanwhile (settled)
            update_if(
                self.client,
                self.models.batch,
                caller_pk(caller),
                batch_sk(batch_id),
                [BatchItem.due_at.set(now + BATCH_CHECK_SECONDS)],
                BatchItem.queue == Queue.BATCH.value,
            )

    def all_batches(self) -> Iterator[Batch]:
        """Every batch row, by Scan. For tests and operators only."""
        for item in self.models.batch.scan(BatchItem.sk.startswith("BATCH#")):
            yield _to_batch(item)


def _to_batch(item: BatchItem) -> Batch:
    return Batch(
        id=item.batch_id,
        caller=item.pk.removeprefix("CALLER#"),
        caller_class=item.caller_class,
        status=item.status,
        targets=tuple(Target(**t) for t in json.loads(item.targets)),
        targets_done=int(item.targets_done or 0),
        n_ready=int(item.n_ready or 0),
        n_failed=int(item.n_failed or 0),
        n_cancelled=int(item.n_cancelled or 0),
        bytes=int(item.bytes or 0),
        created_at=item.created_at,
        finished_at=item.finished_at,
        bundle_id=item.bundle_id,
        revoked_at=item.revoked_at,
    )
