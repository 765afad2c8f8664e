"""The lifecycle's steps, one builder each: what each write guards against, writes and recognises.

Each returns a :class:`~bindery.storage.lifecycle.Transition` and writes nothing; `transition()` commits it.
A guard carries a comment naming the race it closes.
"""

from __future__ import annotations

import json
from typing import Any

from bindery.images import Notes
from bindery.states import ENDED, FailureCode, Queue, State
from bindery.storage.lifecycle import Mark, Step, Transition
from bindery.storage.table import SKIPPED_KEPT, BookItem, ExportItem
from bindery.storage.types import Export, Slot


def becomes(state: State) -> list[Any]:
    """The actions that move a row to `state`, naming the event its terminal states publish."""
    actions = [ExportItem.state.set(state.value)]
    if state != State.PENDING:
        actions.append(ExportItem.transition.set(f"bindery.export.{state.value}"))
    return actions


def end_actions(state: State, now: float) -> list[Any]:
    """How any ended row is written: it leaves the live set's accounting and joins the unlink queue.

    It waits there until its last lease has run out, because until then an attempt may still upload;
    an unlink before that could be followed by the upload it was meant to remove.
    """
    return [
        *becomes(state),
        ExportItem.finished_at.set(now),
        ExportItem.queue.set(Queue.UNLINK.value),
        # if_not_exists(lease_until, now): a lease that is still running holds the unlink back.
        ExportItem.due_at.set(ExportItem.lease_until | now),
    ]


def _holder(export: Export) -> Any:
    # `state = pending` is the worker's whole write safety: a build that comes back after the sweep or a
    # cancel ended its row must not resurrect it and publish a link the poll has already reported as
    # finished. `attempt = mine` fences a late attempt out of a row a retry has since claimed.
    return (ExportItem.state == State.PENDING.value) & (ExportItem.attempt == export.attempt)


def claim(slot: Slot, path: str, now: float, *, lease_seconds: float, grace: float, most: int) -> Transition:
    """StampExportStart (docs/ARCHITECTURE.md, "Claim"): take the build exclusively for one lease, adding
    this attempt's key to `paths` BEFORE any byte is written, so bytes a dying attempt left are named by a
    row."""
    lease_until = now + lease_seconds
    attempt = ExportItem.attempt
    guard = (
        # `state = pending` refuses a row the sweep (or a cancel) has already ended: the verdict is in
        # and this worker must not build.
        (ExportItem.state == State.PENDING.value)
        # An unexpired lease refuses a SECOND worker while the first is still building; both would
        # otherwise race to publish, and the loser's cleanup could delete the winner's file.
        & (ExportItem.lease_until.does_not_exist() | (ExportItem.lease_until <= now))
        # The retry bound: after the last attempt the sweep, not another build, ends the row.
        & (attempt < most)
    )
    writes = (
        attempt.add(1),
        ExportItem.paths.add({path}),
        ExportItem.started_at.set(now),
        ExportItem.lease_until.set(lease_until),
        # The sweep may call it lost once the lease, plus time for a redelivery to claim the retry, is over.
        ExportItem.due_at.set(lease_until + grace),
    )
    # The attempt's key is fresh per attempt, and the lease this try's own: a row holding both is ours.
    marks = (
        Mark("state", State.PENDING.value),
        Mark("lease_until", lease_until),
        Mark("paths", path, member=True),
    )
    return Transition(Step.CLAIM, slot, guard, writes, marks=marks, single=True)


def progress(export: Export, done: int, total: int) -> Transition:
    """Chapters done out of total, for the poll; `attempt = mine`: a superseded attempt must not report
    progress over its successor's."""
    writes = (ExportItem.progress_done.set(done), ExportItem.progress_total.set(total))
    return Transition(Step.PROGRESS, export.slot, _holder(export), writes, single=True)


def give_back(export: Export, now: float) -> Transition:
    """The lease ends now, so a redelivery may retry at once; `attempt = mine`: never shorten the lease of a
    retry that has claimed the row since."""
    return Transition(
        Step.GIVE_BACK, export.slot, _holder(export), (ExportItem.lease_until.set(now),), single=True
    )


def finish(
    export: Export,
    *,
    path: str,
    size_bytes: int,
    built_revision: int,
    now: float,
    link_seconds: float,
    skipped: list[dict[str, Any]],
    notes: Notes,
    sha256: str | None,
    package: str | None,
) -> Transition:
    """pending -> ready, publishing `path` until the link lapses."""
    expires_at = now + link_seconds
    writes = (
        *becomes(State.READY),
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
    )
    # The book must still exist: a finish that landed after the book's delete would publish a deleted
    # book's text behind a ready row. A finish that lands before it, the delete's purge ends.
    # (A bundle has no book: its batch's targets were each checked when they finished.)
    book = None if export.slot.bundle else BookItem.pk.exists()
    marks = (Mark("attempt", export.attempt), Mark("state", State.READY.value), Mark("path", path))
    return Transition(
        Step.FINISH, export.slot, _holder(export), writes, State.READY, size_bytes, book=book, marks=marks
    )


def fail(export: Export, code: FailureCode, now: float) -> Transition:
    """pending -> failed, by the attempt that holds the build."""
    writes = (*end_actions(State.FAILED, now), ExportItem.failure_code.set(code))
    marks = (
        Mark("attempt", export.attempt),
        Mark("state", State.FAILED.value),
        Mark("failure_code", code),
        Mark("finished_at", now),
    )
    return Transition(Step.FAIL, export.slot, _holder(export), writes, State.FAILED, marks=marks)


