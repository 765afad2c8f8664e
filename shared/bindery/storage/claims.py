"""The worker's writes: claim a build for one lease, report progress, give the lease back, and end the row
as the attempt that holds it (finish, fail, or abandon when its book went).

The attempt number a claim hands out is a fencing token: every later write of the attempt is conditional on
`attempt = mine`, so a late attempt can neither publish, fail, nor delete another attempt's work. Each write
is a step of `bindery.storage.steps`, committed by its one `transition()`; here each outcome is read.
"""

from __future__ import annotations

from typing import Any

from bindery.config import Settings
from bindery.faults import translate_faults
from bindery.images import Notes
from bindery.states import ClaimRefusal, Ending, FailureCode, State
from bindery.storage import steps
from bindery.storage.endings import LifecycleRows
from bindery.storage.lifecycle import Applied, Outcome
from bindery.storage.table import Models, Rows, to_export
from bindery.storage.types import Claimed, ClaimRefused, Export, Slot


@translate_faults
class ClaimRows(Rows):
    def __init__(self, settings: Settings, models: Models, lifecycle: LifecycleRows):
        super().__init__(settings, models)
        self.lifecycle = lifecycle

    def claim_build(self, book_id: str, export_id: str, path: str, now: float) -> Claimed | ClaimRefused:
        """StampExportStart (docs/ARCHITECTURE.md), with retries: take the build exclusively for one lease.

        The attempt number it hands out is a fencing token. Each attempt writes its own artifact key, and
        finish/fail are conditional on `attempt = mine`, so a late attempt can neither publish nor delete
        another attempt's file.

        `path` is the key this attempt will write. The claim adds it to `paths` BEFORE any byte is written,
        so an attempt that dies mid-upload leaves bytes that a row still names and the unlink will find.
        """
        s = self.settings
        step = steps.claim(
            # Only the row's key: a claim moves no count, so whose live set it counts in is not asked.
            Slot(book_id, export_id, counted_against=""),
            path,
            now,
            lease_seconds=s.lease_seconds,
            grace=s.retry_grace_seconds,
            most=s.max_attempts,
        )
        outcome = self.lifecycle.transition(step)
        if outcome.row is None:
            return ClaimRefused(ClaimRefusal.GONE, None)
        export = to_export(outcome.row)
        if isinstance(outcome, Applied):
            # Claimed now, or by this claim's own earlier try, applied with its answer lost: the row names
            # this attempt's key (fresh per attempt) and holds this lease. It is ours, as if we had heard.
            return Claimed(export)
        if export.state != State.PENDING:
            return ClaimRefused(ClaimRefusal.ENDED, export)
        if export.attempt >= s.max_attempts:
            return ClaimRefused(ClaimRefusal.EXHAUSTED, export)
        return ClaimRefused(ClaimRefusal.HELD, export)

    def finish_export(
        self,
        export: Export,
        *,
        path: str,
        size_bytes: int,
        built_revision: int,
        now: float,
        skipped: list[dict[str, Any]] | None = None,
        notes: Notes | None = None,
        sha256: str | None = None,
        package: str | None = None,
    ) -> Ending:
        """pending -> ready. "refused": the row was ended (or re-claimed) meanwhile, and the caller must
        remove the artifact this attempt wrote, because no row will ever publish it. "book_deleted": the
        book went while the attempt built; the row is still the attempt's to end."""
        step = steps.finish(
            export,
            path=path,
            size_bytes=size_bytes,
            built_revision=built_revision,
            now=now,
            link_seconds=self.settings.link_ttl_seconds,
            skipped=skipped or [],
            notes=notes or Notes(),
            sha256=sha256,
            package=package,
        )
        return _ending(self.lifecycle.transition(step))

    def fail_export(self, export: Export, code: FailureCode, now: float) -> bool:
        """pending -> failed, by the attempt that holds the build. False: it was not ours to fail."""
        return _ending(self.lifecycle.transition(steps.fail(export, code, now))) == Ending.ENDED

    def cancel_attempt(self, export: Export, now: float) -> bool:
        """pending -> cancelled by the attempt that holds it: its book was deleted under it."""
        return _ending(self.lifecycle.transition(steps.abandon(export, now))) == Ending.ENDED

    def record_progress(self, export: Export, done: int, total: int) -> None:
        """Chapters done out of total, for the poll. A refused write means the row moved on: nothing to do."""
        self.lifecycle.transition(steps.progress(export, done, total))

    def release_claim(self, export: Export, now: float) -> None:
        """Give the lease back after a transient failure, so a redelivery may retry at once. A refused
        write means the row moved on, or a retry claimed it since: nothing to give back."""
        self.lifecycle.transition(steps.give_back(export, now))


def _ending(outcome: Outcome) -> Ending:
    """An attempt's ending, as the worker reads it: ended (by this write, or its own earlier try), refused
    only by the book check (its book deleted; the row is still the attempt's), or refused."""
    if isinstance(outcome, Applied):
        return Ending.ENDED
    if "book" in outcome.failed and "export" not in outcome.failed:
        return Ending.BOOK_DELETED
    return Ending.REFUSED
