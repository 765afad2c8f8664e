"""The export lifecycle as one table: every way a row moves is a value, and one call commits any of them.

A :class:`Transition` names what it is (`step`), the row (`slot`), its guard, its writes, the counts it
moves (`ends`, `published`, `usage_back`), the book check it makes in the same write, and how it knows its
own earlier success after a lost answer (`marks`: what only this write can have left on the row). The
builders below (:func:`claim`, :func:`finish`, ...) make one for each step; :meth:`LifecycleRows.transition`
commits it and answers :class:`Applied` or :class:`Refused`, and nothing else writes an export's ending.

`LIFECYCLE` is the table a reader learns the lifecycle from: each step's states, guard and fingerprint, in
words. docs/ARCHITECTURE.md's state diagram is :func:`diagram`'s output, held equal by
tests/unit/test_lifecycle_table.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from bindery.images import Notes
from bindery.limits import shard_of
from bindery.states import ENDED, FailureCode, Queue, State
from bindery.storage.conditions import ItemRefused, Tx, update_if
from bindery.storage.table import (
    CAP_PK,
    SKIPPED_KEPT,
    BatchItem,
    BookItem,
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
from bindery.storage.types import BUNDLE, Export, Slot


class Step(StrEnum):
    """Every way an export's row moves after its submit."""

    CLAIM = "claim"
    PROGRESS = "progress"
    GIVE_BACK = "give back"
    FINISH = "finish"
    FAIL = "fail"
    ABANDON = "abandon"
    CANCEL = "cancel"
    SWEEP = "stale sweep"
    PURGE = "purge"
    REVOKE = "revoke"
    EXPIRE = "expire"
    FORGET = "forget"


@dataclass(frozen=True)
class Rule:
    """One row of the table, in words: which state a step moves from and to, who takes it, the guard its
    write carries, and what it recognises as its own earlier success."""

    source: str  # a State's value, or "[*]" (before the row, or after it is forgotten)
    target: str
    by: str
    guard: str
    recognised: str


# A holder's courtesy write: refused, the row moved on, and there is nothing to do.
NOTHING_TO_RECOGNISE = "(a refusal changes nothing)"

LIFECYCLE: dict[Step | str, Rule] = {
    "submit": Rule(
        "[*]",
        "pending",
        "a caller",
        "book.owner = caller; size(live_ids) < cap; key unseen or past its TTL",
        "this export id with this requested_at",
    ),
    Step.CLAIM: Rule(
        "pending",
        "pending",
        "the worker",
        "state = pending; lease unset or run out; attempt < max",
        "this attempt's key in paths and this lease",
    ),
    Step.PROGRESS: Rule(
        "pending",
        "pending",
        "the worker",
        "state = pending AND attempt = mine",
        NOTHING_TO_RECOGNISE,
    ),
    Step.GIVE_BACK: Rule(
        "pending",
        "pending",
        "the worker",
        "state = pending AND attempt = mine",
        NOTHING_TO_RECOGNISE,
    ),
    Step.FINISH: Rule(
        "pending",
        "ready",
        "the worker",
        "state = pending AND attempt = mine; the book exists",
        "ready with this attempt's path",
    ),
    Step.FAIL: Rule(
        "pending",
        "failed",
        "the worker",
        "state = pending AND attempt = mine",
        "failed with this code and finished_at",
    ),
    Step.ABANDON: Rule(
        "pending",
        "cancelled",
        "the worker, its book gone",
        "state = pending AND attempt = mine",
        "cancelled with this finished_at",
    ),
    Step.CANCEL: Rule(
        "pending",
        "cancelled",
        "a caller",
        "book.owner = caller; state = pending",
        "cancelled with this finished_at",
    ),
    Step.SWEEP: Rule(
        "pending",
        "failed",
        "the sweep, its clock run out",
        "state = pending AND due_at ≤ now AND attempt = seen",
        "failed with this finished_at",
    ),
    Step.PURGE: Rule(
        "pending",
        "cancelled",
        "a book delete",
        "state = pending",
        "cancelled with this finished_at, read again",
    ),
    Step.REVOKE: Rule(
        "ready",
        "expired",
        "a cancel, a book delete",
        "state = ready (then the bytes go at once)",
        "expired with expires_at = now",
    ),
    Step.EXPIRE: Rule(
        "ready", "expired", "the expiry GC", "state = ready AND expires_at ≤ now", "expired with this due_at"
    ),
    Step.FORGET: Rule(
        "ended",
        "[*]",
        "the GC, after the unlink",
        "queue = unlink; the path as read",
        "out of the queue with this ttl",
    ),
}


def recognitions() -> list[str]:
    """The lifecycle's rows of ARCHITECTURE's lost-answer table: each step, and what it recognises."""
    return [f"| {step} | {rule.recognised} |" for step, rule in LIFECYCLE.items()]