def abandon(export: Export, now: float) -> Transition:
    """pending -> cancelled by the attempt that holds it: its book was deleted under it."""
    marks = (Mark("attempt", export.attempt), Mark("state", State.CANCELLED.value), Mark("finished_at", now))
    writes = tuple(end_actions(State.CANCELLED, now))
    return Transition(Step.ABANDON, export.slot, _holder(export), writes, State.CANCELLED, marks=marks)


def cancel(slot: Slot, owner: str, now: float) -> Transition:
    """pending -> cancelled by its caller."""
    # `state = pending` refuses a row the worker finished or the sweep ended meanwhile. Only the owner can
    # submit and a book never changes hands, so the live set this row occupies is the owner's; the second
    # guard says so rather than assuming it.
    guard = (ExportItem.state == State.PENDING.value) & (ExportItem.counted_against == owner)
    marks = (Mark("state", State.CANCELLED.value), Mark("finished_at", now))
    writes = tuple(end_actions(State.CANCELLED, now))
    return Transition(
        Step.CANCEL, slot, guard, writes, State.CANCELLED, book=BookItem.owner == owner, marks=marks
    )


def sweep(slot: Slot, attempt: int, code: FailureCode, now: float) -> Transition:
    """FailStalePendingExports (docs/ARCHITECTURE.md), its two clocks kept in one attribute: `due_at` is the
    queue-grace deadline until a worker claims the row, and the lease (plus the retry grace) after. A claim
    moves it, so `due_at <= now` re-checks whichever clock applies, and `attempt = seen` pins the code
    chosen from what the index showed."""
    guard = (
        (ExportItem.state == State.PENDING.value)
        & (ExportItem.due_at <= now)
        & (ExportItem.attempt == attempt)
    )
    writes = (*end_actions(State.FAILED, now), ExportItem.failure_code.set(code.value))
    marks = (Mark("state", State.FAILED.value), Mark("finished_at", now))
    return Transition(Step.SWEEP, slot, guard, writes, State.FAILED, marks=marks)


def purge(slot: Slot, now: float) -> Transition:
    """pending -> cancelled, its book deleted: no owner to check. It recognises its own lost answer by
    reading the row again (`end_for_deleted_book`), as it does any row that moved under it."""
    writes = tuple(end_actions(State.CANCELLED, now))
    return Transition(Step.PURGE, slot, ExportItem.state == State.PENDING.value, writes, State.CANCELLED)


def revoke(slot: Slot, now: float, *, owner: str | None) -> Transition:
    """ready -> expired now: the row keeps its paths so that the unlink (done at once by the caller, and by
    the GC should that fail) can find them. `owner`: the caller's cancel checks it; a book delete has none."""
    writes = (
        *becomes(State.EXPIRED),
        ExportItem.expires_at.set(now),
        ExportItem.queue.set(Queue.UNLINK.value),
        ExportItem.due_at.set(now),
    )
    # `state = ready`: the GC may have expired it first, and then there is nothing to revoke.
    guard = ExportItem.state == State.READY.value
    marks = (Mark("state", State.EXPIRED.value), Mark("expires_at", now))
    book = None if owner is None else BookItem.owner == owner
    return Transition(Step.REVOKE, slot, guard, writes, book=book, marks=marks)


def expire(slot: Slot, now: float) -> Transition:
    """ready -> expired: the link stops working when it was promised to, and the ROW says so. `path` is
    KEPT: clearing it here would make the unlink a one-shot act, and a failed delete would leave bytes no
    row could ever name again (:func:`forget` drops it after the unlink)."""
    writes = (*becomes(State.EXPIRED), ExportItem.queue.set(Queue.UNLINK.value), ExportItem.due_at.set(now))
    # Re-checked in the write: the index lags, and only a ready row past its promise expires.
    guard = (ExportItem.state == State.READY.value) & (ExportItem.expires_at <= now)
    # Expired into the unlink queue at this very instant: this write's own.
    marks = (Mark("state", State.EXPIRED.value), Mark("due_at", now))
    return Transition(Step.EXPIRE, slot, guard, writes, marks=marks, single=True)


def forget(slot: Slot, *, had_path: bool, published: int, ttl: float) -> Transition:
    """The bytes are gone: the row stops naming them and may be deleted by TTL; the bytes a finish
    published (`published`, as read) leave their caller's usage in the same write."""
    writes = (
        ExportItem.paths.remove(),
        ExportItem.path.remove(),
        ExportItem.queue.remove(),
        ExportItem.due_at.remove(),
        ExportItem.ttl.set(ttl),
    )
    # Only a row still waiting for its unlink, whose keys are the ones just deleted; `queue = unlink` lets
    # the usage leave once, since this write takes the row out of the queue...
    guard = (
        (ExportItem.queue == Queue.UNLINK.value)
        & ExportItem.state.is_in(*[s.value for s in ENDED])
        # ...and whose `path` (a finish's: the bytes it published) is as the read saw it.
        & (ExportItem.path.exists() if had_path else ExportItem.path.does_not_exist())
    )
    marks = (Mark("queue", None), Mark("ttl", ttl))
    return Transition(Step.FORGET, slot, guard, writes, usage_back=published, marks=marks)


def _noted(listed: Any, total: Any, notes: list[dict[str, Any]], count: int) -> list[Any]:
    if not count:
        return [listed.remove(), total.remove()]
    return [listed.set(json.dumps(notes, ensure_ascii=False)), total.set(count)]
