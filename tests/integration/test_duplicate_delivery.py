"""The same queue message delivered three times — at once, and again after a crash — is one build and
one artifact. Run on DynamoDB Local, where the claim's conditional write is really atomic."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from bindery.builds import RetryLater
from tests.figures import record
from tests.invariants import violations
from tests.services import Services

TRIALS = 20
DELIVERIES = 3


def _deliver(services: Services, book: str, export_id: str, barrier: threading.Barrier) -> str:
    barrier.wait()
    try:
        return services.builds.build(book, export_id)
    except RetryLater:
        return "retry"


def test_three_concurrent_deliveries_make_one_build_and_one_artifact(services: Services) -> None:
    book, _, _ = services.books.create_book("user-alice", "Dup", "# One\n\ntext\n")
    most_builds = 0
    for _ in range(TRIALS):
        view, _ = services.exports.submit("user-alice", book.id, "markdown", None)
        barrier = threading.Barrier(DELIVERIES)
        with ThreadPoolExecutor(DELIVERIES) as pool:
            outcomes = list(
                pool.map(
                    lambda _, v=view, b=barrier: _deliver(services, book.id, v["id"], b), range(DELIVERIES)
                )
            )
        most_builds = max(most_builds, outcomes.count("ready"))
        assert outcomes.count("ready") == 1, outcomes
        assert set(outcomes) <= {"ready", "retry", "refused:ended"}
        [row] = [e for e in services.store.exports.all_exports() if e.id == view["id"]]
        assert (row.state, row.attempt) == ("ready", 1)
        assert len([k for k in services.objects.keys("artifacts/") if view["id"] in k]) == 1
    assert violations(services.store, services.objects, after_gc=False) == []
    record("duplicate delivery: trials of 3 concurrent deliveries", TRIALS)
    record("duplicate delivery: most builds in one trial", most_builds)


class _Crash(BaseException):
    pass


def test_a_delivery_after_a_crash_rebuilds_once_and_leaves_one_artifact(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    book, _, _ = services.books.create_book("user-alice", "Dup", "# One\n\ntext\n")
    view, _ = services.exports.submit("user-alice", book.id, "markdown", None)
    real_finish = services.store.claims.finish_export

    def crash(*_: Any, **__: Any) -> bool:
        raise _Crash("the worker died after uploading, before finishing")

    monkeypatch.setattr(services.store.claims, "finish_export", crash)
    with pytest.raises(_Crash):
        services.builds.build(book.id, view["id"])
    monkeypatch.setattr(services.store.claims, "finish_export", real_finish)
    assert len(services.objects.keys("artifacts/")) == 1  # the dead attempt's upload

    # Redelivered twice more: first while the dead attempt's lease still holds, then after it ran out.
    with pytest.raises(RetryLater):
        services.builds.build(book.id, view["id"])
    services.clock.advance(services.settings.lease_seconds)  # type: ignore[attr-defined]
    barrier = threading.Barrier(2)
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda _: _deliver(services, book.id, view["id"], barrier), range(2)))

    assert outcomes.count("ready") == 1
    [row] = [e for e in services.store.exports.all_exports() if e.id == view["id"]]
    assert (row.state, row.attempt) == ("ready", 2)
    # Two attempts' keys are named; only the finished one is the link. Expiry unlinks both.
    assert len(row.paths) == 2 and row.path in row.paths
    services.clock.advance(services.settings.link_ttl_seconds)  # type: ignore[attr-defined]
    services.schedules.expire_lapsed_links()
    services.schedules.unlink_ended_artifacts()
    left = services.objects.keys("artifacts/")
    record("duplicate delivery after a crash: artifacts left after the GC", len(left))
    assert left == []
    assert violations(services.store, services.objects) == []
