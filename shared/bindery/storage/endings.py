"""How an export's row ends: the actions that move it to a state, and the one transaction that ends a pending
export and frees its live slot. Every ending in claims, exports and sweeps is written with these, so each
ends the row the same way and names the event its state publishes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pynamodb.exceptions import DoesNotExist

from bindery.faults import AWS_ERRORS
from bindery.ids import new_id
from bindery.limits import shard_of
from bindery.observability import logger
from bindery.states import BatchStatus, Queue, State
from bindery.storage.conditions import (
    Refusal,
    Tx,
)
from bindery.storage.table import (
    CAP_PK,
    BatchItem,
    ExportItem,
    LiveItem,
    Models,
    Rows,
    ShardItem,
    batch_sk,
    book_pk,
    caller_pk,
    export_sk,
    shard_sk,
)
from bindery.storage.types import BUNDLE, Slot


def becomes(state: str) -> list[Any]:
    """The actions that move a row to `state`, naming the event its terminal states publish."""
    actions = [ExportItem.state.set(state)]
    if state != State.PENDING.value:
        actions.append(ExportItem.transition.set(f"bindery.export.{state}"))
    return actions


def end_actions(state: State, now: float) -> list[Any]:
    """How any ended row is written: it leaves the live set's accounting and joins the unlink queue.

    It waits there until its last lease has run out, because until then an attempt may still upload;
    an unlink before that could be followed by the upload it was meant to remove.
    """
    return [
        *becomes(state.value),
        ExportItem.finished_at.set(now),
        ExportItem.queue.set(Queue.UNLINK.value),
        # if_not_exists(lease_until, now): a lease that is still running holds the unlink back.
        ExportItem.due_at.set(ExportItem.lease_until | now),
    ]


def revoke_actions(now: float) -> list[Any]:
    """A ready link ended now: the row says expired from this second; its bytes join the unlink queue."""
    return [
        *becomes(State.EXPIRED.value),
        ExportItem.expires_at.set(now),
        ExportItem.queue.set(Queue.UNLINK.value),
        ExportItem.due_at.set(now),
    ]


def end_pending(
    tx: Tx,
    m: Models,
    slot: Slot,
    actions: list[Any],
    condition: Any,
    *,
    ending: State,
    published: int | None = None,
) -> None:
    """Add to `tx` the one way a pending export ends: its row written with `actions` under `condition`
    (ALL_OLD on refusal, by the name "export"), and in the same transaction everything that counted it
    while it was pending. Nothing else gives those back, so each count moves exactly when an export stops
    being pending, and a resent or redelivered ending (refused by `condition`) moves none of them:

    - a single export's slot in its caller's live set ("live"), or a batch target's ending in its batch's
      counts ("batch": targets_done and the ending's own count);
    - its slot in the global cap's shard ("shard"), named by its id;
    - `published`: the bytes a finish publishes, added to the caller's usage (and the batch's bytes).
    """
    row = m.export(book_pk(slot.book_id), export_sk(slot.export_id))
    # The slot says which counts the row moves; the guard refuses a slot that guessed its kind wrong (one
    # read from the index, which carries neither `batch_id` nor the format), and the refusal's ALL_OLD says
    # which it is (`EndingRows.commit_ending` tries again with it).
    kind: Any = ExportItem.batch_id.does_not_exist() & (ExportItem.format != BUNDLE)
    if slot.batch_id is not None:
        kind = ExportItem.batch_id == slot.batch_id
    elif slot.bundle:
        kind = ExportItem.format == BUNDLE
    kind &= ExportItem.caller_class.exists() if slot.counted else ExportItem.caller_class.does_not_exist()
    tx.update("export", row, actions, condition & kind, old=True)
    live = m.live(caller_pk(slot.counted_against), "LIVE")
    if not slot.counted:
        # A row from before the caps took no slot of the global cap and counted no bytes: it gives none back
        # and adds none (its live-set slot is the one count it has).
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
        tx.update("batch", m.batch(caller_pk(slot.counted_against), batch_sk(slot.batch_id)), counts)
        if usage:
            tx.update("live", live, usage)
    tx.update("shard", m.shard(CAP_PK, shard_sk(shard_of(slot.export_id))), [ShardItem.n.add(-1)])


_ENDING_COUNT = {
    State.READY: BatchItem.n_ready,
    State.FAILED: BatchItem.n_failed,
    State.CANCELLED: BatchItem.n_cancelled,
}


class EndingRows(Rows):
    """The ending writes' one commit, shared by every module that ends an export."""

    def commit_ending(self, build: Callable[[Slot], Tx], slot: Slot, now: float) -> Refusal | None:
        """Commit the ending `build` makes for `slot`; None when it committed, else the refusal.

        A slot read from the `by_due` index (the stale sweep's), or made from a path (a caller's cancel),
        cannot know whether the row is a batch's target; `end_pending`'s guard refuses the wrong guess, and
        the ending is made again for the row as its ALL_OLD shows it. A batch target's ending then looks at
        its batch (:meth:`settle_batch`): the last target's ending ends the batch. It does so too when the
        row had ended already, since that may have been this very ending, its answer lost."""
        refused = build(slot).commit(self._connection())
        old = None if refused is None else refused.old(ExportItem, "export")
        seen = None if old is None else (old.batch_id, old.format == BUNDLE, old.caller_class is not None)
        if seen is not None and seen != (slot.batch_id, slot.bundle, slot.counted):
            slot = slot._replace(batch_id=seen[0], bundle=seen[1], counted=seen[2])
            refused = build(slot).commit(self._connection())
            old = None if refused is None else refused.old(ExportItem, "export")
        ended = refused is None or (old is not None and old.state != State.PENDING)
        if slot.batch_id is not None and ended:
            try:
                self.settle_batch(slot.counted_against, slot.batch_id, now)
            except AWS_ERRORS:
                # The target's ending stands; the batch sweep settles the batch on its next run.
                logger.warning("batch left to the sweep to settle", extra={"batch_id": slot.batch_id})
        return refused

    def settle_batch(self, caller: str, batch_id: str, now: float) -> str | None:
        """End a batch whose every target has ended: done (all ready), failed (none), or partial; its place
        among the caller's live batches is given back in the same write. The status it ended with, or None
        when it has not ended (targets still pending) or had ended already."""
        try:
            item = self.m.batch.get(caller_pk(caller), batch_sk(batch_id), consistent_read=True)
        except DoesNotExist:
            return None
        if item.status != BatchStatus.RUNNING or item.targets_done < item.targets_total:
            return None
        ready = int(item.n_ready)
        status = (
            BatchStatus.DONE
            if ready == item.targets_total
            else BatchStatus.FAILED
            if ready == 0
            else BatchStatus.PARTIAL
        )
        tx = Tx()
        bundle = []
        if ready:
            # One zip of its ready files: a row of its own, which the stream makes a build message of.
            bundle_id = new_id(now)
            tx.put("bundle", self.bundle_row(caller, batch_id, bundle_id, item.caller_class, now))
            bundle = [BatchItem.bundle_id.set(bundle_id)]
        tx.update(
            "batch",
            self.m.batch(item.pk, item.sk),
            [
                *bundle,
                BatchItem.status.set(status.value),
                BatchItem.transition.set(f"bindery.batch.{status.value}"),
                BatchItem.finished_at.set(now),
                BatchItem.queue.remove(),
                BatchItem.due_at.remove(),
                BatchItem.ttl.set(now + self.settings.ended_retention_seconds),
            ],
            # `status = running` lets a batch end once (two last endings, a sweep and a worker, race to it);
            # `targets_done = total` re-checks in the write what the read saw.
            (BatchItem.status == BatchStatus.RUNNING.value) & (BatchItem.targets_done == item.targets_total),
        )
        tx.update("live", self.m.live(caller_pk(caller), "LIVE"), [LiveItem.batch_ids.delete({batch_id})])
        refused = tx.commit(self._connection())
        if refused is not None:
            return None  # another settle won (or this one's own resend, its answer lost)
        return status.value

    def bundle_row(
        self, caller: str, batch_id: str, bundle_id: str, caller_class: str, now: float
    ) -> ExportItem:
        """A batch's bundle: pending, under the batch's id as its book, waiting for the stale sweep until a
        worker claims it, as any export does."""
        return self.m.export(
            book_pk(batch_id),
            export_sk(bundle_id),
            export_id=bundle_id,
            book_id=batch_id,
            format=BUNDLE,
            state=State.PENDING.value,
            requested_at=now,
            counted_against=caller,
            caller_class=caller_class,
            attempt=0,
            queue=Queue.STALE.value,
            due_at=now + self.settings.queue_grace_seconds,
        )
