"""Every AWS call each function makes is allowed by its own role in template.yaml, and what each role must
never do is refused: evaluated offline by an IAM policy simulator (tests/iam), since moto enforces no IAM.

The calls are recorded while the handlers run a workload that reaches every path that calls AWS: the fault
matrix's scenarios to quiescence, then an adopted upload (a small one and one rewritten in parts), a build
into a multipart artifact, a build whose storage fails and gives its lease back, an export nobody builds
(the stale sweep ends it), and an orphan and a stale multipart upload for the GC to clear. Then the delivery
path, with real events: an endpoint registered and read, an export's events ingested, each delivery sent
(a 5xx retried by the sweep, a 2xx, a redelivery answered 410 that disables the endpoint, a delivery
deferred while it is disabled, one withdrawn because its book was deleted), and a deleted endpoint's
waiting delivery withdrawn by the sweep.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from bindery.objects import ARTIFACT_PREFIX, upload_key
from bindery.outbound import Sent
from bindery.sendqueue import SendQueue
from bindery.states import EVENT_TYPES
from bindery.writers import PART_BYTES
from functions.webhook_ingest import app as webhook_ingest
from functions.webhook_sender import app as webhook_sender
from functions.webhook_sweep import app as webhook_sweep
from tests.events import bus_event, ingest_event_for, sample, send_event_for
from tests.faults.workloads import Run
from tests.figures import record
from tests.iam import (
    FUNCTIONS,
    QUEUES,
    Recorder,
    Request,
    _object_arn,
    _table_arn,
    acting_as,
    queue_arn,
    requests_for,
    simulate,
)
from tests.unit.conftest import Stack

TABLE_ARN = _table_arn("")
BUCKET_ARN = _object_arn("").rstrip("/")
SEND_QUEUE_ARN = queue_arn("WebhookSendQueue")

# What each role must NOT be able to do, whatever its code does today.
FORBIDDEN: dict[str, list[Request]] = {
    "poll": [
        *(
            Request(f"dynamodb:{a}", TABLE_ARN)
            for a in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")
        ),
        Request("s3:PutObject", _object_arn("artifacts/b/e/k")),
        Request("s3:DeleteObject", _object_arn("artifacts/b/e/k")),
        Request("s3:GetObject", _object_arn("books/b/cuts/c.md")),  # a reader gets links, never the text
    ],
    "build_worker": [
        Request("s3:DeleteObject", _object_arn("books/b/cuts/c.md")),
        Request("s3:PutObject", _object_arn("books/b/cuts/c.md")),
        Request("dynamodb:DeleteItem", TABLE_ARN),
        Request("dynamodb:Scan", TABLE_ARN),
    ],
    "submit": [
        Request("s3:GetObject", _object_arn("artifacts/b/e/k")),
        Request("s3:PutObject", _object_arn("artifacts/b/e/k")),
        Request("dynamodb:Scan", TABLE_ARN),
    ],
    "expiry_gc": [
        Request("s3:GetObject", _object_arn("books/b/cuts/c.md")),
        Request("s3:PutObject", _object_arn("artifacts/b/e/k")),
        Request("s3:ListBucket", BUCKET_ARN, (("s3:prefix", "books/"),)),
    ],
    "stale_sweep": [
        Request("s3:GetObject", _object_arn("artifacts/b/e/k")),
        Request("s3:DeleteObject", _object_arn("artifacts/b/e/k")),
        Request("dynamodb:Scan", TABLE_ARN),
    ],
    # An event names all a delivery needs: ingest reads no book and deletes nothing, and it cannot feed its
    # own queue (an event it made up would be signed and delivered) or the builds'.
    "webhook_ingest": [
        *(Request(f"dynamodb:{a}", TABLE_ARN) for a in ("DeleteItem", "BatchWriteItem", "Scan", "GetItem")),
        Request("sqs:SendMessage", queue_arn("WebhookEventsQueue")),
        Request("sqs:SendMessage", queue_arn("BuildQueue")),
        Request("s3:GetObject", _object_arn("artifacts/b/e/k")),
    ],
    # The one function that talks to strangers' URLs holds nothing worth carrying out to them: no object
    # of the bucket, no listing of the table, no write but updates, no queue.
    "webhook_sender": [
        Request("sqs:SendMessage", SEND_QUEUE_ARN),
        *(
            Request(f"dynamodb:{a}", TABLE_ARN)
            for a in ("PutItem", "DeleteItem", "BatchWriteItem", "Query", "Scan", "BatchGetItem")
        ),
        Request("dynamodb:Query", f"{TABLE_ARN}/index/by_due"),
        Request("s3:GetObject", _object_arn("artifacts/b/e/k")),
        Request("s3:GetObject", _object_arn("books/b/cuts/c.md")),
    ],
    "webhook_sweep": [
        *(Request(f"dynamodb:{a}", TABLE_ARN) for a in ("PutItem", "DeleteItem", "Scan", "GetItem")),
        Request("sqs:SendMessage", queue_arn("BuildQueue")),
        Request("s3:DeleteObject", _object_arn("artifacts/b/e/k")),
    ],
}


def _throttle_once(operation: str) -> Any:
    state = {"fired": False}

    def hook(model: Any, **_: Any) -> None:
        if model.name == operation and not state["fired"]:
            state["fired"] = True
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "injected"}}, operation)

    return hook


def _workload(stack: Stack) -> None:
    run = Run(stack)
    run.workload()
    run.quiesce()

    book = stack.create_book()
    for size in (1_000, PART_BYTES + 2**20):  # the second, over one part, is rewritten as a multipart upload
        upload = stack.http("POST", f"/books/{book}/uploads")
        assert upload.status == 201, upload.body
        text = ("# Chapter\n\n" + "words " * (size // 6)).encode()
        stack.objects.put_bytes(upload_key(book, upload.body["upload_id"]), text)  # the caller's own PUT
        adopted = stack.http("PUT", f"/books/{book}/manuscript", body={"upload_id": upload.body["upload_id"]})
        assert adopted.status == 200, adopted.body

    big = stack.submit(book, "html")  # over one part: a multipart artifact
    assert stack.build(book, big.body["id"])["batchItemFailures"] == []
    assert stack.poll(book, big.body["id"]).body["state"] == "ready"

    # Storage fails mid-build: the worker gives its lease back (release_claim) and asks for a retry.
    retried = stack.submit(book, "markdown")
    hook = _throttle_once("CopyObject")
    stack.objects.client.meta.events.register("before-call", hook)
    try:
        assert stack.build(book, retried.body["id"])["batchItemFailures"] != []
    finally:
        stack.objects.client.meta.events.unregister("before-call", hook)

    # Nobody builds this one: past the queue's grace the stale sweep ends it.
    stack.submit(stack.create_book(title="Unbuilt"), "html")
    # An artifact no row names, and a multipart upload nobody finished: the GC clears both.
    stack.objects.put_bytes(f"{ARTIFACT_PREFIX}{book}/orphan/0000/book.html", b"stray")
    stack.objects.client.create_multipart_upload(
        Bucket=stack.objects.settings.bucket, Key=f"{ARTIFACT_PREFIX}x/y/z"
    )
    settings = stack.exports.settings
    stack.clock.advance(
        settings.queue_grace_seconds + settings.lease_seconds + settings.retry_grace_seconds + 1
    )
    stack.sweep()
    stack.gc()
    stack.gc()


def _webhooks(stack: Stack, queue: SendQueue) -> None:
    """The delivery path's every call, driven by real events through the three handlers (and the API's
    webhook routes through submit and poll), for a caller of its own. Each step's outcome is read back."""
    svc, ctx, caller = stack.services, stack.context, "user-hooks"
    answers: list[Sent] = []

    def post(url: str, body: bytes, headers: dict[str, str], *, local_http: bool) -> Sent:
        return answers.pop(0)

    svc.hooks.resolve = lambda host, port: ["93.184.216.34"]
    svc.deliveries = svc.deliveries_with(queue, post=post)

    def http(method: str, path: str, **kw: Any) -> Any:
        return stack.http(method, path, caller=caller, **kw)

    made = http(
        "POST", "/webhooks", body={"url": "https://hooks.example.com/in", "events": list(EVENT_TYPES)}
    )
    assert made.status == 201, made.body
    hook = made.body["id"]
    assert [w["id"] for w in http("GET", "/webhooks").body["webhooks"]] == [hook]
    assert http("POST", f"/webhooks/{hook}/rotate-secret").status == 200

    def ingest(book: str, state: str) -> None:
        export = stack.submit(book, caller=caller).body["id"]
        detail = {"id": f"{export}:{state}", "export_id": export, "book_id": book, "owner": caller}
        happened = datetime.fromtimestamp(stack.clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        envelope = bus_event({**detail, "state": state}, when=happened)
        with acting_as("webhook_ingest"):
            result = webhook_ingest.handler(ingest_event_for(envelope), ctx, deliveries=svc.deliveries)
        assert result == {"batchItemFailures": []}

    def send(seq: int, *sent: Sent) -> str:
        answers.extend(sent)
        with acting_as("webhook_sender"):
            result = webhook_sender.handler(send_event_for((hook, seq)), ctx, deliveries=svc.deliveries)
        assert result == {"batchItemFailures": []}
        assert answers == [], "a POST the step expected was not made"
        found = svc.store.deliveries.read_delivery(hook, seq)
        assert found is not None
        return found.state

    def sweep() -> dict[str, Any]:
        with acting_as("webhook_sweep"):
            result: dict[str, Any] = webhook_sweep.handler(
                sample("webhook_sweep_schedule.json"), ctx, deliveries=svc.deliveries
            )
        return result

    def answer(status: int) -> Sent:
        return Sent(status=status, error=None, excerpt="", latency_ms=5)

    book = stack.create_book(caller=caller, title="Hooked")
    ingest(book, "ready")  # delivery 1
    assert [e["cursor"] for e in http("GET", "/events").body["events"]] == ["1"]
    assert send(1, answer(500)) == "queued"
    stack.clock.advance(3600)  # past its retry's due time: the sweep sends its key again
    assert sweep()["resent"] >= 1
    assert send(1, answer(200)) == "acked"

    ingest(book, "cancelled")  # delivery 2, left waiting
    assert http("POST", f"/webhooks/{hook}/deliveries/1/redeliver").status == 202
    assert send(1, answer(410)) == "rejected"  # and the endpoint is disabled at once
    assert http("GET", f"/webhooks/{hook}").body["disabled_reason"] == "gone"
    assert send(2) == "queued"  # deferred while its endpoint is disabled: nothing is posted
    assert http("PATCH", f"/webhooks/{hook}", body={"enabled": True}).status == 200
    assert (
        http("GET", f"/webhooks/{hook}/deliveries", query={"state": "queued"}).body["counts"]["queued"] == 1
    )

    gone = stack.create_book(caller=caller, title="Deleted")
    ingest(gone, "ready")  # delivery 3
    assert http("DELETE", f"/books/{gone}").status == 204
    assert send(3) == "withdrawn"  # its book is gone: not posted

    assert http("DELETE", f"/webhooks/{hook}").status == 204
    stack.clock.advance(3600)
    assert sweep()["withdrawn"] >= 1
    waiting = svc.store.deliveries.read_delivery(hook, 2)
    assert waiting is not None and waiting.state == "withdrawn"  # with its endpoint


@pytest.mark.slow(10)
def test_every_call_each_function_makes_is_allowed_by_its_own_role_and_nothing_forbidden_is(
    stack: Stack,
) -> None:
    url = boto3.client("sqs", region_name="us-east-1").create_queue(QueueName=QUEUES["WebhookSendQueue"])
    send_queue = SendQueue(replace(stack.exports.settings, webhook_send_queue_url=url["QueueUrl"]))
    recorder = Recorder()
    clients = (stack.store.client, stack.objects.client, send_queue.client)
    recorder.attach(*clients)
    recorder.presigned_posts(stack.objects)
    try:
        _workload(stack)
        _webhooks(stack, send_queue)
    finally:
        recorder.detach(*clients)

    asks = [
        (f, r)
        for f, calls in recorder.calls.items()
        for op, params in calls
        for r in requests_for(op, params)
    ]
    unique = sorted(set(asks), key=repr)
    forbidden = [(f, r) for f, requests in FORBIDDEN.items() for r in requests]
    results = simulate(unique + forbidden)
    allowed = dict(zip(unique, results[: len(unique)], strict=True))
    refused = dict(zip(forbidden, results[len(unique) :], strict=True))

    denied = [
        f"{f}: {r.action} on {r.resource} {dict(r.context)}: {res}"
        for (f, r), res in allowed.items()
        if res != "Allowed"
    ]
    let_through = [f"{f}: {r.action} on {r.resource}" for (f, r), res in refused.items() if res == "Allowed"]
    per_function = Counter(f for f, _ in asks)
    for function in FUNCTIONS:
        distinct = [res for (f, _), res in allowed.items() if f == function]
        tried = [res for (f, _), res in refused.items() if f == function]
        record(
            f"IAM: {function}: calls simulated (distinct requests)",
            f"{per_function[function]} ({len(distinct)})",
        )
        record(f"IAM: {function}: denied", sum(1 for res in distinct if res != "Allowed"))
        record(
            f"IAM: {function}: forbidden requests tried, refused",
            f"{len(tried)}, {sum(1 for res in tried if res != 'Allowed')}",
        )
    # Every function was exercised, and the paths this test exists for were reached.
    assert set(recorder.calls) == set(FUNCTIONS)
    reached = {(f, op) for f, calls in recorder.calls.items() for op, _ in calls}
    for must in [
        ("expiry_gc", "ListMultipartUploads"),
        ("expiry_gc", "AbortMultipartUpload"),
        ("expiry_gc", "ListObjectsV2"),
        ("build_worker", "CreateMultipartUpload"),
        ("build_worker", "CompleteMultipartUpload"),
        ("build_worker", "UpdateItem"),
        ("stale_sweep", "TransactWriteItems"),
        ("submit", "HeadObject"),
        ("submit", "PutObject"),  # the presigned POST of an upload
        ("poll", "GetObject"),
        ("webhook_ingest", "TransactWriteItems"),  # the feed's append, each delivery's
        ("webhook_ingest", "Query"),
        ("webhook_ingest", "SendMessageBatch"),
        ("webhook_sender", "GetItem"),
        ("webhook_sender", "TransactWriteItems"),  # claims, records, the withdrawal
        ("webhook_sender", "UpdateItem"),  # the disable, the deferral
        ("webhook_sweep", "Query"),
        ("webhook_sweep", "TransactWriteItems"),
        ("webhook_sweep", "UpdateItem"),
        ("webhook_sweep", "SendMessageBatch"),
    ]:
        assert must in reached, f"the workload never reached {must}"
    assert denied == [], "\n".join(denied)
    assert let_through == []
