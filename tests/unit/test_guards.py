"""Every guard of the lifecycle, each named after the way of being wrong it answers (moto, in-process)."""

from __future__ import annotations

import pytest

from bindery.objects import artifact_key
from bindery.states import FailureCode, Queue, State
from bindery.storage import Claimed, ClaimRefused, Export
from tests.unit.conftest import Stack


def _pending(stack: Stack, fmt: str = "markdown") -> tuple[str, str]:
    book = stack.create_book()
    return book, stack.submit(book, fmt).body["id"]


def _claim(stack: Stack, book: str, export_id: str, token: str = "t1") -> Claimed | ClaimRefused:
    return stack.store.claims.claim_build(
        book, export_id, artifact_key(book, export_id, token), stack.clock()
    )


def _row(stack: Stack, book: str, export_id: str) -> Export:
    [row] = [e for e in stack.store.exports.all_exports() if e.id == export_id]
    return row


# ---- claim ------------------------------------------------------------------------------------------


def test_claim_is_refused_for_a_row_the_sweep_already_ended(stack: Stack) -> None:
    book, export_id = _pending(stack)
    stack.clock.advance(stack.exports.settings.queue_grace_seconds + 1)
    assert stack.sweep()["failed"] == 1

    refused = _claim(stack, book, export_id)

    assert isinstance(refused, ClaimRefused) and refused.reason == "ended"
    assert _row(stack, book, export_id).attempt == 0


def test_second_claimer_is_refused_while_the_first_holds_the_lease(stack: Stack) -> None:
    book, export_id = _pending(stack)
    first = _claim(stack, book, export_id, "first")
    stack.clock.advance(stack.exports.settings.lease_seconds - 1)

    second = _claim(stack, book, export_id, "second")

    assert isinstance(first, Claimed) and first.export.attempt == 1
    assert isinstance(second, ClaimRefused) and second.reason == "held"
    assert _row(stack, book, export_id).paths == {artifact_key(book, export_id, "first")}


def test_a_build_whose_worker_died_is_retried_once_its_lease_runs_out(stack: Stack) -> None:
    book, export_id = _pending(stack)
    _claim(stack, book, export_id, "dead")
    stack.clock.advance(stack.exports.settings.lease_seconds)

    retry = _claim(stack, book, export_id, "retry")

    assert isinstance(retry, Claimed) and retry.export.attempt == 2
    # Both attempts' keys stay named, so bytes the dead attempt may have written are still unlinked.
    assert retry.export.paths == {artifact_key(book, export_id, t) for t in ("dead", "retry")}


def test_claims_stop_after_max_attempts(stack: Stack) -> None:
    book, export_id = _pending(stack)
    for n in range(stack.exports.settings.max_attempts):
        assert isinstance(_claim(stack, book, export_id, f"a{n}"), Claimed)
        stack.clock.advance(stack.exports.settings.lease_seconds)

    refused = _claim(stack, book, export_id, "one-too-many")

    assert isinstance(refused, ClaimRefused) and refused.reason == "exhausted"


def test_claim_of_an_export_that_does_not_exist_is_refused_as_gone(stack: Stack) -> None:
    book = stack.create_book()
    refused = _claim(stack, book, "0000000000000000000aa")
    assert isinstance(refused, ClaimRefused) and refused.reason == "gone"


# ---- finish and fail --------------------------------------------------------------------------------


def test_finish_after_the_sweep_ended_the_row_is_refused_and_publishes_nothing(stack: Stack) -> None:
    book, export_id = _pending(stack)
    claimed = _claim(stack, book, export_id)
    assert isinstance(claimed, Claimed)
    s = stack.exports.settings
    stack.clock.advance(s.lease_seconds + s.retry_grace_seconds + 1)
    assert stack.sweep()["failed"] == 1

    finished = stack.store.claims.finish_export(
        claimed.export, path="p", size_bytes=1, built_revision=1, now=stack.clock()
    )

    assert finished == "refused"
    row = _row(stack, book, export_id)
    assert (row.state, row.failure_code, row.path) == (State.FAILED, FailureCode.WORKER_LOST, None)