def diagram() -> str:
    """The lifecycle as a mermaid state diagram, one line per step (the ended states each join forget)."""
    lines = ["stateDiagram-v2"]
    for step, rule in LIFECYCLE.items():
        sources = sorted(s.value for s in ENDED) if rule.source == "ended" else [rule.source]
        for source in sources:
            lines.append(f"  {source} --> {rule.target}: {step} ({rule.by}) — {rule.guard}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Mark:
    """What a write leaves on the row that only it can have: `value` in the attribute (a set's member when
    `member`), read from the row a refusal returns."""

    attribute: str
    value: Any
    member: bool = False

    def on(self, row: ExportItem) -> bool:
        have = getattr(row, self.attribute)
        if self.member:
            return self.value in (have or ())
        if self.attribute == "attempt":
            have = int(have or 0)
        return bool(have == self.value)


@dataclass(frozen=True)
class Transition:
    """One move of one export's row, as a value. `transition()` commits it; nothing here writes."""

    step: Step
    slot: Slot
    # The condition on the row: the race it closes is named where each is built.
    guard: Any
    writes: tuple[Any, ...]
    # A pending row's ending: the state it ends in, whose counts it gives back (`end_counts`), and the bytes
    # a finish publishes into its caller's usage.
    ends: State | None = None
    published: int | None = None
    # A forget: the published bytes that leave their caller's usage with the row's paths.
    usage_back: int = 0
    # A condition on the row's book, checked in the same transaction (by the name "book").
    book: Any = None
    marks: tuple[Mark, ...] = ()
    # One UpdateItem (the row as written comes back) rather than a TransactWriteItems.
    single: bool = False

    def recognises(self, row: ExportItem | None) -> bool:
        """Whether a refusal's row is this very write's, applied by a try whose answer was lost."""
        return bool(self.marks) and row is not None and all(mark.on(row) for mark in self.marks)


@dataclass(frozen=True)
class Applied:
    """The write is in: committed now (`row` is the row as written when one item was), or by this very
    transition's earlier try, its answer lost (`row` is the refusal's, showing it). `slot` is the row's as
    it turned out to be (a guess from the index is corrected by the refusal)."""

    step: Step
    slot: Slot
    row: ExportItem | None = None
    failed: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Refused:
    """Not this transition's to make: `row` is the export's row as the refusal showed it (None: absent, or
    its own condition held), `failed` the names of the items whose conditions failed."""

    step: Step
    slot: Slot
    row: ExportItem | None
    failed: frozenset[str]


Outcome = Applied | Refused


def has_ended(outcome: Outcome) -> bool:
    """Whether the row is no longer pending after this outcome: ended by it, or before it."""
    return isinstance(outcome, Applied) or (outcome.row is not None and outcome.row.state != State.PENDING)


# ---- the builders: one per step ---------------------------------------------------------------------------


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
    """The seed's StampExportStart: take the build exclusively for one lease, adding this attempt's key to
    `paths` BEFORE any byte is written, so bytes a dying attempt left are named by a row."""
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
    """The seed's FailStalePendingExports, its two clocks kept in one attribute: `due_at` is the queue-grace
    deadline until a worker claims the row, and the lease (plus the retry grace) after. A claim moves it, so
    `due_at <= now` re-checks whichever clock applies, and `attempt = seen` pins the code chosen from what
    the index showed."""
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


# ---- the one commit ---------------------------------------------------------------------------------------


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
            row = update_if(self.client, self.m.export, *key, list(t.writes), t.guard)
        except ItemRefused as refused:
            if t.recognises(refused.old):
                return Applied(t.step, t.slot, refused.old)
            return Refused(t.step, t.slot, refused.old, frozenset({"export"}))
        return Applied(t.step, t.slot, row)

    def _transact(self, t: Transition) -> Outcome:
        slot = t.slot
        tx = Tx()
        if t.book is not None:
            tx.check("book", self.m.book, book_pk(slot.book_id), "BOOK", t.book)
        guard = t.guard if t.ends is None else t.guard & _kind(slot)
        tx.update(
            "export",
            self.m.export(book_pk(slot.book_id), export_sk(slot.export_id)),
            list(t.writes),
            guard,
            old=True,
        )
        if t.ends is not None:
            self._end_counts(tx, slot, t.ends, t.published)
        if t.usage_back:
            live = self.m.live(caller_pk(slot.counted_against), "LIVE")
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
        live = self.m.live(caller_pk(slot.counted_against), "LIVE")
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
            tx.update("batch", self.m.batch(caller_pk(slot.counted_against), batch_sk(slot.batch_id)), counts)
            if usage:
                tx.update("live", live, usage)
        tx.update("shard", self.m.shard(CAP_PK, shard_sk(shard_of(slot.export_id))), [ShardItem.n.add(-1)])


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
