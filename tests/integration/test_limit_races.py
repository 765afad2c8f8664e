"""Batches, caps and budgets under concurrency, on DynamoDB Local, whose transactions are atomic under threads
as DynamoDB's are (moto's are not). Each test is named after the race it closes."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import boto3
import pytest

from bindery import errors
from bindery.builds import RetryLater
from bindery.limits import CallerClass, shard_of
from bindery.states import State
from tests.figures import record
from tests.invariants import limit_violations, violations
from tests.services import Services, wired

T = TypeVar("T")

BATCHES, TARGETS = 8, 20
# `make reliability` runs 100 trials; `make test` a few, the same race each time.
BATCH_TRIALS = int(os.environ.get("BINDERY_BATCH_TRIALS", "2"))


def _all_at_once(n: int, act: Callable[[int], T]) -> list[T]:
    barrier = threading.Barrier(n)

    def run(i: int) -> T:
        barrier.wait()
        return act(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


class _Crash(BaseException):
    """The worker's process died: after its upload, before its finish."""


def _deliver(services: Services, book: str, export_id: str) -> str:
    try:
        return services.builds.build(book, export_id)
    except RetryLater:
        return "retry"
    except _Crash:
        return "crashed"


@pytest.mark.slow(30)
def test_8_concurrent_batches_with_duplicate_deliveries_and_crashes_count_each_ending_once(
    new_services: Callable[[], Services],
) -> None:
    choose = random.Random(16)
    miscounted: list[Any] = []
    broken: list[str] = []  # the promises, checked at each trial's end
    crashed = unbundled = 0
    for _trial in range(BATCH_TRIALS):
        # Each trial on a table of its own, dropped after it, and its promises checked on that table.
        services = _with_cap(new_services(), max_live_exports_total=2 * BATCHES * TARGETS)
        trial = _batch_trial(services, choose)
        miscounted += trial.miscounted
        crashed += trial.crashed
        unbundled += trial.unbundled
        broken += limit_violations(services.store) + violations(
            services.store, services.objects, after_gc=False
        )
        boto3.client("dynamodb").delete_table(TableName=services.settings.table)
    record("race: 8 concurrent batches of 20, every message twice, 10 % crashed: trials", BATCH_TRIALS)
    record(
        "race: 8 concurrent batches of 20: batches whose targets_done was not their endings", len(miscounted)
    )
    record("race: 8 concurrent batches of 20: builds crashed after their upload", crashed)
    record("race: 8 concurrent batches of 20: batches without exactly one bundle built", unbundled)
    assert miscounted == [] and unbundled == 0
    assert broken == []


@dataclass
class _Trial:
    miscounted: list[Any] = field(default_factory=list)  # (batch, its targets' states) that did not add up
    crashed: int = 0  # builds that died after their upload
    unbundled: int = 0  # batches without exactly one bundle built


def _batch_trial(services: Services, choose: random.Random) -> _Trial:
    """8 batches of 20 at once; every build message delivered twice at once, a tenth of the builds dying
    after their upload and redelivered (twice) after their lease; then each batch's bundle, twice at once."""
    books = {
        u: services.books.create_book(f"user-{u}", "Catalogue", "# One\n\ntext\n")[0].id for u in range(4)
    }
    real_finish = services.store.claims.finish_export
    doomed: set[str] = set()

    def finish(export: Any, **kw: Any) -> Any:
        if export.id in doomed:
            doomed.discard(export.id)  # it dies once; the redelivery after its lease finishes it
            raise _Crash(export.id)
        return real_finish(export, **kw)

    services.store.claims.finish_export = finish  # type: ignore[method-assign]

    def create(i: int) -> dict[str, Any]:
        targets = [{"book_id": books[i % 4], "format": "markdown"}] * TARGETS
        return services.batches.create_batch(f"user-{i % 4}", CallerClass.FLEET, targets, None)[0]

    made = _all_at_once(BATCHES, create)
    pairs = [(t["book_id"], t["export_id"]) for b in made for t in b["targets"]]
    doomed.update(choose.sample([e for _, e in pairs], len(pairs) // 10))
    trial = _Trial(crashed=len(doomed))
    # Every build message delivered twice, at once, across the whole catalogue.
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: _deliver(services, *p), pairs * 2))
    # The crashed attempts' leases run out; their messages come back, twice each again.
    services.clock.advance(services.settings.lease_seconds + 1)  # type: ignore[attr-defined]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: _deliver(services, *p), pairs * 2))
    for i, batch in enumerate(made):
        found = services.store.batches.read_batch(f"user-{i % 4}", batch["id"], services.clock())
        seen, rows, _ = found or (None, [], None)
        assert seen is not None
        ended = sum(r.state != State.PENDING for r in rows)
        if not (seen.targets_done == ended == TARGETS and seen.status == "done"):
            trial.miscounted.append((seen, [r.state for r in rows]))
    # Each batch's one download: its bundle's build message, delivered twice at once too.
    bundles = [
        (b["id"], services.store.batches.read_batch(f"user-{i % 4}", b["id"], services.clock()))
        for i, b in enumerate(made)
    ]
    keys = [(batch_id, read[0].bundle_id) for batch_id, read in bundles if read and read[0].bundle_id]
    with ThreadPoolExecutor(8) as pool:
        built = list(pool.map(lambda k: _deliver(services, *k), keys * 2))
    trial.unbundled = BATCHES - built.count("ready")
    return trial


