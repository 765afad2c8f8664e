"""Every AWS call each function makes is allowed by its own role in template.yaml, and what each role must
never do is refused: evaluated offline by an IAM policy simulator (tests/iam), since moto enforces no IAM.

The calls are recorded while the handlers run a workload that reaches every path that calls AWS: the fault
matrix's scenarios to quiescence, then an adopted upload (a small one and one rewritten in parts), a build
into a multipart artifact, a build whose storage fails and gives its lease back, an export nobody builds
(the stale sweep ends it), and an orphan and a stale multipart upload for the GC to clear.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError

from bindery.objects import ARTIFACT_PREFIX, upload_key
from tests.figures import record
from tests.iam import FUNCTIONS, Recorder, Request, _object_arn, _table_arn, requests_for, simulate
from tests.unit.conftest import Stack
from tests.unit.test_fault_matrix import Run

TABLE_ARN = _table_arn("")
BUCKET_ARN = _object_arn("").rstrip("/")

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
    for size in (1_000, 6 * 1024 * 1024):  # the second is rewritten as a multipart upload
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


@pytest.mark.slow(10)
def test_every_call_each_function_makes_is_allowed_by_its_own_role_and_nothing_forbidden_is(
    stack: Stack,
) -> None:
    recorder = Recorder()
    clients = (stack.store.client, stack.objects.client)
    recorder.attach(*clients)
    recorder.presigned_posts(stack.objects)
    try:
        _workload(stack)
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
    ]:
        assert must in reached, f"the workload never reached {must}"
    assert denied == [], "\n".join(denied)
    assert let_through == []
