"""How a batch ends: decided here, after each of its targets' endings, never inside storage's write.

Storage answers each ending with the target it ended (`EndedTarget`); `after_ending` looks at that target's
batch and, when every target has ended, `settle_batch` ends the batch with its bundle in one guarded write
(`BatchRows.end_batch`). The batch sweep (`BatchRequests.settle_batches`) calls `settle_batch` too: it is the
backstop for an ending whose settling failed or was cut off. A module of its own so that the worker, the
GC and the API can settle a batch without loading the batch service.
"""

from __future__ import annotations

from bindery.ids import new_id
from bindery.observability import logger
from bindery.states import BatchStatus, State
from bindery.storage import BUNDLE, Batch, BatchRows, EndedTarget, Export, StorageError


def settled_status(batch: Batch) -> BatchStatus:
    """How a batch whose every target has ended ended: done (all ready), failed (none), or partial."""
    if batch.n_ready == batch.targets_total:
        return BatchStatus.DONE
    return BatchStatus.FAILED if batch.n_ready == 0 else BatchStatus.PARTIAL


def settle_batch(batch_rows: BatchRows, caller: str, batch_id: str, now: float) -> BatchStatus | None:
    """End a batch whose every target has ended, as `settled_status` says, with its bundle (one zip of its
    ready files, a pending export of its own) when a target was ready; its place among the caller's live
    batches is given back in the same write. The status it ended with, or None when it has not ended
    (targets still pending) or had ended already. Called after every target's ending, and by the batch
    sweep, its backstop."""
    batch = batch_rows.read_batch_row(caller, batch_id)
    if batch is None or batch.status != BatchStatus.RUNNING or batch.targets_done < batch.targets_total:
        return None
    status = settled_status(batch)
    bundle = None
    if batch.n_ready:
        bundle = Export(
            id=new_id(now),
            book_id=batch.id,  # a bundle's row lives under its batch's id, as its book
            format=BUNDLE,
            state=State.PENDING,
            requested_at=now,
            counted_against=caller,
            caller_class=batch.caller_class,
        )
    return status if batch_rows.end_batch(batch, status, bundle, now) else None


def after_ending(batch_rows: BatchRows, target: EndedTarget | None, now: float) -> None:
    """What an export's ending sets off: a batch's target that has ended may have ended its batch. The
    target's ending stands whatever happens here; should this fail, the batch sweep settles the batch."""
    if target is None:
        return
    try:
        settle_batch(batch_rows, target.caller, target.batch_id, now)
    except StorageError:
        logger.warning("batch left to the sweep to settle", extra={"batch_id": target.batch_id})
