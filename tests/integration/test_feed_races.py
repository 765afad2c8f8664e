"""The events feed against a real engine: concurrent appends for one caller take a gapless sequence, and
concurrent readers following their cursors see every event exactly once, in order, with a head that never
decreases. moto's transactions are not atomic under threads; DynamoDB Local's are."""

from __future__ import annotations

import itertools
import os
import threading
import time
import uuid
from typing import cast

import pytest

from bindery.storage import Appended, Store
from tests.figures import record
from tests.integration.test_races import _all_at_once
from tests.services import Services

pytestmark = pytest.mark.ddb_local

WRITERS, READERS, EVENTS_PER_WRITER = 16, 4, 3
# The issue asks for 100 trials; 10 keep the default run short, and the variable raises it.
FEED_TRIALS = int(os.environ.get("BINDERY_FEED_TRIALS", "10"))


Read = tuple[list[int], list[str], list[int]]  # one reader's sequences, event ids and heads, as paged


def _trial(store: Store, caller: str, now: float) -> tuple[list[Appended], list[Read]]:
    """16 writers append 3 events each to `caller`'s feed while 4 readers follow their cursors to the end."""
    writing = threading.Barrier(WRITERS + 1)  # the writers, and the one that notices they have all ended
    done = threading.Event()

    def write(w: int) -> list[Appended]:
        try:
            return [
                store.feed.append_event(
                    caller, f"{caller}-w{w}-{k}:ready", "bindery.export.ready", {"k": k}, now
                )
                for k in range(EVENTS_PER_WRITER)
            ]
        finally:
            writing.wait()

    def read() -> Read:
        seqs: list[int] = []
        ids: list[str] = []
        heads: list[int] = []
        after = 0
        while True:
            finished = done.is_set()  # taken before the read: a read begun after every write sees them all
            page = store.feed.events_since(caller, after, 5, now)
            if page.next < after:
                raise AssertionError(f"cursor walked back from {after} to {page.next}")
            heads.append(page.head)
            seqs += [e.seq for e in page.events]
            ids += [e.id for e in page.events]
            after = page.next
            if finished and after == page.head:
                return seqs, ids, heads
            if not page.events:
                time.sleep(0.001)  # caught up: poll, but leave the writers the interpreter

    def notice_the_end() -> None:
        writing.wait()
        done.set()

    ender = threading.Thread(target=notice_the_end)
    ender.start()
    outcomes = _all_at_once(WRITERS + READERS, lambda i: write(i) if i < WRITERS else read())
    ender.join()
    appended = [a for o in outcomes[:WRITERS] for a in cast(list[Appended], o)]
    return appended, [cast(Read, o) for o in outcomes[WRITERS:]]


@pytest.mark.slow(30)
def test_16_writers_and_4_cursor_readers_see_a_gapless_feed_once_in_order(services: Services) -> None:
    store, now = services.store, services.clock()
    every = list(range(1, WRITERS * EVENTS_PER_WRITER + 1))
    good, wrong = 0, []
    for _trial_no in range(FEED_TRIALS):
        appended, reads = _trial(store, f"user-{uuid.uuid4().hex[:8]}", now)
        ok = sorted(a.seq for a in appended) == every and all(a.new for a in appended)
        for seqs, ids, heads in reads:
            ok = ok and seqs == every and len(set(ids)) == len(every)  # each event once, in sequence order
            ok = ok and ids == reads[0][1]  # and in the same order for every reader
            ok = ok and all(a <= b for a, b in itertools.pairwise(heads)) and heads[-1] == len(every)
        good += ok
        if not ok:
            wrong.append((appended, reads))
    record("race: 16 feed writers x 4 cursor readers: trials", FEED_TRIALS)
    record("race: 16 feed writers x 4 cursor readers: trials each reader saw all once in order", good)
    assert good == FEED_TRIALS, wrong[:1]


def test_16_concurrent_appends_of_one_event_id_record_it_once(services: Services) -> None:
    store, now = services.store, services.clock()
    caller = f"user-{uuid.uuid4().hex[:8]}"

    outcomes = _all_at_once(
        WRITERS, lambda _: store.feed.append_event(caller, "one:ready", "bindery.export.ready", {}, now)
    )

    assert {a.seq for a in outcomes} == {1}
    assert sum(a.new for a in outcomes) == 1
    assert store.feed.feed_head(caller) == 1
