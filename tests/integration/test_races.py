"""Races against a real DynamoDB engine. moto's conditional writes are not atomic under threads; DynamoDB
Local's are, as DynamoDB's are. Each test is named after the race it closes."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from bindery import errors
from bindery.objects import artifact_key
from bindery.storage import Claimed
from tests.figures import record
from tests.invariants import violations
from tests.services import Services

T = TypeVar("T")

CLAIMERS = 32
CLAIM_TRIALS = 100


def _all_at_once(n: int, act: Callable[[int], T]) -> list[T]:
    """Run `act(i)` on n threads released together by a barrier."""
    barrier = threading.Barrier(n)

    def run(i: int) -> T:
        barrier.wait()
        return act(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def _promises_broken(services: Services) -> list[str]:
    """Every promise but the eventual one (a pending export is fine: nothing here runs it to its end)."""
    found = violations(services.store, services.objects, after_gc=False)
    return [v for v in found if "is still pending" not in v]


def _book(services: Services, caller: str = "user-alice") -> str:
    book, _, _ = services.books.create_book(caller, "Race", "# One\n\ntext\n")
    return book.id


@pytest.mark.slow(24)
def test_of_32_concurrent_claimers_exactly_one_holds_the_lease(services: Services) -> None:
    book = _book(services)
    winners: Counter[int] = Counter()
    wrong: list[Any] = []  # trials that broke the promise, kept for the message: the figures come first
    for _trial in range(CLAIM_TRIALS):
        view, _ = services.exports.submit("user-alice", book, "markdown", None)
        export_id = view["id"]
        now = services.clock()
        outcomes = _all_at_once(
            CLAIMERS,
            lambda i, e=export_id, n=now: services.store.claims.claim_build(
                book, e, artifact_key(book, e, f"c{i}"), n
            ),
        )
        claimed = [o for o in outcomes if isinstance(o, Claimed)]
        [row] = [e for e in services.store.exports.all_exports() if e.id == export_id]
        one = (
            len(claimed) == 1 and claimed[0].export.attempt == 1 and row.attempt == 1 and len(row.paths) == 1
        )
        winners[len(claimed) if one else -1] += 1
        if not one:
            wrong.append((outcomes, row))
        services.exports.cancel("user-alice", book, export_id)  # free the live slot for the next trial
    record("race: 32 concurrent claimers: trials", CLAIM_TRIALS)
    record("race: 32 concurrent claimers: trials with exactly one lease holder", winners[1])
    assert winners == {1: CLAIM_TRIALS}, wrong[:3]
    assert _promises_broken(services) == []


def test_16_concurrent_submits_with_one_idempotency_key_make_one_export(services: Services) -> None:
    book = _book(services)

    answers = _all_at_once(16, lambda i: services.exports.submit("user-alice", book, "html", "same-key-16"))

    ids = {view["id"] for view, _ in answers}
    created = [c for _, c in answers if c]
    rows = list(services.store.exports.all_exports())
    record("race: 16 submits with one Idempotency-Key: services made", len(rows))
    record("race: 16 submits with one Idempotency-Key: distinct ids answered", len(ids))
    assert len(ids) == 1 and len(created) == 1
    assert [r.id for r in rows] == list(ids)
    assert services.store.exports.live_ids("user-alice") == ids
    assert _promises_broken(services) == []


def test_4x_cap_concurrent_submits_never_leave_more_than_cap_live(services: Services) -> None:
    book = _book(services)
    cap = services.settings.max_live_exports

    def submit(_: int) -> Any:
        try:
            return services.exports.submit("user-alice", book, "markdown", None)[0]["id"]
        except errors.TooManyLiveExports as exc:
            return exc

    outcomes = _all_at_once(4 * cap, submit)

    accepted = [o for o in outcomes if isinstance(o, str)]
    refused = [o for o in outcomes if isinstance(o, errors.TooManyLiveExports)]
    record("race: 4 x cap (40) concurrent submits: accepted (cap 10)", len(accepted))
    record("race: 4 x cap (40) concurrent submits: refused with 429", len(refused))
    assert len(accepted) == cap and len(refused) == 3 * cap
    assert services.store.exports.live_ids("user-alice") == set(accepted)
    assert len(list(services.store.exports.all_exports())) == cap
    assert _promises_broken(services) == []


RACE_TRIALS = 100


def _build_seconds(services: Services) -> float:
    """How long one markdown build takes here, now: the span over which the other side of a race is
    released, so that it lands before, during and after the finish, whatever the machine's speed."""
    book = _book(services)
    view, _ = services.exports.submit("user-alice", book, "markdown", None)
    started = time.perf_counter()
    services.builds.build(book, view["id"])
    return time.perf_counter() - started


