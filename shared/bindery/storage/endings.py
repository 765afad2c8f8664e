"""What reacts to an export's ending: the last target's ending ends its batch.

Every ending itself is a step of `bindery.storage.lifecycle`, committed by its `transition()`."""

from __future__ import annotations

from pynamodb.exceptions import DoesNotExist

from bindery.common import new_id
from bindery.faults import AWS_ERRORS
from bindery.observability import logger
from bindery.states import BatchStatus, Queue, State
from bindery.storage.conditions import Tx
from bindery.storage.lifecycle import LifecycleRows, Outcome, Transition, has_ended
from bindery.storage.table import (
    BatchItem,
    ExportItem,
    LiveItem,
    batch_sk,
    book_pk,
    caller_pk,
    export_sk,
)
from bindery.storage.types import BUNDLE


class EndingRows(LifecycleRows):
    """An export's ending, and its batch's settlement after it."""

    def end(self, t: Transition, now: float) -> Outcome:
        """Commit the ending `t`. A batch target's ending then looks at its batch (:meth:`settle_batch`):
        the last target's ending ends the batch. It does so too when the row had ended already, since that
        may have been this very ending, its answer lost."""
        outcome = self.transition(t)
        if outcome.slot.batch_id is not None and has_ended(outcome):
            try:
                self.settle_batch(outcome.slot.counted_against, outcome.slot.batch_id, now)
            except AWS_ERRORS:
                # The target's ending stands; the batch sweep settles the batch on its next run.
                logger.warning("batch left to the sweep to settle", extra={"batch_id": outcome.slot.batch_id})
        return outcome

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
