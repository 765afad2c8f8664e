"""The worker's writes: claim a build for one lease, report progress, give the lease back, and end the row
as the attempt that holds it (finish, fail, or cancel when its book went).

The attempt number a claim hands out is a fencing token: every later write of the attempt is conditional on
`attempt = mine`, so a late attempt can neither publish, fail, nor delete another attempt's work.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

from bindery.faults import translate_faults
from bindery.images import Notes
from bindery.states import ClaimRefusal, Ending, FailureCode, Queue, State
from bindery.storage.conditions import (
    Refused,
    Tx,
    update_if,
)
from bindery.storage.endings import EndingRows, becomes, end_actions, end_pending
from bindery.storage.table import (
    SKIPPED_KEPT,
    BookItem,
    ExportItem,
    book_pk,
    export_sk,
    to_export,
)
from bindery.storage.types import Claimed, ClaimRefused, Export, Slot


@translate_faults
class ClaimRows(EndingRows):
    def claim_build(self, book_id: str, export_id: str, path: str, now: float) -> Claimed | ClaimRefused:
        """The seed's StampExportStart, with retries: take the build exclusively for one lease.

        The attempt number it hands out is a fencing token. Each attempt writes its own artifact key, and
        finish/fail are conditional on `attempt = mine`, so a late attempt can neither publish nor delete
        another attempt's file.

        `path` is the key this attempt will write. The claim adds it to `paths` BEFORE any byte is written,
        so an attempt that dies mid-upload leaves bytes that a row still names and the unlink will find.
        """
        s = self.settings
        lease_until = now + s.lease_seconds
        attempt = ExportItem.attempt
        condition = (
            # `state = pending` refuses a row the sweep (or a cancel) has already ended: the verdict is in
            # and this worker must not build.
            (ExportItem.state == State.PENDING.value)
            # An unexpired lease refuses a SECOND worker while the first is still building; both would
            # otherwise race to publish, and the loser's cleanup could delete the winner's file.
            & (ExportItem.lease_until.does_not_exist() | (ExportItem.lease_until <= now))
            # The retry bound: after the last attempt the sweep, not another build, ends the row.
            & (attempt < s.max_attempts)
        )
        # The sweep may call it lost once the lease, plus time for a redelivery to claim the retry, is over.
        actions = [
            attempt.add(1),
            ExportItem.paths.add({path}),
            ExportItem.started_at.set(now),
            ExportItem.lease_until.set(lease_until),
            ExportItem.due_at.set(lease_until + s.retry_grace_seconds),
        ]
        try:
            new = update_if(
                self.client, self.m.export, book_pk(book_id), export_sk(export_id), actions, condition
            )
        except Refused as refused:
            old = refused.old
            if old is None:
                return ClaimRefused(ClaimRefusal.GONE, None)
            export = to_export(old)
            if path in export.paths and export.state == State.PENDING and export.lease_until == lease_until:
                # This claim's own earlier try, applied with its answer lost: the row names this attempt's
                # key (fresh per attempt) and holds this lease. It is ours, exactly as if we had heard.
                return Claimed(export)
            if export.state != State.PENDING:
                return ClaimRefused(ClaimRefusal.ENDED, export)
            if export.attempt >= s.max_attempts:
                return ClaimRefused(ClaimRefusal.EXHAUSTED, export)
            return ClaimRefused(ClaimRefusal.HELD, export)
        return Claimed(to_export(new))

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
        expires_at = now + self.settings.link_ttl_seconds
        skipped = skipped or []
        notes = notes or Notes()
        actions = [
            *becomes(State.READY.value),
            ExportItem.path.set(path),
            ExportItem.paths.add({path}),
            ExportItem.size_bytes.set(size_bytes),
            # `complete` only when every chapter and every image made it in; the ones that did not are
            # named (the first SKIPPED_KEPT / NOTES_KEPT of them, and how many there were).
            ExportItem.complete.set(0 if skipped or notes.missing_total else 1),
            ExportItem.skipped.set(json.dumps(skipped[:SKIPPED_KEPT], ensure_ascii=False)),
            ExportItem.skipped_total.set(len(skipped)),
            *_noted(ExportItem.missing, ExportItem.missing_total, notes.missing, notes.missing_total),
            *_noted(ExportItem.warnings, ExportItem.warnings_total, notes.warnings, notes.warnings_total),
            ExportItem.sha256.set(sha256) if sha256 else ExportItem.sha256.remove(),
            ExportItem.package.set(package) if package else ExportItem.package.remove(),
            ExportItem.finished_at.set(now),
            ExportItem.expires_at.set(expires_at),
            ExportItem.built_revision.set(built_revision),
            ExportItem.queue.set(Queue.EXPIRE.value),
            ExportItem.due_at.set(expires_at),
            ExportItem.lease_until.remove(),
        ]

        def mine(old: ExportItem) -> bool:
            return old.state == State.READY.value and old.path == path

        # The book must still exist: a finish that landed after the book's delete would publish a deleted
        # book's text behind a ready row. A finish that lands before it, the delete's purge ends.
        # (A bundle has no book: its batch's targets were each checked when they finished.)
        return self._end_attempt(
            export,
            actions,
            mine,
            State.READY,
            now,
            published=size_bytes,
            book_must_exist=not export.slot.bundle,
        )

    def fail_export(self, export: Export, code: FailureCode, now: float) -> bool:
        """pending -> failed, by the attempt that holds the build. False: it was not ours to fail."""
        actions = [*end_actions(State.FAILED, now), ExportItem.failure_code.set(code)]

        def mine(old: ExportItem) -> bool:
            return old.state == State.FAILED.value and old.failure_code == code and old.finished_at == now

        return self._end_attempt(export, actions, mine, State.FAILED, now) == Ending.ENDED

    def cancel_attempt(self, export: Export, now: float) -> bool:
        """pending -> cancelled by the attempt that holds it: its book was deleted under it."""

        def mine(old: ExportItem) -> bool:
            return old.state == State.CANCELLED.value and old.finished_at == now

        actions = end_actions(State.CANCELLED, now)
        return self._end_attempt(export, actions, mine, State.CANCELLED, now) == Ending.ENDED

    def _end_attempt(
        self,
        export: Export,
        actions: list[Any],
        mine: Callable[[ExportItem], bool],
        ending: State,
        now: float,
        *,
        published: int | None = None,
        book_must_exist: bool = False,
    ) -> Ending:
        """End the row as the attempt that holds it. `mine` tells this write's own result from anyone
        else's, should a resend of an applied try be refused: then the ending is ours all the same."""

        def build(slot: Slot) -> Tx:
            tx = Tx()
            if book_must_exist:
                tx.check("book", self.m.book, book_pk(export.book_id), "BOOK", BookItem.pk.exists())
            end_pending(
                tx,
                self.m,
                slot,
                actions,
                # `state = pending` is the worker's whole write safety: a build that comes back after the
                # sweep or a cancel ended its row must not resurrect it and publish a link the poll has
                # already reported as finished. `attempt = mine` fences a late attempt out of a row a retry
                # has since claimed.
                (ExportItem.state == State.PENDING.value) & (ExportItem.attempt == export.attempt),
                ending=ending,
                published=published,
            )
            return tx

        refused = self.commit_ending(build, export.slot, now)
        if refused is None:
            return Ending.ENDED
        old = refused.old(ExportItem, "export")
        if old is not None and int(old.attempt or 0) == export.attempt and mine(old):
            return Ending.ENDED
        if refused.failed("book") and not refused.failed("export"):
            return Ending.BOOK_DELETED
        return Ending.REFUSED

    def record_progress(self, export: Export, done: int, total: int) -> None:
        """Chapters done out of total, for the poll. A refused write means the row moved on: nothing to do."""
        # `attempt = mine`: a superseded attempt must not report progress over its successor's.
        self._as_holder(export, [ExportItem.progress_done.set(done), ExportItem.progress_total.set(total)])

    def release_claim(self, export: Export, now: float) -> None:
        """Give the lease back after a transient failure, so a redelivery may retry at once. A refused
        write means the row moved on, or a retry claimed it since: nothing to give back."""
        # `attempt = mine`: never shorten the lease of a retry that has claimed the row since.
        self._as_holder(export, [ExportItem.lease_until.set(now)])

    def _as_holder(self, export: Export, actions: list[Any]) -> None:
        """Write the row only while this attempt still holds it (pending, and `attempt = mine`)."""
        with contextlib.suppress(Refused):
            update_if(
                self.client,
                self.m.export,
                book_pk(export.book_id),
                export_sk(export.id),
                actions,
                (ExportItem.state == State.PENDING.value) & (ExportItem.attempt == export.attempt),
            )


def _noted(listed: Any, total: Any, notes: list[dict[str, Any]], count: int) -> list[Any]:
    if not count:
        return [listed.remove(), total.remove()]
    return [listed.set(json.dumps(notes, ensure_ascii=False)), total.set(count)]
