"""The lifecycle's table in code (`bindery.storage.lifecycle`) and the one in docs/ARCHITECTURE.md are the
same table: the state diagram is the code's, line for line, and so are the lost-answer table's rows."""

from __future__ import annotations

import re
from pathlib import Path

from bindery.images import Notes
from bindery.states import FailureCode, State
from bindery.storage import lifecycle, steps
from bindery.storage.lifecycle import LIFECYCLE, NOTHING_TO_RECOGNISE, Step, Transition
from bindery.storage.types import Export, Slot

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md"


def _architecture() -> str:
    return ARCHITECTURE.read_text(encoding="utf-8")


def test_architectures_state_diagram_is_the_codes_table() -> None:
    found = re.search(r"```mermaid\n(stateDiagram-v2\n.*?)\n```", _architecture(), re.S)
    assert found is not None, "ARCHITECTURE.md has no state diagram"
    assert found.group(1) == lifecycle.diagram()


def test_architectures_lost_answer_table_holds_every_steps_recognition() -> None:
    text = _architecture()
    missing = [row for row in lifecycle.recognitions() if row not in text.splitlines()]
    assert missing == []


NO_COUNT = {Step.CLAIM, Step.PROGRESS, Step.GIVE_BACK, Step.REVOKE, Step.EXPIRE, Step.FORGET}


def _every_transition() -> list[Transition]:
    export = Export("e", "b", "html", State.PENDING, 1.0, "alice", attempt=2, caller_class="standard")
    slot = export.slot
    return [
        steps.claim(slot, "k", 5.0, lease_seconds=330, grace=30, most=3),
        steps.progress(export, 1, 2),
        steps.give_back(export, 5.0),
        steps.finish(
            export,
            path="k",
            size_bytes=1,
            built_revision=1,
            now=5.0,
            link_seconds=60,
            skipped=[],
            notes=Notes(),
            sha256=None,
            package=None,
        ),
        steps.fail(export, FailureCode.RENDER_FAILED, 5.0),
        steps.abandon(export, 5.0),
        steps.cancel(slot, "alice", 5.0),
        steps.sweep(slot, 2, FailureCode.WORKER_LOST, 5.0),
        steps.purge(slot, 5.0),
        steps.revoke(slot, 5.0, owner="alice"),
        steps.expire(slot, 5.0),
        steps.forget(slot, had_path=True, published=1, ttl=9.0),
    ]


def test_every_step_has_one_builder_and_one_row_of_the_table() -> None:
    built = [t.step for t in _every_transition()]
    assert sorted(built) == sorted(Step)
    assert set(Step) <= set(LIFECYCLE)


def test_a_step_that_says_it_recognises_its_own_write_carries_the_marks_to() -> None:
    # The purge recognises its own by reading the row again (`end_for_deleted_book`), not by marks; the
    # holder's courtesy writes recognise nothing: a refusal of theirs changes nothing.
    by_rereading = {Step.PURGE}
    for t in _every_transition():
        says = LIFECYCLE[t.step].recognised != NOTHING_TO_RECOGNISE and t.step not in by_rereading
        assert bool(t.marks) == says, t.step


def test_only_pending_rows_endings_move_counts_and_each_ends_in_its_tables_state() -> None:
    for t in _every_transition():
        rule = LIFECYCLE[t.step]
        if t.ends is not None:
            assert (rule.source, rule.target) == (State.PENDING.value, t.ends.value), t.step
        else:  # the steps that move no count (forget's usage is a finish's bytes going, not a slot)
            assert t.step in NO_COUNT


def test_a_refusal_is_read_as_its_own_write_only_when_every_mark_is_on_the_row() -> None:
    export = Export("e", "b", "html", State.PENDING, 1.0, "alice", attempt=2, caller_class="standard")
    fail = steps.fail(export, FailureCode.RENDER_FAILED, 5.0)

    class Row:
        attempt, state, failure_code, finished_at = 2, "failed", "render_failed", 5.0

    class Later(Row):
        finished_at = 6.0  # another attempt's failure, one second on

    assert fail.recognises(Row())  # type: ignore[arg-type]
    assert not fail.recognises(Later())  # type: ignore[arg-type]
    assert not fail.recognises(None)
    assert not steps.purge(Slot("b", "e", "alice"), 5.0).recognises(Row())  # type: ignore[arg-type]
