"""The one commit of every step of the lifecycle, and the counts a pending export's ending gives back.

`transition()` writes any :class:`~bindery.storage.lifecycle.Transition`: one UpdateItem for a single
row's step, else one TransactWriteItems of the row, its book's check, and the counts it moves. Nothing else
writes an export's row after its submit.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bindery.limits import shard_of
from bindery.states import State
from bindery.storage.conditions import ItemRefused, Tx, update_if
from bindery.storage.lifecycle import Applied, Outcome, Refused, Transition
from bindery.storage.table import (
    CAP_PK,
    BatchItem,
    ExportItem,
    LiveItem,
    Rows,
    ShardItem,
    batch_sk,
    book_pk,
    caller_pk,
    export_sk,
    shard_sk,
)
from bindery.storage.types import BUNDLE, Slot


class LifecycleRows(Rows):
    """The one commit of every transition: nothing else writes an export's row after its submit."""

    def transition(self, t: Transition) -> Outcome:
        """Commit `t`, and say how it came out. A refusal whose row shows this transition's own marks is
        its own earlier try, applied with its answer lost, and answers as the success would have.

        A pending row's ending made for a slot that guessed its kind wrong (read from the index, which
        carries neither `batch_id` nor the format; or made from a path) is refused by the kind guard
        (:meth:`_end_counts`), and is made again for the row as its ALL_OLD shows it."""
        if t.single:
            return self._update(t)
        outcome = self._transact(t)
        row = outcome.row if isinstance(outcome, Refused) else None
        if t.ends is not None and row is not None:
            seen = replace_kind(t.slot, row)
            if seen != t.slot:
                outcome = self._transact(replace(t, slot=seen))
        return outcome

    def _update(self, t: Transition) -> Outcome:
        key = book_pk(t.slot.book_id), export_sk(t.slot.export_id)
        try:
            row = update_if(self.client, self.models.export, *key, list(t.writes), t.guard)
        except ItemRefused as refused:
            if t.recognises(refused.old):
                return Applied(t.step, t.slot, refused.old)
            return Refused(t.step, t.slot, refused.old, frozenset({"export"}))
        return Applied(t.step, t.slot, row)

    def _transact(self, t: Transition) -> Outcome:
        slot = t.slot
        tx = Tx()
        if t.book is not None:
            tx.check("book", self.models.book, book_pk(slot.book_id), "BOOK", t.book)
        guard = t.guard if t.ends is None else t.guard & _kind(slot)
        tx.update(
            "export",
            self.models.export(book_pk(slot.book_id), export_sk(slot.export_id)),
            list(t.writes),
            guard,
            old=True,
        )
        if t.ends is not None:
            self._end_counts(tx, slot, t.ends, t.published)
        if t.usage_back:
            live = self.models.live(caller_pk(slot.counted_against), "LIVE")
            tx.update("live", live, [LiveItem.usage.add(-t.usage_back)])
        refused = tx.commit(self._connection())
        if refused is None:
            return Applied(t.step, slot)
        row = refused.old(ExportItem, "export")
        failed = frozenset(name for name in refused.reasons if refused.failed(name))
        if t.recognises(row):
            return Applied(t.step, slot, row, failed)
        return Refused(t.step, slot, row, failed)

    def _end_counts(self, tx: Tx, slot: Slot, ending: State, published: int | None) -> None:
        """Add to `tx` everything that counted a pending export, given back in the write that ends it.
        Nothing else gives those back, so each count moves exactly when an export stops being pending, and
        a resent or redelivered ending (refused by its guard) moves none of them:

        - a single export's slot in its caller's live set ("live"), or a batch target's ending in its batch's
          counts ("batch": targets_done and the ending's own count);
        - its slot in the global cap's shard ("shard"), named by its id;
        - `published`: the bytes a finish publishes, added to the caller's usage (and the batch's bytes).
        """
        live = self.models.live(caller_pk(slot.counted_against), "LIVE")
        if not slot.in_caps:
            # A row from before the caps took no slot of the global cap and counted no bytes: it gives none
            # back and adds none (its live-set slot is the one count it has).
            tx.update("live", live, [LiveItem.live_ids.delete({slot.export_id})])
            return
        usage = [LiveItem.usage.add(published)] if published else []
        if slot.bundle:
            # A bundle holds no place in any cap: only the bytes it publishes count, in its caller's usage.
            if usage:
                tx.update("live", live, usage)
            return
        if slot.batch_id is None:
            tx.update("live", live, [LiveItem.live_ids.delete({slot.export_id}), *usage])
        else:
            counts = [
                BatchItem.targets_done.add(1),
                _ENDING_COUNT[ending].add(1),
                *([BatchItem.bytes.add(published)] if published else []),
            ]
            tx.update(
                "batch", self.models.batch(caller_pk(slot.counted_against), batch_sk(slot.batch_id)), counts
            )
            if usage:
                tx.update("live", live, usage)
        tx.update(
            "shard", self.models.shard(CAP_PK, shard_sk(shard_of(slot.export_id))), [ShardItem.n.add(-1)]
        )


_ENDING_COUNT = {
    State.READY: BatchItem.n_ready,
    State.FAILED: BatchItem.n_failed,
    State.CANCELLED: BatchItem.n_cancelled,
}


def _kind(slot: Slot) -> Any:
    """The guard that the slot's kind is the row's: the slot says which counts the ending moves, and a slot
    that guessed wrong is refused (its ALL_OLD then says which it is: `replace_kind`)."""
    kind: Any = ExportItem.batch_id.does_not_exist() & (ExportItem.format != BUNDLE)
    if slot.batch_id is not None:
        kind = ExportItem.batch_id == slot.batch_id
    elif slot.bundle:
        kind = ExportItem.format == BUNDLE
    return kind & (
        ExportItem.caller_class.exists() if slot.in_caps else ExportItem.caller_class.does_not_exist()
    )


def replace_kind(slot: Slot, row: ExportItem) -> Slot:
    """The slot with the kind the row shows: its batch, whether it is a bundle, whether it is in the caps."""
    return slot._replace(
        batch_id=row.batch_id, bundle=row.format == BUNDLE, in_caps=row.caller_class is not None
    )
