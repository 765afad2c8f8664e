"""A deleted book's purge, and the unlink of a link just ended: the chores that end exports for the
library, the GC, the exports and the batches.

A book's delete is one transaction that leaves a purge marker; the purge ends every export of the book,
removes its images, and only then drops the marker, so a crash anywhere leaves the GC the rest. A module of
its own so that the services that end links (a cancel, a batch's cancel, the GC) need not hold the library.
"""

from __future__ import annotations

from typing import Literal

from bindery import engine
from bindery.clock import Clock
from bindery.objects import Objects, assets_prefix, pieces_prefix
from bindery.observability import logger
from bindery.settlement import after_ending
from bindery.states import State
from bindery.storage import (
    BatchRows,
    BookRows,
    EndedTarget,
    ExportRows,
    Marker,
    Revoked,
    StorageError,
    SweepRows,
)

DELETE_BATCH = 1_000  # S3's DeleteObjects takes at most this many keys


class NotAllEnded(Exception):
    """A purge found an export it could not end yet; its marker stays for the GC's next run."""


class Purges:
    """A deleted book's exports ended, its images removed and its marker dropped; a revoked link's bytes
    deleted at once."""

    def __init__(
        self,
        book_rows: BookRows,
        export_rows: ExportRows,
        sweep_rows: SweepRows,
        batch_rows: BatchRows,
        objects: Objects,
        clock: Clock,
    ):
        self.book_rows, self.export_rows = book_rows, export_rows
        self.sweep_rows, self.batch_rows = sweep_rows, batch_rows
        self.objects, self.clock = objects, clock

    def purge(self, marker: Marker, images: Literal["unlink", "none", "leave"] = "unlink") -> None:
        """End every export of a deleted book, remove its images and its cache of built pieces, then drop the
        marker, and only then: an export that kept moving (a finish or a cancel racing this one) keeps the
        marker, and the GC comes back for it. `images`: "unlink" finds and removes them (the GC); "none",
        the book had none (but one with an export of a format that keeps pieces may have a cache: it is
        left as "leave" is); "leave", the exports end and the marker stays for the GC to remove them."""
        now, left, cached = self.clock(), 0, False
        batches = set()
        for export in self.export_rows.book_exports(marker.book_id):
            cached |= export.format in engine.REUSES_PIECES
            outcome = self.export_rows.end_for_deleted_book(export, now)
            if export.batch_id is not None:
                batches.add((export.counted_against, export.batch_id))
            if export.batch_id is not None and export.state == State.PENDING and outcome is not False:
                # A pending target it ended (or found ended): its batch may have ended with it.
                after_ending(self.batch_rows, EndedTarget(export.counted_against, export.batch_id), now)
            if isinstance(outcome, Revoked):
                self.unlink_now(outcome)
            elif not outcome:
                left += 1
        for caller, batch_id in sorted(batches):
            left += not self._end_bundle(caller, batch_id, now)
        if left:
            raise NotAllEnded(f"{left} export(s) of book {marker.book_id} could not be ended yet")
        if images == "leave" or (images == "none" and cached):
            return
        if images == "unlink":
            # Its images and pieces go with it: no revision can name them again. (No build reads them now:
            # every export has ended, and a build still running finds its book gone at its finish.)
            for prefix in (assets_prefix(marker.book_id), pieces_prefix(marker.book_id)):
                keys = self.objects.keys(prefix)
                for start in range(0, len(keys), DELETE_BATCH):
                    self.objects.delete(keys[start : start + DELETE_BATCH])
        self.book_rows.drop_marker(marker)

    def _end_bundle(self, caller: str, batch_id: str, now: float) -> bool:
        """A batch's bundle holds copies of its targets' files, so the book's bytes are not gone while it
        lasts: a bundle that is being made or is ready is ended with the book's own exports (its link ends
        now and its zip is deleted; the other books' files stay downloadable from their own exports). A
        batch that has not ended yet makes its bundle later, of the targets still ready, which this book's
        are no longer. False: the bundle kept moving, and the marker stays for the GC's next run."""
        found = self.batch_rows.read_batch(caller, batch_id, now)
        bundle = None if found is None else found[2]
        if bundle is None or bundle.state not in (State.PENDING, State.READY):
            return True
        outcome = self.export_rows.end_for_deleted_book(bundle, now)
        if isinstance(outcome, Revoked):
            self.unlink_now(outcome)
        return outcome is not False

    def unlink_now(self, revoked: Revoked) -> None:
        """A ready link was just ended (the row keeps its paths): delete its bytes now, then forget them, in
        that order. Should the delete fail, the row still waits in the unlink queue, and the GC deletes them
        on its next run."""
        try:
            self.objects.delete(revoked.paths)
            self.sweep_rows.forget_paths(revoked.book_id, revoked.export_id, self.clock())
        except StorageError:
            logger.warning("unlink left to the GC", extra={"export_id": revoked.export_id}, exc_info=True)
