"""The per-caller events feed in storage: exactly once per event id, a gapless sequence, a lost answer
recognised, reads that write nothing, and a cursor older than what is kept answered with the oldest kept."""

from __future__ import annotations

import pytest

from bindery.storage import Appended, CursorAhead, CursorGone, Store
from bindery.storage.hookmodels import HEAD_SK, event_sk, feed_pk
from tests.calls import recording
from tests.unit.conftest import Stack
from tests.unit.test_lost_answers import answer_lost

ALICE, BOB = "user-alice", "user-bob"
RETAINED = 30 * 86_400


def _append(store: Store, event_id: str, now: float, caller: str = ALICE) -> Appended:
    return store.feed.append_event(caller, event_id, "bindery.export.ready", {"id": event_id}, now)


def test_a_replayed_event_id_is_recorded_once_at_its_first_sequence(stack: Stack) -> None:
    now = stack.clock()
    first = _append(stack.store, "e1:ready", now)
    _append(stack.store, "e2:ready", now)

    again = _append(stack.store, "e1:ready", now + 60)

    assert first == Appended(1, new=True)
    assert again == Appended(1, new=False)
    page = stack.store.feed.events_since(ALICE, 0, 10, now)
    assert [e.id for e in page.events] == ["e1:ready", "e2:ready"]
    assert page.head == 2


def test_sequential_appends_take_every_sequence_number_without_a_gap(stack: Stack) -> None:
    now = stack.clock()
    seqs = [_append(stack.store, f"e{i}:ready", now).seq for i in range(25)]
    _append(stack.store, "other:ready", now, caller=BOB)

    assert seqs == list(range(1, 26))
    page = stack.store.feed.events_since(ALICE, 0, 100, now)
    assert [e.seq for e in page.events] == list(range(1, 26))
    assert (page.head, page.next) == (25, 25)
    assert stack.store.feed.feed_head(BOB) == 1  # each caller's feed is its own


def test_a_reader_following_its_cursor_in_small_pages_sees_each_event_once(stack: Stack) -> None:
    now = stack.clock()
    for i in range(7):
        _append(stack.store, f"e{i}:ready", now)
    seen, after = [], 0
    while True:
        page = stack.store.feed.events_since(ALICE, after, 3, now)
        assert page.next >= after  # a cursor never walks backwards
        seen += [e.seq for e in page.events]
        if page.next == page.head:
            break
        after = page.next
    assert seen == list(range(1, 8))
    assert stack.store.feed.events_since(ALICE, 7, 3, now).events == ()


def test_an_append_whose_answer_was_lost_returns_the_sequence_it_was_given(stack: Stack) -> None:
    now = stack.clock()
    _append(stack.store, "e1:ready", now)

    with answer_lost(stack.store.client, "TransactWriteItems"):
        lost = _append(stack.store, "e2:ready", now)

    assert lost.seq == 2
    assert stack.store.feed.feed_head(ALICE) == 2
    assert [e.id for e in stack.store.feed.events_since(ALICE, 0, 10, now).events] == ["e1:ready", "e2:ready"]


def test_an_append_refused_on_a_moved_head_retries_from_the_refusals_head_without_a_read(
    stack: Stack,
) -> None:
    now = stack.clock()
    for i in range(3):
        _append(stack.store, f"e{i}:ready", now)

    with recording(stack.store.client) as calls:
        # The guess is 0: the first try is refused on HEAD and its ALL_OLD says 3.
        assert _append(stack.store, "e3:ready", now) == Appended(4, new=True)

    assert calls.count() == {"TransactWriteItems": 2}


def test_reading_the_feed_writes_nothing(stack: Stack) -> None:
    now = stack.clock()
    for i in range(3):
        _append(stack.store, f"e{i}:ready", now)

    with recording(stack.store.client) as calls:
        stack.store.feed.events_since(ALICE, 0, 2, now)
        stack.store.feed.events_since(ALICE, 2, 2, now)
        stack.store.feed.events_since(BOB, 0, 2, now)
        with pytest.raises(CursorAhead):
            stack.store.feed.events_since(ALICE, 4, 2, now)

    assert calls.writes() == []
    assert calls.count()["GetItem"] == 4


def test_a_cursor_past_the_head_is_refused_as_one_never_handed_out(stack: Stack) -> None:
    now = stack.clock()
    _append(stack.store, "e1:ready", now)

    with pytest.raises(CursorAhead) as ahead:
        stack.store.feed.events_since(ALICE, 2, 10, now)
    with pytest.raises(CursorAhead):
        stack.store.feed.events_since(ALICE, -1, 10, now)

    assert (ahead.value.after, ahead.value.head) == (2, 1)


def test_a_cursor_older_than_what_is_kept_is_gone_and_names_the_oldest_cursor_kept(stack: Stack) -> None:
    start = stack.clock()
    for i in range(3):
        _append(stack.store, f"old{i}:ready", start)
    for i in range(2):
        _append(stack.store, f"new{i}:ready", start + 86_400)
    # TTL has deleted the first event and not yet the next two (it deletes days late).
    stack.store.feed_models.event(feed_pk(ALICE), event_sk(1)).delete()
    later = start + RETAINED + 1

    with pytest.raises(CursorGone) as gone:
        stack.store.feed.events_since(ALICE, 0, 10, later)

    assert gone.value.oldest == 3
    page = stack.store.feed.events_since(ALICE, gone.value.oldest, 10, later)
    assert [e.id for e in page.events] == ["new0:ready", "new1:ready"]
    assert stack.store.feed_models.head.get(feed_pk(ALICE), HEAD_SK).head == 5


def test_events_carry_a_ttl_thirty_days_out(stack: Stack) -> None:
    now = stack.clock()
    _append(stack.store, "e1:ready", now)

    item = stack.store.feed_models.event.get(feed_pk(ALICE), event_sk(1))

    assert item.ttl == now + RETAINED


def test_a_page_ends_before_a_hole_and_the_next_read_is_told_of_it(stack: Stack) -> None:
    now = stack.clock()
    store = stack.store
    for i in range(4):
        store.feed.append_event(
            ALICE, f"e{i}:ready", "bindery.export.ready", {}, now, now=now + (100 if i == 1 else 0)
        )
    # Past the kept days of events 1, 3 and 4, not 2: a hole at 3 behind a kept 2.
    store.feed.append_event(ALICE, "late:ready", "bindery.export.ready", {}, now, now=now + 200)
    at = now + RETAINED + 50

    first = store.feed.events_since(ALICE, 0, 10, now)
    assert [e.seq for e in first.events] == [1, 2, 3, 4, 5]
    with pytest.raises(CursorGone):
        store.feed.events_since(ALICE, 0, 10, at)
    kept = store.feed.events_since(ALICE, 1, 10, at)
    assert [e.seq for e in kept.events] == [2]  # 3 and 4 are gone: the page stops at the hole
    with pytest.raises(CursorGone) as gone:
        store.feed.events_since(ALICE, kept.next, 10, at)
    assert gone.value.oldest == 4
