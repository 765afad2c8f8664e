"""The export lifecycle as one table: every way a row moves is a value, and one call commits any of them.

A :class:`Transition` names what it is (`step`), the row (`slot`), its guard, its writes, the counts it
moves (`ends`, `published`, `usage_back`), the book check it makes in the same write, and how it knows its
own earlier success after a lost answer (`marks`: what only this write can have left on the row). The
builders in `bindery.storage.steps` make one for each step; `transition()` (`bindery.storage.endings`)
commits it and answers :class:`Applied` or :class:`Refused`, and nothing else writes an export's row.

`LIFECYCLE` is the table a reader learns the lifecycle from: each step's states, guard and fingerprint, in
words. docs/ARCHITECTURE.md's state diagram is :func:`diagram`'s output, held equal by
tests/unit/test_lifecycle_table.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bindery.states import ENDED, State
from bindery.storage.table import (
    ExportItem,
)
from bindery.storage.types import EndedTarget, Slot


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


def ended_target(outcome: Outcome) -> EndedTarget | None:
    """The batch target an ending's outcome shows ended, by it or before it (that may have been this very
    ending, its answer lost): its batch may have ended with it. The batch service settles it."""
    slot, row = outcome.slot, outcome.row
    ended = isinstance(outcome, Applied) or (row is not None and row.state != State.PENDING)
    return None if slot.batch_id is None or not ended else EndedTarget(slot.counted_against, slot.batch_id)
