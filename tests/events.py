"""Events for invoking handlers in-process, built from the samples in events/ (what `sam local invoke -e`
takes), so the samples are exercised by every test that uses them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

EVENTS = Path(__file__).resolve().parent.parent / "events"


def sample(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


_BASE = sample("poll_get_book.json")


def http_event(
    method: str,
    path: str,
    *,
    caller: str | None = "user-alice",
    body: Any = None,
    raw_body: str | None = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    caller_class: str | None = None,
) -> dict[str, Any]:
    """An API Gateway HTTP API v2 event, as the JWT authorizer would pass it: `caller` is the verified
    `sub` (None: a request with no authorizer context at all), `caller_class` its `bindery_class` claim."""
    event = copy.deepcopy(_BASE)
    event["routeKey"] = "$default"
    event["rawPath"] = path
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["http"]["path"] = path
    event["pathParameters"] = None
    if caller is None:
        event["requestContext"].pop("authorizer")
    else:
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = caller
        if caller_class is not None:
            event["requestContext"]["authorizer"]["jwt"]["claims"]["bindery_class"] = caller_class
    if headers:
        event["headers"].update({k.lower(): v for k, v in headers.items()})
    if query:
        event["queryStringParameters"] = query
        event["rawQueryString"] = "&".join(f"{k}={v}" for k, v in query.items())
    if raw_body is not None:
        event["body"] = raw_body
    elif body is not None:
        event["body"] = json.dumps(body)
    return event


def sqs_event_for(book_id: str, export_id: str, message_id: str = "m-1") -> dict[str, Any]:
    """The build queue's message for one export: the stream record the Pipe forwards."""
    event = sample("build_worker_sqs.json")
    record = event["Records"][0]
    stream = json.loads(record["body"])
    stream["dynamodb"]["Keys"] = {"pk": {"S": f"BOOK#{book_id}"}, "sk": {"S": f"EXPORT#{export_id}"}}
    record["body"] = json.dumps(stream)
    record["messageId"] = message_id
    return event


def _sqs_records(sample_name: str, bodies: list[str]) -> dict[str, Any]:
    event = sample(sample_name)
    (template,) = event["Records"]
    event["Records"] = [
        {**copy.deepcopy(template), "body": body, "messageId": f"m-{n}"} for n, body in enumerate(bodies, 1)
    ]
    return event


def bus_event(detail: dict[str, Any], when: str | None = None) -> dict[str, Any]:
    """An export's event as WebhookEventsRule delivers it to its queue: the sample's EventBridge envelope
    with this `detail` (the events pipe's shape: id, export_id, book_id, owner, format, state, attempt,
    failure_code), its detail-type the state's, and `when` as its time."""
    envelope: dict[str, Any] = json.loads(sample("webhook_ingest_sqs.json")["Records"][0]["body"])
    envelope["detail"] = {**envelope["detail"], **detail}
    envelope["detail-type"] = f"bindery.export.{envelope['detail']['state']}"
    if when is not None:
        envelope["time"] = when
    return envelope


def ingest_event_for(*envelopes: dict[str, Any]) -> dict[str, Any]:
    """The webhook events queue's batch: one record per envelope."""
    return _sqs_records("webhook_ingest_sqs.json", [json.dumps(e) for e in envelopes])


def send_event_for(*keys: tuple[str, int]) -> dict[str, Any]:
    """The webhook send queue's batch: one record per (endpoint, seq) key."""
    return _sqs_records("webhook_sender_sqs.json", [json.dumps({"endpoint": e, "seq": s}) for e, s in keys])
