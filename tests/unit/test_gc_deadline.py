"""The GC's deadline: a backlog in one chore cannot starve the chores after it, the audit row is written
whatever happens, and what a run left is done by the next one."""

from __future__ import annotations

import pytest

from bindery.schedules import GC_MARGIN_SECONDS, Deadline
from bindery.storage import StorageError
from tests.conftest import FakeContext
from tests.unit.conftest import Stack


class Countdown:
    """Time left in a fake invocation: each look at it costs `step` seconds."""

    def __init__(self, seconds: float, step: float = 1.0):
        self.seconds, self.step = seconds, step

    def __call__(self) -> float:
        self.seconds -= self.step
        return self.seconds


def _lapsed_links(stack: Stack, n: int) -> str:
    book = stack.create_book()
    for _ in range(n):
        export = stack.submit(book, "markdown").body["id"]
        assert stack.build(book, export)["batchItemFailures"] == []
    stack.clock.advance(stack.exports.settings.link_ttl_seconds + 1)
    return book


def test_a_share_is_an_equal_part_of_what_is_left_less_the_margin() -> None:
    left = Countdown(GC_MARGIN_SECONDS + 40, step=0)
    out_of_time = Deadline(left).share(4)  # 40 s among 4 chores: 10 s for this one
    assert not out_of_time()
    left.seconds -= 9.9
    assert not out_of_time()
    left.seconds -= 0.2
    assert out_of_time()
    assert Deadline(None).share(1)() is False  # no deadline without a time left


def test_a_backlog_of_links_leaves_time_for_the_chores_after_it(stack: Stack) -> None:
    _lapsed_links(stack, 6)
    # A book deleted too: its purge comes after the expiry, and must still get its turn.
    doomed = stack.create_book(title="Doomed")
    assert stack.http("DELETE", f"/books/{doomed}").status == 204
    # Each look at the clock costs a second, so 5 chores sharing 20 s get 4 looks each, or so.
    result = stack.services.schedules.collect_garbage(time_left=Countdown(GC_MARGIN_SECONDS + 20))

    assert 0 < result["expired"] < 6
    assert "expire" in result["left_for_next_run"]
    # The later chores ran: the purge, the retire (of the deleted book's cut) and the reconciliation.
    assert result["books_purged"] == 0  # already purged by the delete itself, so nothing was due
    assert result["cuts_retired"] >= 1
    assert "cursor_pass" in result
    audit = stack.store.sweeps.audits(1)[0]
    assert audit["left_for_next_run"] == result["left_for_next_run"]

    rest = stack.services.schedules.collect_garbage()  # the next run, with all the time it needs
    assert result["expired"] + rest["expired"] == 6
    assert rest["left_for_next_run"] == []


def test_the_audit_row_is_written_when_a_chore_fails(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    _lapsed_links(stack, 1)

    def down(*_: object, **__: object) -> object:
        raise StorageError("the index is throttled")

    monkeypatch.setattr(stack.store.books, "due_markers", down)
    with pytest.raises(StorageError):
        stack.services.schedules.collect_garbage()
    audit = stack.store.sweeps.audits(1)[0]
    # The two marker chores failed; the others ran all the same: the link expired, its bytes went.
    assert audit["failed_chores"] == ["purge", "retire"]
    assert (audit["expired"], audit["unlinked"]) == (1, 1)
    assert audit["left_for_next_run"] == ["purge", "retire"]
    assert audit["cursor_pass"] is not None


def test_the_handler_takes_its_deadline_from_the_context(stack: Stack) -> None:
    _lapsed_links(stack, 3)

    # An invocation with less time left than the margin: every chore's share is nothing.
    stack.context = FakeContext(timeout_ms=int(GC_MARGIN_SECONDS * 1000) - 1)
    result = stack.gc()
    assert result["expired"] == 0
    # The trim of the caches of built pieces, like the reconciliation, walks a prefix from a cursor: with no
    # time to start, it is left whole.
    assert result["left_for_next_run"] == ["expire", "pieces", "reconcile"]
    assert result["cursor_pass"] is None  # the reconciliation had no time to start
    assert stack.store.sweeps.audits(1)[0]["left_for_next_run"] == ["expire", "pieces", "reconcile"]
