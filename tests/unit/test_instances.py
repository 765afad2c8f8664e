"""The local stack's instances (`bindery_local.instances`): a function's events run side by side in
instances of their own, each with its own module state, one event at a time each, up to the function's
concurrency, in the order the events came."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from bindery_local.instances import InstanceFailed, Pool, start_instances
from tests.unit import instance_handler

MODULE = "tests.unit.instance_handler"


@pytest.fixture
def pool() -> Iterator[Pool]:
    pools = start_instances({"probe": MODULE}, {"probe": 2}, instance_handler.setup)
    try:
        yield pools["probe"]
    finally:
        pools["probe"].stop()
        pools["probe"].join(timeout=5)


def _all_at_once(pool: Pool, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    answers: list[dict[str, Any]] = [{} for _ in events]

    def send(i: int) -> None:
        answers[i] = pool.invoke(events[i])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(events))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a["started"] < b["ended"] and b["started"] < a["ended"])


def test_two_events_of_one_function_run_at_once_in_two_instances_each_with_its_own_module_state(
    pool: Pool,
) -> None:
    first, second = _all_at_once(pool, [{"n": 1, "sleep": 0.5}, {"n": 2, "sleep": 0.5}])

    assert first["pid"] != second["pid"]  # two instances
    assert _overlap(first, second)  # at the same time
    # Each instance's module state holds its own event only: no state is shared between them.
    assert (first["handled"], second["handled"]) == ([1], [2])
    assert first["function"] == second["function"] == "probe"


def test_no_instance_handles_two_events_at_once_and_no_more_instances_than_the_concurrency(
    pool: Pool,
) -> None:
    answers = _all_at_once(pool, [{"n": n, "sleep": 0.2} for n in range(6)])

    by_instance: dict[int, list[dict[str, Any]]] = {}
    for answer in answers:
        by_instance.setdefault(answer["pid"], []).append(answer)
    assert len(by_instance) == 2 and pool.started == 2  # the concurrency: 2
    for handled in by_instance.values():
        assert not any(a["already_busy"] for a in handled)  # never entered while it handled another
        ordered = sorted(handled, key=lambda a: a["started"])
        assert all(b["started"] >= a["ended"] for a, b in itertools.pairwise(ordered))
        # Its module state kept every event it handled, and only those.
        assert sorted(ordered[-1]["handled"]) == sorted(n for a in handled for n in a["handled"][-1:])
    assert sorted(n for a in answers for n in a["handled"][-1:]) == list(range(6))


def test_a_handler_that_raises_fails_its_event_and_its_instance_serves_the_next(pool: Pool) -> None:
    with pytest.raises(InstanceFailed, match="the handler refused this event"):
        pool.invoke({"n": 0, "raise": True})
    after = pool.invoke({"n": 1})

    assert after["handled"] == [1] and pool.started == 1  # the warm instance, still the only one


def test_an_instance_that_dies_fails_its_event_and_a_new_instance_takes_the_next(pool: Pool) -> None:
    warm = pool.invoke({"n": 1})["pid"]
    with pytest.raises(InstanceFailed, match="died"):
        pool.invoke({"n": 2, "die": True})
    after = pool.invoke({"n": 3})

    assert after["pid"] != warm and after["handled"] == [3]  # a new instance, with module state of its own
    assert pool.started == 1


def test_a_handler_that_does_not_import_stops_the_start_with_its_error() -> None:
    with pytest.raises(InstanceFailed, match="did not import"):
        start_instances({"missing": "tests.unit.no_such_handler"}, {"missing": 1}, instance_handler.setup)


def test_events_waiting_for_an_instance_take_one_in_the_order_they_came() -> None:
    pools = start_instances({"probe": MODULE}, {"probe": 1}, instance_handler.setup)
    pool, answers = pools["probe"], []
    try:
        first = threading.Thread(target=lambda: answers.append(pool.invoke({"n": 0, "sleep": 0.5})))
        first.start()
        while not pool._busy:  # the one instance is taken
            threading.Event().wait(0.001)
        waiting = []
        for n in range(1, 6):
            thread = threading.Thread(target=lambda n=n: answers.append(pool.invoke({"n": n})))
            thread.start()
            waiting.append(thread)
            while len(pool._waiting) < n:  # this one waits before the next comes
                threading.Event().wait(0.001)
        for thread in [first, *waiting]:
            thread.join(timeout=30)
    finally:
        pool.stop()
        pool.join(timeout=5)
    assert [a["handled"][-1] for a in answers] == list(range(6))
