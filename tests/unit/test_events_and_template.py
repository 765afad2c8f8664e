"""The samples in events/ drive every handler, and the PynamoDB model agrees with template.yaml."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import boto3
from standardwebhooks.webhooks import Webhook

from bindery.limits import CallerClass
from bindery.objects import cut_key
from bindery.outbound import Sent
from bindery.sendqueue import SendQueue, parse_message
from bindery.states import EVENT_TYPES, DeliveryState, State
from bindery.storage import DUE_PROJECTION, Book, Chapter, Endpoint, Export, Secret
from bindery.storage.table import ExportItem as _ExportItem
from bindery.webhooks import new_secret
from functions.build_worker import app as build_worker
from functions.expiry_gc import app as expiry_gc
from functions.poll import app as poll
from functions.stale_sweep import app as stale_sweep
from functions.submit import app as submit
from functions.webhook_ingest import app as webhook_ingest
from functions.webhook_sender import app as webhook_sender
from functions.webhook_sweep import app as webhook_sweep
from tests.events import sample
from tests.infra import table_properties, template
from tests.unit.conftest import Stack

# The ids the samples use.
BOOK, EXPORT, ENDPOINT = "0123456789abcdef0123", "19b2f3c4d5e0a1b2c3d4e", "19b2f3c4d5e0a1b2c3d4f"


def _seed(stack: Stack) -> None:
    now = stack.clock()
    text = b"# One\n\nThe sample.\n"
    stack.store.books.stage_cut(BOOK, "r1", [Chapter(1, "One", 0, len(text))], retire_at=now + 60)
    stack.objects.put_bytes(cut_key(BOOK, "r1"), text)
    stack.store.books.create_book(Book(BOOK, "user-alice", "Sample", 1, "r1", 1, len(text), now, now))
    export = Export(EXPORT, BOOK, "html", State.PENDING, now, "user-alice")
    limits = stack.exports.settings.limits(CallerClass.STANDARD)
    stack.store.exports.submit_export(export, caller="user-alice", limits=limits, now=now, idempotency=None)


def test_every_sample_event_drives_its_handler(stack: Stack) -> None:
    _seed(stack)
    ctx, svc = stack.context, stack.services

    assert submit.handler(sample("submit_create_book.json"), ctx, services=svc.api)["statusCode"] == 201
    assert poll.handler(sample("poll_get_book.json"), ctx, services=svc.api)["statusCode"] == 200
    assert poll.handler(sample("poll_list_exports.json"), ctx, services=svc.api)["statusCode"] == 200
    assert build_worker.handler(sample("build_worker_sqs.json"), ctx, builds=svc.builds) == {
        "batchItemFailures": []
    }
    got = poll.handler(sample("poll_get_export.json"), ctx, services=svc.api)
    assert json.loads(got["body"])["state"] == "ready"
    created = submit.handler(sample("submit_create_export.json"), ctx, services=svc.api)
    assert created["statusCode"] == 202
    assert submit.handler(sample("submit_cancel_export.json"), ctx, services=svc.api)["statusCode"] == 204
    assert stale_sweep.handler(
        sample("stale_sweep_schedule.json"), ctx, schedules=svc.schedules, batches=svc.batches
    ) == {
        "failed": 0,
        "refused": 0,
        "errors": 0,
        "settled": 0,
        "deferred": 0,
        "cleared": 0,
    }
    assert stack.objects.keys("artifacts/") == []  # the revoked link's bytes went with the cancel
    gc = expiry_gc.handler(sample("expiry_gc_schedule.json"), ctx, schedules=svc.schedules)
    assert (gc["unlinked"], gc["unlink_failures"], gc["chore_failures"]) == (0, 0, 0)


def test_every_webhook_sample_event_drives_its_handler(stack: Stack) -> None:
    """The ingest sample's event becomes a feed entry and a delivery to the sample endpoint, whose key the
    sender sample names; the sender posts it signed; the sweep sample then finds nothing due."""
    _seed(stack)
    ctx, svc, now = stack.context, stack.services, stack.clock()
    secret = new_secret()
    endpoint = Endpoint(
        ENDPOINT, "user-alice", "https://hooks.example.com/bindery", frozenset(EVENT_TYPES), "",
        (Secret(secret, None),), True, None, None, 0, now, now, {s.value: 0 for s in DeliveryState},
    )  # fmt: skip
    assert stack.store.endpoints.register_endpoint(endpoint) == endpoint
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="bindery-unit-send")["QueueUrl"]
    posted: list[tuple[str, bytes, dict[str, str]]] = []

    def post(url: str, body: bytes, headers: dict[str, str], *, local_http: bool) -> Sent:
        posted.append((url, body, headers))
        return Sent(status=200, error=None, excerpt="", latency_ms=5)

    queue = SendQueue(replace(svc.settings, webhook_send_queue_url=url))
    svc.deliveries = svc.deliveries_with(queue, post=post)

    assert webhook_ingest.handler(sample("webhook_ingest_sqs.json"), ctx, deliveries=svc.deliveries) == {
        "batchItemFailures": []
    }
    (sent,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    # The key the ingest sent is the one the sender sample carries.
    sender_sample = sample("webhook_sender_sqs.json")
    assert parse_message(sent["Body"]) == parse_message(sender_sample["Records"][0]["body"]) == (ENDPOINT, 1)
    assert webhook_sender.handler(sender_sample, ctx, deliveries=svc.deliveries) == {"batchItemFailures": []}
    [(to, body, headers)] = posted
    assert to == "https://hooks.example.com/bindery"
    # Signed with the endpoint's secret as Standard Webhooks says (the library's verify() would also hold
    # the timestamp to the wall clock, which the fake clock is not).
    at = datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)
    signature = Webhook(secret).sign(headers["webhook-id"], at, body.decode())
    assert signature in headers["webhook-signature"].split(" ")
    assert int(headers["webhook-timestamp"]) == int(now)
    event: dict[str, Any] = json.loads(body)
    assert (headers["webhook-id"], event["id"], event["type"]) == (f"{EXPORT}:ready",) * 2 + (
        "bindery.export.ready",
    )
    assert webhook_sweep.handler(sample("webhook_sweep_schedule.json"), ctx, deliveries=svc.deliveries) == {
        "resent": 0,
        "withdrawn": 0,
    }
    feed = poll.handler(sample("poll_list_events.json"), ctx, services=svc.api)
    assert [e["id"] for e in json.loads(feed["body"])["events"]] == [f"{EXPORT}:ready"]
    assert stack.store.deliveries.read_delivery(ENDPOINT, 1).state == "acked"  # type: ignore[union-attr]


def test_env_json_names_every_setting_the_handlers_need() -> None:
    env = json.loads((sample.__globals__["EVENTS"] / "env.json").read_text())["Parameters"]
    assert {"BINDERY_TABLE", "BINDERY_BUCKET", "AWS_ENDPOINT_URL"} <= set(env)


def test_the_model_and_the_template_describe_the_same_table() -> None:
    props = table_properties()
    schema = _ExportItem._get_schema()
    as_template = lambda ks: sorted((k["AttributeName"], k["KeyType"]) for k in ks)  # noqa: E731

    assert as_template(props["KeySchema"]) == as_template(schema["key_schema"])
    [gsi] = props["GlobalSecondaryIndexes"]
    [model_gsi] = schema["global_secondary_indexes"]
    assert gsi["IndexName"] == model_gsi["index_name"]
    assert as_template(gsi["KeySchema"]) == as_template(model_gsi["key_schema"])
    assert gsi["Projection"]["ProjectionType"] == model_gsi["projection"]["ProjectionType"]
    assert sorted(gsi["Projection"]["NonKeyAttributes"]) == sorted(
        model_gsi["projection"]["NonKeyAttributes"]
    )
    assert sorted(DUE_PROJECTION) == sorted(gsi["Projection"]["NonKeyAttributes"])
    template_types = {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]}
    model_types = {a["AttributeName"]: a["AttributeType"] for a in schema["attribute_definitions"]}
    assert template_types == model_types
    assert props["TimeToLiveSpecification"]["AttributeName"] == _ExportItem.ttl.attr_name


def test_the_template_uses_on_demand_billing_recovery_and_a_stream() -> None:
    props = table_properties()
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["StreamSpecification"]["StreamViewType"] in ("KEYS_ONLY", "NEW_IMAGE", "NEW_AND_OLD_IMAGES")
    pipe = template()["Resources"]["StreamToQueuePipe"]["Properties"]
    assert pipe["Source"] == {"Fn::GetAtt": "Table.StreamArn"}