@pytest.mark.slow(20)
def test_a_book_delete_racing_a_finishing_build_leaves_none_of_the_books_bytes_after_one_gc(
    services: Services,
) -> None:
    endings: Counter[str] = Counter()
    left_behind, wrong = 0, []
    span, delays = _build_seconds(services), random.Random(7)
    for _trial in range(RACE_TRIALS):
        book = _book(services)
        view, _ = services.exports.submit("user-alice", book, "markdown", None)
        wait = delays.uniform(0, 1.5 * span)

        def act(i: int, e: str = view["id"], b: str = book, w: float = wait) -> str:
            if i == 0:
                time.sleep(w)
                services.books.delete_book("user-alice", b)
                return "deleted"
            return services.builds.build(b, e)

        outcomes = _all_at_once(2, act)
        endings[outcomes[1]] += 1
        services.clock.advance(services.settings.lease_seconds + 1)  # type: ignore[attr-defined]
        services.schedules.collect_garbage()
        left = services.objects.keys(f"books/{book}/") + services.objects.keys(f"artifacts/{book}/")
        [row] = [e for e in services.store.exports.all_exports() if e.id == view["id"]]
        bad = bool(left) or row.state not in ("cancelled", "expired")
        left_behind += bad
        if bad:
            wrong.append((outcomes, row, left))
    record("race: book delete against a finishing build: trials", RACE_TRIALS)
    record("race: book delete against a finishing build: trials with bytes left after one GC", left_behind)
    record("race: book delete against a finishing build: builds that finished first", endings["ready"])
    assert left_behind == 0, wrong[:3]
    assert _promises_broken(services) == []


@pytest.mark.slow(15)
def test_a_cancel_racing_a_finish_ends_in_one_consistent_ending_and_never_a_ready_row_without_bytes(
    services: Services,
) -> None:
    book = _book(services)
    endings: Counter[str] = Counter()
    inconsistent, wrong = 0, []
    span, delays = _build_seconds(services), random.Random(11)
    for _trial in range(RACE_TRIALS):
        view, _ = services.exports.submit("user-alice", book, "markdown", None)
        wait = delays.uniform(0, 1.5 * span)

        def act(i: int, e: str = view["id"], w: float = wait) -> str:
            if i == 0:
                time.sleep(w)
                return services.exports.cancel("user-alice", book, e)
            return services.builds.build(book, e)

        cancelled, built = _all_at_once(2, act)
        [row] = [r for r in services.store.exports.all_exports() if r.id == view["id"]]
        keys = set(services.objects.keys(f"artifacts/{book}/{view['id']}/"))
        # Either the cancel won (the claim or the finish is refused; a refused finish removes its bytes) or
        # the finish did (the cancel then revokes the link and deletes them): the row has ended, and no
        # byte is left that a row does not name.
        consistent = (
            row.state == "cancelled"
            and cancelled == "cancelled"
            and built in ("finish_refused", "refused:ended")
        ) or (row.state == "expired" and built == "ready" and cancelled == "revoked" and not row.paths)
        consistent = consistent and keys <= set(row.paths)
        inconsistent += not consistent
        endings[row.state] += 1
        if not consistent:
            wrong.append((cancelled, built, row, keys))
    record("race: cancel against a finish: trials", RACE_TRIALS)
    record("race: cancel against a finish: trials with an inconsistent ending", inconsistent)
    record(
        "race: cancel against a finish: cancel first / finish first",
        f"{endings['cancelled']} / {endings['expired']}",
    )
    assert inconsistent == 0, wrong[:3]
    assert violations(services.store, services.objects, after_gc=False) == []
