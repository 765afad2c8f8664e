"""Writes that went through although their answer was lost, and AWS faults that are not answers.

Each test pins one case that happened to a new user (issue 11). A lost answer is made the way AWS makes one:
the request reaches moto and is applied, then a before-send hook registered after moto's own raises
ReadTimeoutError, and botocore resends the request, as it would after a read timeout.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import botocore.endpoint
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from bindery.states import Queue, State
from bindery.storage import Export, Revoked
from tests.calls import recording
from tests.faults.oracle import artifact_of
from tests.unit.conftest import Reply, Stack


@pytest.fixture(autouse=True)
def _no_retry_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda _: None))


@contextmanager
def answer_lost(client: Any, operation: str, nth: int = 1) -> Iterator[list[str]]:
    """The `nth` `operation` call through `client` is applied, and its answer lost (once)."""
    lost: list[str] = []
    seen = [0]

    def lose(request: Any, event_name: str = "", **_: Any) -> None:
        if not event_name.endswith(f".{operation}"):
            return
        seen[0] += 1
        if seen[0] == nth and not lost:
            lost.append(operation)
            raise ReadTimeoutError(endpoint_url=request.url)

    # On `before-send` itself, registered after moto's own there: moto has applied the request when this
    # runs. (A hook on `before-send.*.<operation>` runs before moto's, and would lose nothing but the send.)
    event = "before-send"
    client.meta.events.register(event, lose)
    try:
        yield lost
    finally:
        client.meta.events.unregister(event, lose)
    assert lost == [operation], f"no {operation} answer was lost"


@contextmanager
def throttled(client: Any, operation: str) -> Iterator[list[str]]:
    """Every `operation` call through `client` is throttled before DynamoDB (or S3) applies it."""
    hit: list[str] = []

    def throttle(model: Any, **_: Any) -> None:
        if model.name == operation:
            hit.append(operation)
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "injected"}}, operation)

    client.meta.events.register("before-call", throttle)
    try:
        yield hit
    finally:
        client.meta.events.unregister("before-call", throttle)
    assert hit, f"no {operation} call was made"


def _row(stack: Stack, export_id: str) -> Export:
    [row] = [e for e in stack.store.exports.all_exports() if e.id == export_id]
    return row


def _ready(stack: Stack, book: str, fmt: str = "markdown") -> str:
    export_id = str(stack.submit(book, fmt).body["id"])
    assert stack.build(book, export_id)["batchItemFailures"] == []
    assert _row(stack, export_id).state == State.READY
    return export_id


def _table(stack: Stack) -> list[dict[str, Any]]:
    import boto3

    client = boto3.client("dynamodb")
    items: list[dict[str, Any]] = client.scan(TableName=stack.exports.settings.table)["Items"]
    return sorted(items, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))


# ---- a finish whose answer was lost ---------------------------------------------------------------


def test_a_lost_answer_comes_after_the_request_was_applied(stack: Stack) -> None:
    """The helper itself: the first try of a put that may happen once is applied before its answer is lost,
    so botocore's resend is refused by the condition the first try made true. (Hooked before moto's own
    handler, the put would never be applied, and every test here would pin the other side of the fault.)"""
    client = stack.store.client
    put = {
        "TableName": stack.exports.settings.table,
        "Item": {"pk": {"S": "LOST"}, "sk": {"S": "ANSWER"}},
        "ConditionExpression": "attribute_not_exists(pk)",
    }
    with answer_lost(client, "PutItem"), pytest.raises(ClientError) as refused:
        client.put_item(**put)
    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    key = {"pk": {"S": "LOST"}, "sk": {"S": "ANSWER"}}
    assert "Item" in client.get_item(TableName=stack.exports.settings.table, Key=key)


def test_a_finish_whose_answer_was_lost_keeps_its_artifact_and_its_link_downloads(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book, "html").body["id"]

    with answer_lost(stack.store.client, "TransactWriteItems"):
        assert stack.build(book, export_id)["batchItemFailures"] == []

    row = _row(stack, export_id)
    assert row.state == State.READY and row.path is not None
    assert stack.objects.exists(row.path)
    url = stack.poll(book, export_id).body["download_url"]
    assert artifact_of(url) == row.path


# ---- wrong answers for changes that went through ---------------------------------------------------


def test_a_replacement_with_if_match_whose_answer_was_lost_answers_200_not_412(stack: Stack) -> None:
    book = stack.create_book()
    with answer_lost(stack.store.client, "TransactWriteItems"):
        reply = stack.http(
            "PUT",
            f"/books/{book}/manuscript",
            body={"manuscript": "# New\n\nnew\n"},
            headers={"If-Match": '"1"'},
        )
    assert reply.status == 200, reply.body
    assert reply.body["revision"] == 2 and [c["title"] for c in reply.body["chapters"]] == ["New"]
    assert stack.store.books.read_book(book).revision == 2  # type: ignore[union-attr]


def test_a_replacement_without_if_match_whose_answer_was_lost_answers_200_and_publishes_once(
    stack: Stack,
) -> None:
    book = stack.create_book()
    with answer_lost(stack.store.client, "TransactWriteItems"):
        reply = stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "# New\n\nnew\n"})
    assert reply.status == 200, reply.body
    assert reply.body["revision"] == 2
    assert stack.store.books.read_book(book).revision == 2  # type: ignore[union-attr]


def test_a_keyless_submit_whose_answer_was_lost_answers_202_with_the_one_export_it_made(stack: Stack) -> None:
    book = stack.create_book()
    with answer_lost(stack.store.client, "TransactWriteItems"):
        reply = stack.submit(book)
    assert reply.status == 202, reply.body
    assert [e.id for e in stack.store.exports.all_exports()] == [reply.body["id"]]
    assert stack.store.exports.live_ids("user-alice") == {reply.body["id"]}


def test_a_book_create_whose_answer_was_lost_answers_201_with_the_book_it_made(stack: Stack) -> None:
    with answer_lost(stack.store.client, "TransactWriteItems"):
        reply = stack.http("POST", "/books", body={"title": "Once", "manuscript": "# A\n\na\n"})
    assert reply.status == 201, reply.body
    assert stack.store.books.read_book(reply.body["id"]) is not None


def test_a_book_delete_whose_answer_was_lost_answers_204_not_404(stack: Stack) -> None:
    book = stack.create_book()
    with answer_lost(stack.store.client, "TransactWriteItems"):
        reply = stack.http("DELETE", f"/books/{book}")
    assert reply.status == 204, reply.body
    assert stack.store.books.read_book(book) is None


def test_a_claim_whose_answer_was_lost_is_the_claimers_and_the_build_goes_on(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    with answer_lost(stack.store.client, "UpdateItem"):
        assert stack.build(book, export_id)["batchItemFailures"] == []
    row = _row(stack, export_id)
    assert (row.state, row.attempt) == (State.READY, 1)


def test_a_cancel_of_a_ready_export_whose_answer_was_lost_still_deletes_its_bytes(stack: Stack) -> None:
    book = stack.create_book()
    export_id = _ready(stack, book)
    path = _row(stack, export_id).path
    assert path is not None
    # The second transaction is the revoke (the first, the pending cancel, is refused: the row is ready).
    with answer_lost(stack.store.client, "TransactWriteItems", nth=2):
        assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204
    assert not stack.objects.exists(path)
    assert _row(stack, export_id).state == State.EXPIRED


# ---- throttling is not an answer -----------------------------------------------------------------


def test_a_throttled_cancel_answers_503_not_404_and_changes_nothing(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    before = _table(stack)
    with throttled(stack.store.client, "TransactWriteItems"):
        reply = stack.http("DELETE", f"/books/{book}/exports/{export_id}")
    assert (reply.status, reply.headers.get("Retry-After")) == (503, "1"), reply.body
    assert _table(stack) == before


def test_a_throttled_revoke_answers_503_not_204_and_the_link_keeps_working(stack: Stack) -> None:
    book = stack.create_book()
    export_id = _ready(stack, book)
    refused_first = [0]

    def throttle_the_revoke(model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems":
            refused_first[0] += 1
            if refused_first[0] == 2:
                raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "x"}}, model.name)

    stack.store.client.meta.events.register("before-call", throttle_the_revoke)
    reply = stack.http("DELETE", f"/books/{book}/exports/{export_id}")
    stack.store.client.meta.events.unregister("before-call", throttle_the_revoke)

    assert reply.status == 503, reply.body
    row = _row(stack, export_id)
    assert row.state == State.READY and row.path is not None and stack.objects.exists(row.path)


def _read_routes(stack: Stack) -> list[tuple[str, str, Any]]:
    book = stack.create_book()
    export_id = _ready(stack, book)
    return [
        ("GET /books/{id}", f"/books/{book}", None),
        ("GET /books/{id}/exports", f"/books/{book}/exports", None),
        ("GET /books/{id}/exports/{id}", f"/books/{book}/exports/{export_id}", None),
    ]


def test_a_throttle_on_every_read_of_every_read_route_answers_503_and_writes_nothing(stack: Stack) -> None:
    tried = []
    for name, path, _ in _read_routes(stack):
        with recording(stack.store.client, stack.objects.client) as calls:
            assert stack.http("GET", path).status == 200
        reads = sorted(set(op for _, op in calls.made))
        assert reads and set(reads) <= {"GetItem", "Query", "TransactGetItems", "BatchGetItem"}
        for op in reads:
            before = _table(stack)
            with recording(stack.store.client) as during, throttled(stack.store.client, op):
                reply: Reply = stack.http("GET", path)
            assert during.writes() == [] and _table(stack) == before
            if reply.status == 200:
                # Only the read of the caller's live item for the RateLimit-* fields may fail without
                # failing the answer: the fields are then left out, and the route's own reads went through.
                assert op == "GetItem" and "RateLimit-Limit" not in reply.headers, (name, op)
                assert name != "GET /books/{id}", "its own read of the book is a GetItem"
                continue
            assert reply.status == 503, (name, op, reply.body)
            assert reply.headers.get("Retry-After") == "1" and reply.body["error"]["code"] == "unavailable"
            tried.append((name, op))
    assert len(tried) >= 4


def test_a_throttled_read_in_the_worker_gives_its_lease_back(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book, "html").body["id"]
    with throttled(stack.store.client, "GetItem"):
        assert stack.build(book, export_id)["batchItemFailures"] != []
    row = _row(stack, export_id)
    assert row.state == State.PENDING and row.attempt == 1
    assert (
        row.lease_until is not None and row.lease_until <= stack.clock()
    )  # the redelivery may retry at once
    assert stack.build(book, export_id)["batchItemFailures"] == []
    assert _row(stack, export_id).state == State.READY


# ---- endings that race -----------------------------------------------------------------------------


def test_a_finish_that_lands_after_its_books_delete_is_cancelled_and_removes_its_bytes(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book()
    export_id = stack.submit(book, "html").body["id"]
    real_finish = stack.store.claims.finish_export

    def delete_the_book_first(export: Export, **kw: Any) -> Any:
        assert stack.http("DELETE", f"/books/{book}").status == 204
        return real_finish(export, **kw)

    monkeypatch.setattr(stack.store.claims, "finish_export", delete_the_book_first)
    assert stack.build(book, export_id)["batchItemFailures"] == []
    row = _row(stack, export_id)
    assert row.state == State.CANCELLED
    assert stack.objects.keys("artifacts/") == []


def test_a_book_delete_that_reads_a_pending_export_a_finish_then_ends_leaves_no_bytes_behind(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    real_book_exports = stack.store.exports.book_exports

    def read_then_let_the_finish_land(book_id: str) -> Any:
        seen = list(real_book_exports(book_id))
        # The purge saw the export pending; the worker finishes it before the purge writes.
        assert [e.state for e in seen] == [State.PENDING]
        monkeypatch.setattr(stack.store.exports, "book_exports", real_book_exports)
        stack.build(book, export_id)
        return iter(seen)

    # The finish is refused (the book is gone) and removes its bytes; the purge then finds the row
    # cancelled by the worker, or cancels it itself.
    monkeypatch.setattr(stack.store.exports, "book_exports", read_then_let_the_finish_land)
    assert stack.http("DELETE", f"/books/{book}").status == 204
    assert _row(stack, export_id).state == State.CANCELLED
    stack.gc()
    assert stack.objects.keys("artifacts/") == [] and stack.objects.keys("books/") == []
    assert not [i for i in _table(stack) if i["sk"]["S"] == "PURGE"]


def test_a_purge_that_finds_a_ready_export_it_read_as_pending_revokes_it_and_deletes_its_bytes(
    stack: Stack,
) -> None:
    book = stack.create_book()
    export_id = _ready(stack, book)
    seen_pending = dataclasses.replace(_row(stack, export_id), state=State.PENDING)

    outcome = stack.store.exports.end_for_deleted_book(seen_pending, stack.clock())

    row = _row(stack, export_id)
    assert row.state == State.EXPIRED
    assert isinstance(outcome, Revoked) and outcome.paths == row.paths and row.path in outcome.paths


# ---- revocation is immediate -----------------------------------------------------------------------


def test_cancelling_a_ready_export_deletes_its_bytes_before_the_answer(stack: Stack) -> None:
    book = stack.create_book()
    export_id = _ready(stack, book)
    path = _row(stack, export_id).path
    assert path is not None and stack.objects.exists(path)

    assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204

    assert not stack.objects.exists(path)
    row = _row(stack, export_id)
    assert row.state == State.EXPIRED and row.paths == frozenset() and row.path is None


def test_deleting_a_book_deletes_its_ready_exports_bytes_before_the_answer(stack: Stack) -> None:
    book = stack.create_book()
    export_id = _ready(stack, book)
    path = _row(stack, export_id).path
    assert path is not None

    assert stack.http("DELETE", f"/books/{book}").status == 204

    assert not stack.objects.exists(path)
    assert _row(stack, export_id).state == State.EXPIRED


def test_a_failed_immediate_unlink_is_left_to_the_gc(stack: Stack) -> None:
    book = stack.create_book()
    export_id = _ready(stack, book)
    path = _row(stack, export_id).path
    assert path is not None
    with throttled(stack.objects.client, "DeleteObject"):
        assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204
    assert stack.objects.exists(path)
    due = stack.store.sweeps.due(Queue.UNLINK, stack.clock(), 10)
    assert [d.slot.export_id for d in due] == [export_id]
    stack.gc()
    assert not stack.objects.exists(path)


def test_a_cancel_retried_after_its_unlink_failed_deletes_the_bytes_itself(stack: Stack) -> None:
    book = stack.create_book()
    export_id = _ready(stack, book)
    path = _row(stack, export_id).path
    assert path is not None
    with throttled(stack.objects.client, "DeleteObject"):
        assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204
    assert stack.objects.exists(path)

    assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204

    assert not stack.objects.exists(path) and _row(stack, export_id).paths == frozenset()


# ---- bounded items ---------------------------------------------------------------------------------


def test_a_heading_over_the_chapter_title_limit_is_422_naming_it_and_writes_nothing(stack: Stack) -> None:
    before = _table(stack)
    reply = stack.http(
        "POST", "/books", body={"title": "Long", "manuscript": "# " + "x" * 450_000 + "\n\ntext\n"}
    )
    assert reply.status == 422, reply.body
    assert reply.body["error"]["code"] == "chapter_title_too_long"
    assert reply.body["error"]["limit"] == 500 and reply.body["error"]["chapter"] == 1
    assert _table(stack) == before and stack.objects.keys("books/") == []


def test_a_build_that_skips_more_chapters_than_a_row_can_name_keeps_the_first_and_counts_them_all(
    stack: Stack,
) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    claimed = stack.store.claims.claim_build(book, export_id, "artifacts/x", stack.clock())
    many = [{"ordinal": n, "title": "t" * 500, "reason": "r" * 300} for n in range(1, 5_001)]
    assert (
        stack.store.claims.finish_export(
            claimed.export,  # type: ignore[union-attr]
            path="artifacts/x",
            size_bytes=1,
            built_revision=1,
            now=stack.clock(),
            skipped=many,
        )
        == "ended"
    )
    polled = stack.poll(book, export_id).body
    assert polled["complete"] is False and polled["skipped_chapters_total"] == 5_000
    assert len(polled["skipped_chapters"]) == 100 and polled["skipped_chapters"][0]["ordinal"] == 1
