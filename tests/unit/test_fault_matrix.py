"""The fault matrix: every AWS call the handler paths make, each failed in five ways, then the system is run
to quiescence and held to its promises.

The call points are enumerated from a recording of a clean run of the ten workloads
(tests/faults/workloads.py), so a call added to the code is covered without editing this test. The five
kinds of fault, four before AWS applies the call and one after (its answer lost), are in
tests/faults/injector.py; what must hold afterwards is in tests/faults/oracle.py: the twelve promises of
tests/invariants.py at quiescence, and two throughout (every ready row's object exists and every URL a
poll returned downloads it; every answer a caller got is true).

`make test` deals the five kinds across the call points: call `at` of the i-th scenario is struck by the
kind (at + i) mod 5, so every call point is struck once and each kind strikes a fifth of every scenario's
points. `make reliability` (BINDERY_MATRIX_EVERY_KIND=1) strikes with every kind at every point, five
times the runs, and publishes those figures.
"""

from __future__ import annotations

import json
import os
import types
from collections.abc import Callable, Iterator
from typing import Any

import botocore.endpoint
import moto.s3.models
import pytest

import bindery.writers
from tests.calls import recording
from tests.faults.injector import KINDS, injector
from tests.faults.oracle import Truth
from tests.faults.workloads import SCENARIOS, SMALL_PART, Run
from tests.figures import record
from tests.invariants import _all_items
from tests.unit.conftest import Stack

EVERY_KIND = os.environ.get("BINDERY_MATRIX_EVERY_KIND") == "1"


def dealt(kind: str, scenario: str, at: int) -> bool:
    """Whether `kind` strikes call `at` of `scenario` this run: always under BINDERY_MATRIX_EVERY_KIND."""
    return EVERY_KIND or KINDS[(at + SCENARIOS.index(scenario)) % len(KINDS)] == kind


@pytest.fixture(autouse=True)
def _no_retry_sleep(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """botocore backs off before each resend; on moto and a fake clock there is nothing to wait for."""
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda _: None))
    yield


@pytest.fixture(autouse=True)
def _small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of SMALL_PART on both sides, so that the multipart workload's upload has several."""
    monkeypatch.setattr(bindery.writers, "PART_BYTES", SMALL_PART)
    monkeypatch.setattr(moto.s3.models, "S3_UPLOAD_PART_MIN_SIZE", SMALL_PART)


_POINTS: dict[str, list[tuple[str, str]]] = {}


def _scenario_points(stack_factory: Callable[[], Any], scenario: str) -> list[tuple[str, str]]:
    """A scenario's call points, recorded once per process: the clean run is the same for every kind."""
    if scenario not in _POINTS:
        with stack_factory() as probe:
            _POINTS[scenario] = _call_points(probe, scenario)
    return _POINTS[scenario]


def _call_points(stack: Stack, scenario: str | None = None) -> list[tuple[str, str]]:
    with recording(stack.store.client, stack.objects.client) as calls:
        run = Run(stack, truth=Truth(stack))
        run.workload(scenario)
    run.quiesce()
    assert run.witness.found() == []
    return calls.made


def test_the_clean_run_keeps_every_promise_and_tells_only_the_truth(stack: Stack) -> None:
    points = _call_points(stack)
    assert len(points) > 60
    # Every S3 call a build or the GC can make is among the points the matrix strikes.
    multipart = {"CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "AbortMultipartUpload"}
    reached = {op for _, op in points}
    assert multipart | {"ListMultipartUploads", "CopyObject", "PutObject"} <= reached
    # The artifact's writer's and the GC's. (The cache's pack, deflated, goes up in one PutObject here; its
    # parts, aborted, are test_piece_cache's.)
    assert [op for _, op in points].count("AbortMultipartUpload") == 2
    # The webhooks scenario went all the way: the kept endpoint's delivery acked (and acked again when it was
    # redelivered), after a 500; the deleted endpoint's withdrawn.
    deliveries = sorted(
        (i["state"], len(json.loads(i["attempts"]))) for i in _all_items(stack.store, ("DLV#",))
    )
    assert deliveries == [("acked", 3), ("withdrawn", 1)]


def test_every_call_point_is_dealt_to_one_kind_and_every_kind_to_a_fifth_of_each_scenario() -> None:
    for scenario in SCENARIOS:
        takers = [[kind for kind in KINDS if dealt(kind, scenario, at)] for at in range(40)]
        assert all(len(t) == (len(KINDS) if EVERY_KIND else 1) for t in takers), scenario
        assert {k: sum(k in t for t in takers) for k in KINDS} == {
            k: 40 // (1 if EVERY_KIND else 5) for k in KINDS
        }


@pytest.mark.slow(45)
@pytest.mark.parametrize("kind", KINDS)
def test_a_fault_at_every_call_point_loses_nothing(stack_factory: Callable[[], Any], kind: str) -> None:
    failures: list[str] = []
    tried = fired = points_seen = least = 0
    # BINDERY_MATRIX_SCENARIOS=webhooks,stale runs those alone: for working on one path.
    chosen = os.environ.get("BINDERY_MATRIX_SCENARIOS")
    for scenario in chosen.split(",") if chosen else SCENARIOS:
        points = _scenario_points(stack_factory, scenario)
        points_seen += len(points)
        least += len(points) if EVERY_KIND else len(points) // len(KINDS)
        for at, (service, op) in enumerate(points):
            if not dealt(kind, scenario, at):
                continue
            where = f"{kind} at call {at} of {scenario} ({service} {op})"
            with stack_factory() as stack:
                strike = injector(kind, at)
                clients = (stack.store.client, stack.objects.client)
                strike.arm(*clients)
                run = Run(stack, truth=Truth(stack))
                run.workload(scenario)
                strike.disarm(*clients)
                run.quiesce()
                tried += 1
                fired += strike.fired
                if not strike.fired:
                    failures.append(f"{where}: the fault never struck")
                failures += [f"{where}: {v}" for v in run.witness.found()]
    print(
        f"\nfault matrix: {kind}: {tried} of {points_seen} call points tried, {fired} struck, "
        f"{len(failures)} violations"
    )
    record(f"fault matrix: {kind}: call points tried", tried)
    record(f"fault matrix: {kind}: faults that struck", fired)
    record(f"fault matrix: {kind}: violations (untrue answers and broken promises)", len(failures))
    # At least a fifth of each scenario's points were dealt to this kind (all of them, under EVERY_KIND).
    assert (points_seen > 300 or chosen) and tried >= least
    assert failures == []