def _with_cap(services: Services, **changes: Any) -> Services:
    import dataclasses

    from bindery.objects import Objects
    from bindery.storage import Store

    settings = dataclasses.replace(services.settings, **changes)
    return wired(settings, Store(settings), Objects(settings), services.clock)


CALLERS, TOTAL_CAP = 10, 20


def test_4x_cap_concurrent_submits_across_10_callers_exceed_neither_the_global_cap_nor_a_callers(
    services: Services,
) -> None:
    services = _with_cap(services, max_live_exports_total=TOTAL_CAP)
    books = {}
    for n in range(CALLERS):
        books[n] = services.books.create_book(f"user-{n}", "Mine", "# One\n\ntext\n")[0].id
    # Half the callers are restricted (2 live at once), half standard (10): 60 places, 20 in the service.
    classes = {n: CallerClass.RESTRICTED if n % 2 else CallerClass.STANDARD for n in range(CALLERS)}

    def submit(i: int) -> str:
        n = i % CALLERS
        try:
            services.exports.submit(f"user-{n}", books[n], "markdown", None, caller_class=classes[n])
        except errors.TooManyLiveExports:
            return "429"
        except errors.ServiceAtCapacity:
            return "503"
        return f"user-{n}"

    outcomes = _all_at_once(4 * TOTAL_CAP, submit)

    accepted = [o for o in outcomes if o.startswith("user-")]
    rows = [e for e in services.store.exports.all_exports() if e.state == State.PENDING]
    record("race: 80 submits across 10 callers (global cap 20): accepted", len(accepted))
    record("race: 80 submits across 10 callers (global cap 20): refused 503", outcomes.count("503"))
    record("race: 80 submits across 10 callers (global cap 20): refused 429", outcomes.count("429"))
    assert len(rows) == len(accepted) <= TOTAL_CAP
    for n in range(CALLERS):
        cap = services.settings.limits(classes[n]).live_exports
        assert sum(1 for r in rows if r.counted_against == f"user-{n}") <= cap
    caps = services.settings.shard_caps
    for k, room in services.store.exports.shard_room().items():
        assert caps[k] - room == sum(1 for r in rows if shard_of(r.id) == k) <= caps[k]
    assert limit_violations(services.store) == []


def test_concurrent_finishes_and_unlinks_leave_usage_equal_to_the_bytes_stored(services: Services) -> None:
    book, _, _ = services.books.create_book("user-alice", "Usage", "# One\n\n" + "text " * 200 + "\n")
    ready = []
    for _ in range(12):
        view, _ = services.exports.submit("user-alice", book.id, "markdown", None)
        services.builds.build(book.id, view["id"])
        ready.append(view["id"])
    pending = [services.exports.submit("user-alice", book.id, "html", None)[0]["id"] for _ in range(8)]

    def act(i: int) -> Any:
        if i < len(pending):
            return services.builds.build(book.id, pending[i])  # finishes: bytes published
        if i < len(pending) + 6:
            return services.exports.cancel(
                "user-alice", book.id, ready[i - len(pending)]
            )  # revoked, unlinked now
        return services.schedules.collect_garbage()  # unlinks what the cancels could not finish, if any

    _all_at_once(len(pending) + 8, act)

    stored = sum(
        e.size_bytes or 0
        for e in services.store.exports.all_exports()
        if e.path and e.state in (State.READY, State.EXPIRED)
    )
    usage = services.store.exports.holdings("user-alice").usage
    record(
        "race: 8 finishes, 6 revokes and 2 GCs at once: usage equal to the bytes stored", int(usage == stored)
    )
    assert usage == stored > 0
    assert limit_violations(services.store) == []


@pytest.mark.slow(20)
def test_a_batch_read_while_its_targets_end_is_one_moment(services: Services) -> None:
    """4 workers end a batch's 40 targets while 2 readers poll it: every answer's counts are the states it
    shows (read apart, some answers had `targets_done: 3` beside `counts.pending: 4`)."""
    book = services.books.create_book("user-reader", "Catalogue", "# One\n\ntext\n")[0].id
    made = services.batches.create_batch(
        "user-reader", CallerClass.FLEET, [{"book_id": book, "format": "markdown"}] * 40, None
    )[0]
    building = threading.Event()
    building.set()
    torn: list[dict[str, Any]] = []
    reads = [0]

    def read() -> None:
        while building.is_set():
            view = services.batches.read_batch("user-reader", made["id"])
            reads[0] += 1
            shown_ended = view["targets_total"] - view["counts"]["pending"]
            if view["targets_done"] != shown_ended or sum(view["ended"].values()) != view["targets_done"]:
                torn.append(view)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for r in readers:
        r.start()
    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda t: _deliver(services, book, t["export_id"]), made["targets"]))
    finally:
        building.clear()
        for r in readers:
            r.join()
    record("race: a batch of 40 read while 4 workers end it: reads", reads[0])
    record("race: a batch of 40 read while 4 workers end it: answers not one moment", len(torn))
    assert reads[0] >= 10
    assert torn == []
    assert services.batches.read_batch("user-reader", made["id"])["status"] == "done"
