"""What the schedules do: the GC (expire lapsed links, end deleted books' exports, unlink ended exports'
bytes, retire superseded cuts, reconcile storage with the table) and the stale sweep.

Each chore works a queue of the sparse `by_due` index, so a run reads the work and not the table. A GC run
has a deadline: it takes the invocation's time left, keeps a margin for its audit row, and gives each
chore a share of what is left when the chore starts, so that a backlog in one chore cannot starve the ones
after it. What a run could not finish stays in its queue for the next run, and the audit row says which
chores left work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bindery.chapter_lists import chapters_key
from bindery.clock import Clock
from bindery.config import Settings
from bindery.objects import ARTIFACT_PREFIX, PIECES_PREFIX, Objects, asset_key, cut_key
from bindery.observability import logger, metrics, state_change
from bindery.piece_cache import trim_piece_caches
from bindery.purges import Purges
from bindery.settlement import after_ending
from bindery.states import Queue
from bindery.storage import BatchRows, BookRows, Due, Marker, SweepRows

# Seconds of the invocation a GC run keeps for itself after its chores: the audit row and the reply.
GC_MARGIN_SECONDS = 10.0

TimeLeft = Callable[[], float]  # seconds left in the invocation
OutOfTime = Callable[[], bool]


@dataclass(frozen=True)
class SweepCounts:
    done: int = 0
    refused: int = 0
    failed: int = 0
    left: bool = False  # stopped at its deadline with due work still queued


def _never() -> bool:
    return False


class Deadline:
    """The time a run may spend, shared among its chores. Without `time_left` there is no deadline."""

    def __init__(self, time_left: TimeLeft | None, margin: float = GC_MARGIN_SECONDS):
        self.time_left, self.margin = time_left, margin

    def share(self, chores_to_run: int) -> OutOfTime:
        """The check a chore makes before each item: true once it has spent an equal share (with the chores
        still to run after it) of the time left now, less the margin. A chore that finishes early leaves
        its unspent time to the ones after it."""
        time_left = self.time_left
        if time_left is None:
            return _never
        now_left = time_left()
        budget = max(0.0, (now_left - self.margin) / chores_to_run)
        stop_at = now_left - budget
        return lambda: time_left() <= stop_at


class Schedules:
    """The GC's chores and the stale sweep's first one. A deleted book's exports are ended by
    `Purges.purge`, the same purge its delete starts."""

    def __init__(
        self,
        settings: Settings,
        book_rows: BookRows,
        sweep_rows: SweepRows,
        batch_rows: BatchRows,
        objects: Objects,
        clock: Clock,
        purges: Purges,
    ):
        self.settings, self.objects, self.clock = settings, objects, clock
        self.book_rows, self.sweep_rows, self.batch_rows = book_rows, sweep_rows, batch_rows
        self.purges = purges

    # ---- the sweeps' queues ------------------------------------------------------------------------

    def _sweep(
        self, queue: Queue, act: Callable[[Due, float], bool], out_of_time: OutOfTime = _never
    ) -> SweepCounts:
        """Work `queue` until no due row is left, a round makes no progress (every candidate refused or
        failing), or its time is up. Each round re-reads the index, so batch size + 1 due rows all get
        done."""
        done = refused = failed = 0
        batch = self.settings.sweep_batch
        while True:
            now = self.clock()
            candidates = self.sweep_rows.due(queue, now, batch)
            progress = 0
            for due in candidates:
                if out_of_time():
                    return SweepCounts(done, refused, failed, left=True)
                try:
                    if act(due, now):
                        done += 1
                        progress += 1
                    else:
                        refused += 1
                except Exception:
                    failed += 1
                    logger.exception(
                        "sweep step failed", extra={"export_id": due.slot.export_id, "queue": queue.value}
                    )
            if len(candidates) < batch or progress == 0:
                # Rows it read and did not end (refused, or failing) are still due: left for a later run.
                return SweepCounts(done, refused, failed, left=progress < len(candidates))

    def expire_lapsed_links(self, out_of_time: OutOfTime = _never) -> SweepCounts:
        def expire(due: Due, now: float) -> bool:
            ok = self.sweep_rows.expire_link(due, now)
            if ok:
                state_change(due.slot.export_id, due.slot.book_id, "link expired")
            return ok

        counts = self._sweep(Queue.EXPIRE, expire, out_of_time)
        metrics.add_metric(name="LinksExpired", unit="Count", value=counts.done)
        return counts

    def unlink_ended_artifacts(self, out_of_time: OutOfTime = _never) -> SweepCounts:
        """Delete the bytes, then forget the path, in that order: a failed delete leaves the row in the
        unlink queue, and the next run tries again."""

        def unlink(due: Due, now: float) -> bool:
            self.objects.delete(due.paths)
            ok = self.sweep_rows.forget_paths(due.slot.book_id, due.slot.export_id, now)
            if ok:
                state_change(due.slot.export_id, due.slot.book_id, "artifact unlinked", keys=len(due.paths))
            return ok

        counts = self._sweep(Queue.UNLINK, unlink, out_of_time)
        metrics.add_metric(name="UnlinksDone", unit="Count", value=counts.done)
        metrics.add_metric(name="UnlinksFailed", unit="Count", value=counts.failed)
        return counts

    def fail_stale_exports(
        self, time_left: TimeLeft | None = None, out_of_time: OutOfTime | None = None
    ) -> SweepCounts:
        """The stale sweep's first chore: all of `time_left` (less its margin), or until `out_of_time`."""

        def fail(due: Due, now: float) -> bool:
            swept = self.sweep_rows.fail_stale(due, now)
            after_ending(self.batch_rows, swept.target, now)
            code = swept.code
            if code is not None:
                metrics.add_metric(name=f"StaleSwept_{code.value}", unit="Count", value=1)
                state_change(due.slot.export_id, due.slot.book_id, "export failed", failure_code=code.value)
            return code is not None

        return self._sweep(Queue.STALE, fail, out_of_time or Deadline(time_left).share(1))

    # ---- the book-level chores ---------------------------------------------------------------------

    def retire_cuts(self, out_of_time: OutOfTime = _never) -> SweepCounts:
        """Remove superseded and stranded cuts (their chapter items, then their text, then the marker), and
        the bytes of assets no revision names any more."""
        return self._chores(Queue.RETIRE, self._retire, out_of_time)

    def purge_deleted_books(self, out_of_time: OutOfTime = _never) -> SweepCounts:
        return self._chores(Queue.PURGE, self.purges.purge, out_of_time)

    def _retire(self, marker: Marker) -> None:
        if marker.asset is not None:
            # An image the book let go of (replaced, or deleted), or one whose adoption never finished.
            if not self.book_rows.asset_in_use(marker):
                self.objects.delete([asset_key(marker.book_id, marker.asset)])
        else:
            assert marker.cut is not None
            if self.book_rows.retire_cut_chapters(marker):
                book, cut = marker.book_id, marker.cut
                self.objects.delete([cut_key(book, cut), chapters_key(book, cut)])
        self.book_rows.drop_marker(marker)

    def _chores(self, queue: Queue, act: Callable[[Marker], None], out_of_time: OutOfTime) -> SweepCounts:
        """One batch of markers a run (a marker's chore is a book's worth of work); a full batch, or one
        with failures, leaves work for the next run."""
        done = failed = 0
        markers = self.book_rows.due_markers(queue, self.clock(), self.settings.sweep_batch)
        for marker in markers:
            if out_of_time():
                return SweepCounts(done, 0, failed, left=True)
            try:
                act(marker)
                done += 1
            except Exception:
                failed += 1
                logger.exception(
                    "chore failed; the marker stays for the next run", extra={"book_id": marker.book_id}
                )
        return SweepCounts(done, 0, failed, left=bool(failed) or len(markers) == self.settings.sweep_batch)

    def trim_piece_caches(self, out_of_time: OutOfTime = _never) -> SweepCounts:
        """One page of the caches of built pieces: what is past its age, and books past their bytes; and
        the packs whose upload a dead build left open. (done: objects removed and uploads aborted)"""
        trimmed = trim_piece_caches(
            self.objects,
            self.clock(),
            self.settings.piece_cache_max_bytes,
            self.settings.piece_cache_max_age_seconds,
            self.settings.reconcile_batch,
            out_of_time,
        )
        # A build that died mid-pack left its upload open: past the longest lease, no live build owns it.
        settled = self.clock() - (self.settings.lease_seconds + self.settings.retry_grace_seconds)
        aborted = self.objects.abort_stale_uploads(PIECES_PREFIX, settled)
        metrics.add_metric(name="PiecesTrimmed", unit="Count", value=trimmed.deleted)
        return SweepCounts(done=trimmed.deleted + aborted, left=trimmed.left)

    # ---- the GC --------------------------------------------------------------------------------------

    def collect_garbage(self, time_left: TimeLeft | None = None) -> dict[str, Any]:
        """One GC run, in the order that lets each step feed the next: lapsed links expire and deleted books'
        exports end (both join the unlink queue), then bytes are unlinked, retired cuts removed, storage
        reconciled with the table; and the run's counts are kept as an audit row, whatever happened.

        `time_left` (seconds left in the invocation, from the Lambda context) gives the run its deadline.
        A chore that raises does not stop the ones after it: the run goes on, writes its audit row (naming
        the chore as failed, its counts unknown), and then raises the first error, so the invocation still
        fails and its alarm still fires."""
        deadline = Deadline(time_left)
        chores: list[tuple[str, Callable[[OutOfTime], SweepCounts]]] = [
            ("expire", self.expire_lapsed_links),
            ("purge", self.purge_deleted_books),
            ("unlink", self.unlink_ended_artifacts),
            ("retire", self.retire_cuts),
            ("pieces", self.trim_piece_caches),
        ]
        counts: dict[str, SweepCounts] = {}
        orphans: dict[str, Any] | None = None
        failed: dict[str, Exception] = {}
        for n, (name, chore) in enumerate(chores):
            try:
                # The reconciliation after these is one bounded page: it counts as a chore to share with.
                counts[name] = chore(deadline.share(len(chores) + 1 - n))
            except Exception as exc:
                failed[name] = exc
                logger.exception("gc chore failed; the rest of the run goes on", extra={"chore": name})
        try:
            orphans = self.reconcile_orphans(deadline.share(1))
        except Exception as exc:
            failed["reconcile"] = exc
            logger.exception("gc chore failed; the rest of the run goes on", extra={"chore": "reconcile"})
        result = _gc_result([name for name, _ in chores], counts, orphans, failed)
        self.sweep_rows.record_audit(result, self.clock())
        if failed:
            raise next(iter(failed.values()))
        if any(result[k] for k in result if k not in ("orphans_scanned", "cursor_pass")):
            logger.info("expiry gc done", extra=result)
        return result

    def reconcile_orphans(self, out_of_time: OutOfTime = _never) -> dict[str, int] | None:
        """Storage against the table: artifact objects older than the longest lease that no row names are
        deleted and counted. Each run reads one bounded page of keys and moves a persisted cursor forward;
        at the end of the prefix the pass number goes up and the next run starts over. None: no time left
        to start."""
        if out_of_time():
            return None
        now = self.clock()
        pass_no, after = self.sweep_rows.orphan_cursor()
        page, more = self.objects.list_page(ARTIFACT_PREFIX, after, self.settings.reconcile_batch)
        # Younger than the longest lease plus its retry grace, an object may belong to an attempt whose
        # claim we have not seen yet: leave it for a later pass.
        settled = now - (self.settings.lease_seconds + self.settings.retry_grace_seconds)
        candidates = [key for key, _, modified in page if modified < settled]
        named = self.sweep_rows.named_artifacts(candidates, now)
        orphans = [key for key in candidates if key not in named]
        self.objects.delete(orphans)
        for key in orphans:
            logger.warning("orphan artifact deleted", extra={"key": key})
        next_cursor = (pass_no, page[-1][0]) if more and page else (pass_no + 1, "")
        self.sweep_rows.set_orphan_cursor(*next_cursor)
        aborted = self.objects.abort_stale_uploads(ARTIFACT_PREFIX, settled)
        metrics.add_metric(name="OrphansReconciled", unit="Count", value=len(orphans))
        return {
            "orphans_scanned": len(page),
            "orphans_deleted": len(orphans),
            "uploads_aborted": aborted,
            "cursor_pass": next_cursor[0],
        }


def _gc_result(
    chores: list[str],
    counts: dict[str, SweepCounts],
    orphans: dict[str, Any] | None,
    failed: dict[str, Exception],
) -> dict[str, Any]:
    def of(name: str) -> SweepCounts:
        return counts.get(name, SweepCounts())

    left = [name for name in chores if name not in counts or counts[name].left]
    if orphans is None:
        left.append("reconcile")
    return {
        "expired": of("expire").done,
        "unlinked": of("unlink").done,
        "unlink_failures": of("unlink").failed,
        "books_purged": of("purge").done,
        "cuts_retired": of("retire").done,
        "pieces_trimmed": of("pieces").done,
        "chore_failures": of("purge").failed + of("retire").failed,
        # A reconciliation that did not run read nothing and moved no cursor (cursor_pass None).
        **(
            orphans or {"orphans_scanned": 0, "orphans_deleted": 0, "uploads_aborted": 0, "cursor_pass": None}
        ),
        "left_for_next_run": left,
        "failed_chores": sorted(failed),
    }
