"""How an export's row ends: the actions that move it to a state, and the one transaction that ends a pending
export and frees its live slot. Every ending in claims, exports and sweeps is written with these, so each
ends the row the same way and names the event its state publishes."""

from __future__ import annotations

from typing import Any

from bindery.states import Queue, State
from bindery.storage.table import ExportItem, LiveItem, Models, Tx, book_pk, export_sk
from bindery.storage.types import Slot


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


def end_pending(tx: Tx, m: Models, slot: Slot, actions: list[Any], condition: Any) -> None:
    """Add to `tx` the one way a pending export ends: its row written with `actions` under `condition`
    (ALL_OLD on refusal, by the name "export"), and its slot in the live set it occupies freed ("live"), in
    the same transaction. Nothing else removes from a live set, so a slot is freed exactly when its export
    stops being pending: the cap counts what is live, never more and never less."""
    row = m.export(book_pk(slot.book_id), export_sk(slot.export_id))
    tx.update("export", row, actions, condition, old=True)
    live = m.live(f"CALLER#{slot.counted_against}", "LIVE")
    tx.update("live", live, [LiveItem.live_ids.delete({slot.export_id})])
