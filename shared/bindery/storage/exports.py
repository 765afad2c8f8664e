"""Exports as callers see them: submit, read, list, cancel and revoke; and ending a deleted book's exports.

A submit is one transaction of the export row, its Idempotency-Key and the caller's live set. Ownership lives
on the book item and nowhere else ("one carrier of that fact"): every caller read or write of an
export checks the book's `owner` in the same round trip.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pynamodb.expressions.condition import size
from pynamodb.transactions import TransactGet

from bindery.config import Settings
from bindery.faults import StorageError, item_or_none, translate_faults
from bindery.limits import Limits, shard_of
from bindery.states import Cancel, Queue, State
from bindery.storage import steps
from bindery.storage.caps import take_shards, under_budget
from bindery.storage.conditions import (
    Tx,
    future_value,
)
from bindery.storage.endings import LifecycleRows
from bindery.storage.idempotency import KeyRows, key_seen
from bindery.storage.lifecycle import Applied, ended_target
from bindery.storage.table import (
    CAP_PK,
    BookItem,
    ExportItem,
    LiveItem,
    Models,
    Rows,
    book_pk,
    caller_pk,
    expired_ttl,
    export_sk,
    shard_sk,
    to_book,
    to_export,
)
from bindery.storage.types import (
    Accepted,
    Book,
    Cancelled,
    CancelOutcome,
    EndedTarget,
    Export,
    Holdings,
    NotFound,
    OverBudget,
    OverCap,
    Revoked,
    ShardFull,
    Slot,
    SubmitOutcome,
)


@translate_faults
class ExportRows(Rows):
    def __init__(self, settings: Settings, models: Models, lifecycle: LifecycleRows, keys: KeyRows):
        super().__init__(settings, models)
        self.lifecycle, self.keys = lifecycle, keys

    def submit_export(
        self,
        export: Export,
        *,
        caller: str,
        limits: Limits,
        now: float,
        idempotency: tuple[str, str, dict[str, Any]] | None,
    ) -> SubmitOutcome:
        """Accept an export: ONE TransactWriteItems writes the export row, the idempotency key, the
        caller's live item and the global cap's shard that the export's id names, so none of them can
        exist without the others.

        `idempotency` is (key digest, request hash, the response to replay) or None.
        """
        export_item = pending_row(
            self.models, self.settings, export, caller, idempotency[0] if idempotency else None, now
        )
        tx = Tx()
        # The caller must own the book. Nothing else about the book can refuse an export (the canon: the
        # request is always accepted, and its outcome is the export's own).
        tx.check("book", self.models.book, book_pk(export.book_id), "BOOK", BookItem.owner == caller)
        key = None
        if idempotency is not None:
            key = idempotency[:2]
            self.keys.take_key(tx, key, idempotency[2], now, export_id=export.id)
        # A fresh random id; the guard turns a (vanishingly rare) collision into a refusal, not an
        # overwrite of someone's export.
        tx.put("export", export_item, ExportItem.pk.does_not_exist(), old=True)
        # The caps are checked against what they count, in the same write that grows it, so 4 x cap
        # concurrent submits can never leave more than cap live, nor a caller over its budget start more.
        tx.update(
            "live",
            self.models.live(caller_pk(caller), "LIVE"),
            [LiveItem.live_ids.add({export.id})],
            (LiveItem.live_ids.does_not_exist() | (size(LiveItem.live_ids) < limits.live_exports))
            & under_budget(limits),
            old=True,
        )
        take_shards(tx, self.models, self.settings, {shard_of(export.id): 1})
        refused = tx.commit(self._connection())
        if refused is None:
            return Accepted(export)
        # The row under this fresh id, with this request's time, is this submit's own, applied by a try
        # whose answer was lost: botocore's resend was refused by the conditions that try made true.
        mine = refused.old(ExportItem, "export")
        if mine is not None and mine.requested_at == export.requested_at and mine.counted_against == caller:
            return Accepted(export)
        if refused.failed("book"):
            return NotFound()
        seen = key_seen(refused, key)
        if seen is not None:
            return seen
        if refused.failed("live"):
            old_live = refused.old(LiveItem, "live")
            usage = int(old_live.usage or 0) if old_live is not None else 0
            if usage >= limits.storage_bytes:
                return OverBudget(usage)
            return OverCap(tuple(sorted(old_live.live_ids or ())) if old_live is not None else ())
        if refused.failed("shard"):
            return ShardFull(shard_of(export.id))
        raise StorageError(f"export {export.id} exists already (an id collision)")

    def holdings(self, caller: str, *, consistent: bool = True) -> Holdings:
        """What the caller holds at once (one read of its live item)."""
        return _holdings(
            item_or_none(lambda: self.models.live.get(caller_pk(caller), "LIVE", consistent_read=consistent))
        )

    def shard_room(self) -> dict[int, int]:
        """How many more live exports each of the global cap's shards takes now (one BatchGetItem); what a
        submit refused by its shard, or a batch, plans by. The writes re-check it."""
        caps = self.settings.shard_caps
        taken = {k: 0 for k in range(len(caps))}
        keys = [(CAP_PK, shard_sk(k)) for k in taken]
        for item in self.models.shard.batch_get(keys, consistent_read=True):
            taken[int(item.sk.removeprefix("SHARD#"))] = int(item.n or 0)
        return {k: caps[k] - taken[k] for k in taken}

    def read_export_for_owner(
        self, book_id: str, export_id: str, owner: str, now: float
    ) -> tuple[Export, Book] | None:
        """The export and its book in ONE TransactGetItems: the owner check and the book's revision
        come from the same snapshot as the export, so they cannot be a transaction apart. (Not the
        caller's live item too: every submit and ending of the caller's writes it, and a transactional
        read of an item a transaction is writing is cancelled: the poll would fail under its own load.)"""
        with TransactGet(connection=self._connection()) as tx:
            book_f = tx.get(self.models.book, book_pk(book_id), "BOOK")
            export_f = tx.get(self.models.export, book_pk(book_id), export_sk(export_id))
        book_item = future_value(book_f)
        export_item = future_value(export_f)
        if book_item is None or export_item is None or book_item.owner != owner:
            return None
        if expired_ttl(export_item.ttl, now):
            return None
        return to_export(export_item), to_book(book_item)

    def list_exports(
        self, book_id: str, *, limit: int, start_after: str | None, now: float
    ) -> tuple[list[Export], str | None]:
        """One page of a book's exports, newest first (ids sort by time). The caller checked ownership.

        Returns the page and the id to start after for the next page, or None at the end.
        """
        last_key = None
        if start_after is not None:
            last_key = {"pk": {"S": book_pk(book_id)}, "sk": {"S": export_sk(start_after)}}
        results = self.models.export.query(
            book_pk(book_id),
            ExportItem.sk.startswith("EXPORT#"),
            scan_index_forward=False,
            consistent_read=True,
            limit=limit,
            last_evaluated_key=last_key,
            page_size=limit,
        )
        page = [to_export(item) for item in results if not expired_ttl(item.ttl, now)]
        next_after = None
        if results.last_evaluated_key is not None:
            next_after = results.last_evaluated_key["sk"]["S"].removeprefix("EXPORT#")
        return page, next_after

    def cancel_export(self, book_id: str, export_id: str, owner: str, now: float) -> CancelOutcome:
        """pending -> cancelled, with the live set shrinking in the same write; or ready -> expired at once.

        Returns Cancelled (CANCELLED; or ENDED: it had already ended, nothing to do), a Revoked (a ready
        link ended now: its bytes are to go at once) or NotFound; a batch's target says so (`target`), for
        its batch to be settled. A pending export costs one transaction. A ready one costs a second, because
        only the first one's ALL_OLD tells us the row was ready, not pending.
        """
        outcome = self.lifecycle.transition(steps.cancel(Slot(book_id, export_id, owner), owner, now))
        if "book" in outcome.failed:
            return NotFound()
        target = ended_target(outcome)
        if isinstance(outcome, Applied):
            return Cancelled(Cancel.CANCELLED, target)  # now, or by this cancel's own earlier try
        old = outcome.row
        if old is None or expired_ttl(old.ttl, now):
            return NotFound()
        if old.state == State.EXPIRED.value and old.queue == Queue.UNLINK.value and old.paths:
            # Revoked (or lapsed) already, its bytes not yet deleted: a cancel that revoked it and could not
            # delete them, retried, deletes them now rather than leave a URL handed out earlier working.
            return Revoked(book_id, export_id, frozenset(old.paths), target)
        if old.state != State.READY.value:
            return Cancelled(Cancel.ENDED, target)
        revoked = self._revoke(outcome.slot, frozenset(old.paths or ()), now, owner=owner, target=target)
        return Cancelled(Cancel.ENDED, target) if revoked is None else revoked

    def _revoke(
        self,
        slot: Slot,
        paths: frozenset[str],
        now: float,
        *,
        owner: str | None,
        target: EndedTarget | None = None,
    ) -> Revoked | None:
        """ready -> expired now, the row keeping its paths so that the unlink (done at once by the caller,
        and by the GC should that fail) can find them. None: not ready any more (the GC expired it first)."""
        outcome = self.lifecycle.transition(steps.revoke(slot, now, owner=owner))
        if not isinstance(outcome, Applied):
            return None
        # The paths as the row was seen ready, or (this write's own lost answer) as the refusal shows them.
        seen = paths if outcome.row is None else frozenset(outcome.row.paths or ())
        return Revoked(slot.book_id, slot.export_id, seen, target)

    def book_exports(self, book_id: str) -> Iterator[Export]:
        """Every export of a book, read consistently: a purge must see a finish that committed before it."""
        for item in self.models.export.query(
            book_pk(book_id), ExportItem.sk.startswith("EXPORT#"), consistent_read=True
        ):
            yield to_export(item)

    def end_for_deleted_book(self, export: Export, now: float) -> Revoked | bool:
        """End a deleted book's export, whatever it became meanwhile: pending is cancelled (its live slot
        freed), ready expires now (a Revoked: its bytes go at once), and one already ended is left alone.
        No owner check: the book, and so its owner, is gone.

        A write refused because the row moved on (a finish or a cancel landed between the read and the
        write) is tried again on the row as the refusal shows it (ALL_OLD, so no second read). True: ended,
        now or before. False: it kept moving; the purge marker stays and the GC tries again."""
        state = export.state
        for _ in range(4):
            if state == State.READY:
                revoked = self._revoke(export.slot, export.paths, now, owner=None)
                if revoked is not None:
                    return revoked
            elif state == State.PENDING:
                if isinstance(self.lifecycle.transition(steps.purge(export.slot, now)), Applied):
                    return True
            else:
                return True
            current = self._read_export(export.book_id, export.id)
            if current is None:
                return True
            export, state = current, current.state
            if state == State.CANCELLED and current.finished_at == now:
                return True  # this purge's own cancel, whose answer was lost
        return False

    def _read_export(self, book_id: str, export_id: str) -> Export | None:
        key = book_pk(book_id), export_sk(export_id)
        item = item_or_none(lambda: self.models.export.get(*key, consistent_read=True))
        return None if item is None else to_export(item)

    def live_ids(self, caller: str) -> frozenset[str]:
        item = item_or_none(lambda: self.models.live.get(caller_pk(caller), "LIVE", consistent_read=True))
        return frozenset() if item is None else frozenset(item.live_ids or ())

    def all_exports(self) -> Iterator[Export]:
        """Every export row, by Scan. For tests and operators only; no request path calls it."""
        for item in self.models.export.scan(ExportItem.sk.startswith("EXPORT#")):
            yield to_export(item)


def pending_row(
    models: Models, settings: Settings, export: Export, caller: str, key_digest: str | None, now: float
) -> ExportItem:
    """A new export's row: pending, waiting for the stale sweep until a worker claims it. A submit's, a
    batch's targets' and a bundle's rows are all made here."""
    return models.export(
        book_pk(export.book_id),
        export_sk(export.id),
        export_id=export.id,
        book_id=export.book_id,
        format=export.format,
        state=State.PENDING.value,
        requested_at=export.requested_at,
        counted_against=caller,
        caller_class=export.caller_class,
        batch_id=export.batch_id,
        key_digest=key_digest,
        options=json.dumps(export.options, separators=(",", ":")) if export.options else None,
        attempt=0,
        queue=Queue.STALE.value,
        due_at=now + settings.queue_grace_seconds,
    )


def _holdings(item: LiveItem | None) -> Holdings:
    if item is None:
        return Holdings(0, 0, 0)
    return Holdings(len(item.live_ids or ()), len(item.batch_ids or ()), int(item.usage or 0))
