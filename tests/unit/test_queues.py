"""The SQS batch every queue handler takes (`bindery.queues`): a record that raised is handed back to SQS
alone, and a poison message is logged and dropped, never redelivered to its dead-letter queue."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bindery import queues
from functions.build_worker import app as build_worker
from functions.webhook_ingest import app as webhook_ingest
from functions.webhook_sender import app as webhook_sender
from tests.events import ingest_event_for, send_event_for, sqs_event_for
from tests.unit.conftest import Stack


class Poison(ValueError):
    pass


@pytest.fixture
def dropped(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """What each drop logged: (message, message_id)."""
    logged: list[tuple[str, str]] = []

    def exception(message: str, *, extra: dict[str, Any]) -> None:
        logged.append((message, extra["message_id"]))

    monkeypatch.setattr(queues.logger, "exception", exception)
    return logged


def test_only_the_record_that_raised_is_handed_back_and_the_poison_one_is_dropped(
    dropped: list[tuple[str, str]], stack: Stack
) -> None:
    event = send_event_for(("ok", 1), ("poison", 2), ("boom", 3))
    handled: list[str] = []

    def handle(record: Any) -> str:
        endpoint = json.loads(record.body)["endpoint"]
        if endpoint == "poison":
            raise Poison("unreadable")
        if endpoint == "boom":
            raise RuntimeError("try again")
        handled.append(endpoint)
        return endpoint

    result = queues.process_batch(event, stack.context, handle, poison=Poison, dropping="dropping it")

    assert result == {"batchItemFailures": [{"itemIdentifier": "m-3"}]}
    assert handled == ["ok"]
    assert dropped == [("dropping it", "m-2")]


def test_each_queue_drops_a_message_it_cannot_read_and_names_what_it_was_not(
    dropped: list[tuple[str, str]], stack: Stack
) -> None:
    build = sqs_event_for("b", "e")
    build["Records"][0]["body"] = json.dumps({"hello": "world"})
    ingest = ingest_event_for({"hello": "world"})
    send = send_event_for(("endpoint", 1))
    send["Records"][0]["body"] = json.dumps({"endpoint": "e", "seq": 0})

    services, none_failed = stack.services, {"batchItemFailures": []}
    assert build_worker.handler(build, stack.context, builds=services.builds) == none_failed
    assert webhook_ingest.handler(ingest, stack.context, deliveries=services.deliveries) == none_failed
    assert webhook_sender.handler(send, stack.context, deliveries=services.deliveries) == none_failed
    assert dropped == [
        ("dropping a message that names no export", "m-1"),
        ("dropping a message that is not an event", "m-1"),
        ("dropping a message that names no delivery", "m-1"),
    ]


def test_a_value_error_from_a_send_is_handed_back_not_taken_for_a_message_that_names_no_delivery(
    dropped: list[tuple[str, str]], stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    def send(endpoint_id: str, seq: int) -> str:
        raise ValueError(f"a bug in sending {endpoint_id} {seq}")

    monkeypatch.setattr(stack.services.deliveries, "send", send)

    result = webhook_sender.handler(
        send_event_for(("endpoint", 1)), stack.context, deliveries=stack.services.deliveries
    )

    assert result == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert dropped == []