def test_a_stale_attempt_can_neither_finish_nor_fail_its_successors_row(stack: Stack) -> None:
    book, export_id = _pending(stack)
    stale = _claim(stack, book, export_id, "stale")
    stack.clock.advance(stack.exports.settings.lease_seconds)
    current = _claim(stack, book, export_id, "current")
    assert isinstance(stale, Claimed) and isinstance(current, Claimed)

    finished = stack.store.claims.finish_export(
        stale.export, path="stale", size_bytes=1, built_revision=1, now=stack.clock()
    )
    failed = stack.store.claims.fail_export(stale.export, FailureCode.RENDER_FAILED, stack.clock())

    assert (finished, failed) == ("refused", False)
    row = _row(stack, book, export_id)
    assert (row.state, row.attempt) == (State.PENDING, 2)
    assert stack.store.exports.live_ids("user-alice") == {export_id}


def test_a_finish_refused_because_the_export_was_cancelled_removes_the_attempts_artifact(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book, export_id = _pending(stack, "html")  # a format that streams through the writer
    real_commit = type(stack.objects.writer("k", "t")).commit

    def commit_then_cancel(writer):  # the caller cancels while the upload completes
        size = real_commit(writer)
        assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204
        return size

    monkeypatch.setattr(type(stack.objects.writer("k", "t")), "commit", commit_then_cancel)
    assert stack.services.builds.build(book, export_id) == "finish_refused"

    assert stack.objects.keys("artifacts/") == []
    assert _row(stack, book, export_id).state == State.CANCELLED


# ---- expiry and unlink ------------------------------------------------------------------------------


def _ready(stack: Stack) -> tuple[str, str]:
    book, export_id = _pending(stack)
    assert stack.services.builds.build(book, export_id) == "ready"
    return book, export_id


def test_the_gc_expires_only_ready_rows(stack: Stack) -> None:
    book, pending_id = _pending(stack)
    _, ready_id = _ready(stack)
    stack.clock.advance(stack.exports.settings.link_ttl_seconds + 1)

    stack.gc()

    assert _row(stack, book, pending_id).state == State.PENDING
    assert any(e.id == ready_id and e.state == State.EXPIRED for e in stack.store.exports.all_exports())


def test_expiry_keeps_the_path_until_the_bytes_are_gone(stack: Stack) -> None:
    book, export_id = _ready(stack)
    [due] = stack.store.sweeps.due(Queue.EXPIRE, stack.clock() + 10**6, 10)
    stack.clock.advance(stack.exports.settings.link_ttl_seconds)

    assert stack.store.sweeps.expire_link(due, stack.clock()) is True

    row = _row(stack, book, export_id)
    assert row.state == State.EXPIRED and row.path is not None and stack.objects.exists(row.path)


def test_a_failed_unlink_is_retried_and_the_path_is_forgotten_only_after_the_delete(stack: Stack) -> None:
    book, export_id = _ready(stack)
    path = _row(stack, book, export_id).path
    assert path is not None
    stack.clock.advance(stack.exports.settings.link_ttl_seconds)

    def refuse_delete(**_: object) -> None:
        raise ConnectionError("S3 is down")

    events = stack.objects.client.meta.events
    events.register("before-call.s3.DeleteObject", refuse_delete)
    first = stack.gc()
    events.unregister("before-call.s3.DeleteObject", refuse_delete)

    assert (first["expired"], first["unlinked"], first["unlink_failures"]) == (1, 0, 1)
    row = _row(stack, book, export_id)
    assert row.path == path and stack.objects.exists(path)

    second = stack.gc()

    assert (second["unlinked"], second["unlink_failures"]) == (1, 0)
    assert not stack.objects.exists(path)
    assert _row(stack, book, export_id).path is None


def test_unlinking_an_object_that_is_already_gone_counts_as_done(stack: Stack) -> None:
    book, export_id = _ready(stack)
    path = _row(stack, book, export_id).path
    assert path is not None
    stack.objects.delete([path])
    stack.clock.advance(stack.exports.settings.link_ttl_seconds)

    assert stack.gc()["unlinked"] == 1
    assert _row(stack, book, export_id).path is None


def test_an_export_past_its_ttl_reads_as_gone_before_dynamodb_deletes_it(stack: Stack) -> None:
    book, export_id = _ready(stack)
    s = stack.exports.settings
    stack.clock.advance(s.link_ttl_seconds)
    stack.gc()
    assert stack.poll(book, export_id).body["state"] == "expired"

    stack.clock.advance(s.ended_retention_seconds)

    assert stack.poll(book, export_id).status == 404
    assert any(
        e.id == export_id for e in stack.store.exports.all_exports()
    )  # still in the table: TTL is late


def test_an_idempotency_key_past_its_ttl_is_a_key_never_seen(stack: Stack) -> None:
    book = stack.create_book()
    first = stack.submit(book, key="k-1").body["id"]
    stack.clock.advance(stack.exports.settings.idempotency_ttl_seconds)

    second = stack.submit(book, key="k-1")

    assert second.status == 202 and second.body["id"] != first


# ---- cancel -----------------------------------------------------------------------------------------


def test_cancel_of_a_pending_export_ends_it_and_frees_its_live_slot(stack: Stack) -> None:
    book, export_id = _pending(stack)

    assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204

    assert stack.poll(book, export_id).body["state"] == "cancelled"
    assert stack.store.exports.live_ids("user-alice") == frozenset()
    assert stack.services.builds.build(book, export_id) == "refused:ended"


def test_cancel_of_a_ready_export_ends_its_link_and_removes_its_bytes_at_once(stack: Stack) -> None:
    book, export_id = _ready(stack)
    path = _row(stack, book, export_id).path
    assert path is not None

    assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204

    polled = stack.poll(book, export_id).body
    assert (polled["state"], polled["download_url"]) == ("expired", None)
    assert not stack.objects.exists(path)
    assert stack.gc()["unlinked"] == 0  # nothing left for the backstop


def test_cancelling_an_ended_export_again_changes_nothing(stack: Stack) -> None:
    book, export_id = _pending(stack)
    stack.http("DELETE", f"/books/{book}/exports/{export_id}")
    before = _row(stack, book, export_id)

    assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204
    assert _row(stack, book, export_id) == before


# ---- stale sweep ------------------------------------------------------------------------------------


def test_a_row_never_started_within_the_queue_grace_fails_as_queue_timeout(stack: Stack) -> None:
    book, export_id = _pending(stack)
    stack.clock.advance(stack.exports.settings.queue_grace_seconds + 1)

    assert stack.sweep()["failed"] == 1

    polled = stack.poll(book, export_id).body
    assert (polled["state"], polled["failure_code"]) == ("failed", "queue_timeout")
    assert stack.store.exports.live_ids("user-alice") == frozenset()


def test_a_started_attempt_whose_lease_ran_out_with_no_retry_fails_as_worker_lost(stack: Stack) -> None:
    book, export_id = _pending(stack)
    _claim(stack, book, export_id)
    s = stack.exports.settings
    stack.clock.advance(s.lease_seconds + s.retry_grace_seconds - 1)
    assert stack.sweep()["failed"] == 0

    stack.clock.advance(2)

    assert stack.sweep()["failed"] == 1
    assert stack.poll(book, export_id).body["failure_code"] == "worker_lost"


def test_the_sweep_rechecks_its_clock_in_the_write_when_the_index_is_stale(stack: Stack) -> None:
    book, export_id = _pending(stack)
    stack.clock.advance(stack.exports.settings.queue_grace_seconds + 1)
    [seen] = stack.store.sweeps.due(Queue.STALE, stack.clock(), 10)
    # A worker claims between the sweep's query and its write: the index entry the sweep holds is stale.
    assert isinstance(_claim(stack, book, export_id), Claimed)

    assert stack.store.sweeps.fail_stale(seen, stack.clock()).code is None
    assert _row(stack, book, export_id).state == State.PENDING
