"""River-style boundaries: at a cutoff minus one second nothing moves, at plus one second it does; ended
rows are never touched; and a sweep finishes every due row, even one more than its batch."""

from __future__ import annotations

import dataclasses

import pytest

from bindery.states import State
from tests.services import wired
from tests.unit.conftest import Stack


def _states(stack: Stack) -> dict[str, State]:
    return {e.id: e.state for e in stack.store.exports.all_exports()}


@pytest.mark.parametrize(("offset", "expected"), [(-1, "ready"), (+1, "expired")])
def test_expiry_cutoff(stack: Stack, offset: int, expected: str) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    stack.services.builds.build(book, export_id)
    expires_at = stack.clock() + stack.exports.settings.link_ttl_seconds
    stack.clock.now = expires_at + offset

    stack.gc()

    assert _states(stack)[export_id] == expected
    assert stack.poll(book, export_id).body["state"] == expected


def test_poll_says_expired_from_the_promised_second_even_before_the_gc_runs(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    stack.services.builds.build(book, export_id)
    stack.clock.advance(stack.exports.settings.link_ttl_seconds)

    polled = stack.poll(book, export_id).body

    assert (polled["state"], polled["download_url"]) == ("expired", None)
    assert _states(stack)[export_id] == State.READY  # the row has not moved; the answer has


@pytest.mark.parametrize(("offset", "expected"), [(-1, "pending"), (+1, "failed")])
def test_queue_grace_cutoff(stack: Stack, offset: int, expected: str) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    stack.clock.advance(stack.exports.settings.queue_grace_seconds + offset)

    stack.sweep()

    assert _states(stack)[export_id] == expected


@pytest.mark.parametrize(("offset", "expected"), [(-1, "pending"), (+1, "failed")])
def test_lease_cutoff(stack: Stack, offset: int, expected: str) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    stack.store.claims.claim_build(book, export_id, "artifacts/x", stack.clock())
    s = stack.exports.settings
    stack.clock.advance(s.lease_seconds + s.retry_grace_seconds + offset)

    stack.sweep()

    assert _states(stack)[export_id] == expected


def test_sweeps_leave_ended_rows_alone(stack: Stack) -> None:
    book = stack.create_book()
    cancelled = stack.submit(book).body["id"]
    stack.http("DELETE", f"/books/{book}/exports/{cancelled}")
    empty = stack.create_book("")
    failed = stack.submit(empty).body["id"]
    assert stack.services.builds.build(empty, failed) == "failed:empty_book"
    before = {e.id: e for e in stack.store.exports.all_exports()}
    stack.clock.advance(10**6)

    stack.sweep()

    after = {e.id: e for e in stack.store.exports.all_exports()}
    assert after == before


def test_batch_size_plus_one_due_rows_are_all_swept(stack: Stack) -> None:
    small = dataclasses.replace(stack.exports.settings, sweep_batch=3, max_live_exports=10)
    stack.services = wired(small, stack.store, stack.objects, stack.clock)
    book = stack.create_book()
    ids = [stack.submit(book).body["id"] for _ in range(small.sweep_batch + 1)]
    stack.clock.advance(small.queue_grace_seconds + 1)

    assert stack.sweep()["failed"] == len(ids)
    assert all(_states(stack)[i] == State.FAILED for i in ids)
