"""The build worker as SQS drives it: one message, one build, and failures reported per record."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import EndpointConnectionError

from bindery import engine
from bindery.objects import artifact_key
from bindery.states import State
from functions.build_worker import app as build_worker
from tests.events import sqs_event_for
from tests.unit.conftest import Stack


def _pending(stack: Stack, fmt: str = "markdown") -> tuple[str, str]:
    book = stack.create_book()
    return book, stack.submit(book, fmt).body["id"]


def test_a_message_for_a_build_another_attempt_holds_is_handed_back_to_the_queue(stack: Stack) -> None:
    book, export_id = _pending(stack)
    stack.store.claims.claim_build(book, export_id, artifact_key(book, export_id, "other"), stack.clock())

    result = stack.build(book, export_id)

    assert result == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}


def test_a_message_for_an_ended_export_is_consumed_without_a_build(stack: Stack) -> None:
    book, export_id = _pending(stack)
    stack.http("DELETE", f"/books/{book}/exports/{export_id}")

    assert stack.build(book, export_id) == {"batchItemFailures": []}
    assert stack.objects.keys("artifacts/") == []


def test_a_message_that_names_no_export_is_dropped_not_retried(stack: Stack) -> None:
    event = sqs_event_for("b", "e")
    event["Records"][0]["body"] = json.dumps({"hello": "world"})
    assert build_worker.handler(event, stack.context, builds=stack.services.builds) == {
        "batchItemFailures": []
    }


class _Exploding:
    extension, content_type = "txt", "text/plain"

    def render(self, source, chapters, out):  # type: ignore[no-untyped-def]
        for _ in chapters:
            out.write(b"x" * 10)
            raise RuntimeError("the engine broke")


def test_an_engine_error_fails_the_export_as_render_failed_and_leaves_no_bytes(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book, export_id = _pending(stack, "html")
    monkeypatch.setattr(engine, "renderer_for", lambda fmt: _Exploding())

    assert stack.build(book, export_id) == {"batchItemFailures": []}

    polled = stack.poll(book, export_id).body
    assert (polled["state"], polled["failure_code"]) == ("failed", "render_failed")
    assert stack.store.exports.live_ids("user-alice") == frozenset()
    assert stack.objects.keys("artifacts/") == []


@pytest.mark.parametrize(("fmt", "read"), [("html", "GetObject"), ("markdown", "CopyObject")])
def test_an_s3_failure_mid_build_releases_the_lease_and_asks_for_a_retry(
    stack: Stack, fmt: str, read: str
) -> None:
    book, export_id = _pending(stack, fmt)

    def refuse(**_: object) -> None:
        raise EndpointConnectionError(endpoint_url="https://s3.amazonaws.com")  # S3 unreachable

    stack.objects.client.meta.events.register(f"before-call.s3.{read}", refuse)
    result = stack.build(book, export_id)
    stack.objects.client.meta.events.unregister(f"before-call.s3.{read}", refuse)

    assert result == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    [row] = [e for e in stack.store.exports.all_exports() if e.id == export_id]
    assert row.state == State.PENDING and row.lease_until == stack.clock()
    # The redelivery claims at once, without waiting out the lease.
    assert stack.build(book, export_id) == {"batchItemFailures": []}
    assert stack.poll(book, export_id).body["state"] == "ready"
    assert stack.poll(book, export_id).body["attempt"] == 2
