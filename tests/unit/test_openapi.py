"""The OpenAPI document, the resolvers and template.yaml describe the same routes, docs/openapi.json is what
the code prints, and the webhook routes answer exactly what the document says, field for field."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from bindery.api import reads, writes
from bindery.openapi import OPERATIONS, document
from bindery.outbound import Sent
from bindery.states import EVENT_TYPES
from bindery_local.template import routes
from tests.events import bus_event
from tests.unit.conftest import Reply, Stack

ROOT = Path(__file__).resolve().parents[2]


def _resolver_routes() -> set[str]:
    found = set()
    for resolver in (writes, reads):
        for route in resolver._static_routes + resolver._dynamic_routes:
            path = re.sub(r"<(\w+)>", lambda m: "{" + _camel(m.group(1)) + "}", route.path)
            path = path.replace("/.+", "/{name+}")  # the greedy route, as API Gateway writes it
            found.add(f"{route.method} {path}")
    return found


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_the_document_the_resolvers_and_the_template_name_the_same_routes() -> None:
    template = {route.route_key for route in routes()}
    assert set(OPERATIONS) == template == _resolver_routes()


def test_docs_openapi_json_is_what_the_code_prints() -> None:
    checked_in = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert checked_in == document(), "run: python -m bindery.openapi > docs/openapi.json"


def test_every_operation_documents_its_refusals() -> None:
    for key, operation in OPERATIONS.items():
        assert "401" in operation["responses"], key
        # What a path names may be missing or a stranger's; a collection of the caller's own never is. A
        # batch names books in its body, and one not the caller's is a 404 as in a path.
        assert ("404" in operation["responses"]) == ("{" in key or key == "POST /batches"), key


def iso_z(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Keys:
    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    def send(self, keys: list[tuple[str, int]]) -> None:
        self.sent += keys


def _conforms(route: str, reply: Reply) -> None:
    """The answer's status is one the operation documents, and its body is that status's schema."""
    responses = OPERATIONS[route]["responses"]
    assert str(reply.status) in responses, (route, reply.status, reply.body)
    content = responses[str(reply.status)].get("content")
    if content is None:
        assert reply.body is None, (route, reply.body)
        return
    schema = {**content["application/json"]["schema"], "components": document()["components"]}
    errors = [e.message for e in Draft202012Validator(schema).iter_errors(reply.body)]
    assert errors == [], (route, reply.status, errors, reply.body)


def test_every_webhook_answer_is_the_one_the_document_describes(stack: Stack) -> None:
    svc = stack.services
    svc.hooks.resolve = lambda host, port: ["93.184.216.34"]
    svc.deliveries.queue = Keys()
    answers = [
        Sent(status=500, error=None, excerpt="", latency_ms=5),
        Sent(status=200, error=None, excerpt="ok", latency_ms=5),
    ]

    def post(url: str, body: bytes, headers: dict[str, str], *, local_http: bool) -> Sent:
        return answers.pop(0)

    svc.deliveries.post = post
    seen: set[tuple[str, int]] = set()

    def call(route: str, path: str, **kw: Any) -> Reply:
        reply = stack.http(route.split(" ")[0], path, **kw)
        _conforms(route, reply)
        seen.add((route, reply.status))
        return reply

    made = call(
        "POST /webhooks",
        "/webhooks",
        body={"url": "https://hooks.example.com/in", "events": list(EVENT_TYPES)},
    )
    hook = made.body["id"]
    assert made.status == 201 and made.body["secret"].startswith("whsec_")
    call("POST /webhooks", "/webhooks", body={"url": "http://10.0.0.1/", "events": ["bindery.export.ready"]})
    call("POST /webhooks", "/webhooks", body={"url": "https://hooks.example.com/in", "events": ["nope"]})
    call("GET /webhooks", "/webhooks")
    call("GET /webhooks", "/webhooks", query={"limit": "0"})
    call("GET /webhooks/{endpointId}", f"/webhooks/{hook}")
    call("GET /webhooks/{endpointId}", f"/webhooks/{hook}", caller="user-mallory")  # another caller's: 404
    call("PATCH /webhooks/{endpointId}", f"/webhooks/{hook}", body={"description": "mine", "enabled": False})
    call("PATCH /webhooks/{endpointId}", f"/webhooks/{hook}", body={"enabled": True})
    call("PATCH /webhooks/{endpointId}", f"/webhooks/{hook}", body={})
    rotated = call("POST /webhooks/{endpointId}/rotate-secret", f"/webhooks/{hook}/rotate-secret")
    assert len(rotated.body["secrets"]) == 2  # the new one, and the one it replaces for the overlap

    book = stack.create_book()
    export = stack.submit(book).body["id"]
    stack.clock.advance(1)  # the event happens after the endpoint was registered
    detail = {"id": f"{export}:failed", "export_id": export, "book_id": book, "state": "failed"}
    envelope = bus_event(
        {**detail, "format": "pdf", "attempt": 2, "failure_code": "render_failed"}, when=iso_z(stack.clock())
    )
    assert svc.deliveries.ingest(json.dumps(envelope)) == [(hook, 1)]
    assert svc.deliveries.send(hook, 1) == "queued"  # the 500: an attempt with a status, and a next one
    call("GET /webhooks/{endpointId}/deliveries", f"/webhooks/{hook}/deliveries")
    call(
        "POST /webhooks/{endpointId}/deliveries/{deliveryId}/redeliver",
        f"/webhooks/{hook}/deliveries/1/redeliver",
    )
    stack.clock.advance(3600)
    assert svc.deliveries.send(hook, 1) == "acked"
    page = call(
        "GET /webhooks/{endpointId}/deliveries", f"/webhooks/{hook}/deliveries", query={"state": "acked"}
    )
    assert [len(d["attempts"]) for d in page.body["deliveries"]] == [2]
    call("GET /webhooks/{endpointId}/deliveries", f"/webhooks/{hook}/deliveries", query={"state": "lost"})
    call(
        "POST /webhooks/{endpointId}/deliveries/{deliveryId}/redeliver",
        f"/webhooks/{hook}/deliveries/1/redeliver",
    )
    call(
        "POST /webhooks/{endpointId}/deliveries/{deliveryId}/redeliver",
        f"/webhooks/{hook}/deliveries/9/redeliver",
    )
    events = call("GET /events", "/events")
    assert [e["cursor"] for e in events.body["events"]] == ["1"] and events.body["head"] == "1"
    call("GET /events", "/events", query={"after": "7"})  # past the head
    stack.clock.advance(31 * 86_400)  # the event is past its 30 days
    call("GET /events", "/events", query={"after": "0"})
    call("DELETE /webhooks/{endpointId}", f"/webhooks/{hook}")
    call("DELETE /webhooks/{endpointId}", f"/webhooks/{hook}")

    assert seen == {
        ("POST /webhooks", 201), ("POST /webhooks", 422), ("GET /webhooks", 200), ("GET /webhooks", 400),
        ("GET /webhooks/{endpointId}", 200), ("GET /webhooks/{endpointId}", 404),
        ("PATCH /webhooks/{endpointId}", 200), ("PATCH /webhooks/{endpointId}", 400),
        ("POST /webhooks/{endpointId}/rotate-secret", 200),
        ("GET /webhooks/{endpointId}/deliveries", 200), ("GET /webhooks/{endpointId}/deliveries", 400),
        ("POST /webhooks/{endpointId}/deliveries/{deliveryId}/redeliver", 409),
        ("POST /webhooks/{endpointId}/deliveries/{deliveryId}/redeliver", 202),
        ("POST /webhooks/{endpointId}/deliveries/{deliveryId}/redeliver", 404),
        ("GET /events", 200), ("GET /events", 400), ("GET /events", 410),
        ("DELETE /webhooks/{endpointId}", 204), ("DELETE /webhooks/{endpointId}", 404),
    }  # fmt: skip


def test_every_batch_answer_is_the_one_the_document_describes(stack: Stack) -> None:
    def call(route: str, path: str, **kw: Any) -> Reply:
        reply = stack.http(route.split(" ")[0], path, **kw)
        _conforms(route, reply)
        return reply

    book = stack.create_book()
    made = call("POST /batches", "/batches", body={"exports": [{"book_id": book, "format": "html"}] * 2})
    batch = made.body["id"]
    assert made.body["bundle"] is None
    call("GET /batches/{batchId}", f"/batches/{batch}")
    for target in made.body["targets"]:
        stack.build(book, target["export_id"])
    pending = call("GET /batches/{batchId}", f"/batches/{batch}")
    assert pending.body["bundle"]["state"] == "pending"
    stack.build(batch, pending.body["bundle"]["id"])
    ready = call("GET /batches/{batchId}", f"/batches/{batch}")
    assert ready.body["bundle"]["download_url"] is not None
    call("GET /batches", "/batches")
    call("DELETE /batches/{batchId}", f"/batches/{batch}")
    revoked = call("GET /batches/{batchId}", f"/batches/{batch}")
    assert revoked.body["revoked_at"] is not None
    call("GET /batches", "/batches")
    call("GET /batches/{batchId}", f"/batches/{batch}", caller="user-mallory")


def test_every_error_code_the_service_raises_is_in_the_readme() -> None:
    """A caller can look up every code it can be answered with (STYLE: documented once)."""
    raised = set()
    for source in (ROOT / "shared" / "bindery").rglob("*.py"):
        raised |= set(re.findall(r'code="([a-z_]+)"', source.read_text()))
    readme = (ROOT / "README.md").read_text()
    assert len(raised) > 40
    assert sorted(c for c in raised if f"`{c}`" not in readme) == []
