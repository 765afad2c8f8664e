"""Every AWS call a function makes, evaluated against that function's own statements in template.yaml by an
IAM policy simulator (@cloud-copilot/iam-simulate, run by Node as its own process), offline: moto
enforces no IAM, so a call a role does not allow would pass every other test and fail in AWS.

A recorded call becomes the IAM requests AWS would authorise for it: a TransactWriteItems one per item and
kind (a ConditionCheck is `dynamodb:ConditionCheckItem`), a HeadObject `s3:GetObject`, a CopyObject a read
of its source and a write of its target, a ListObjectsV2 `s3:ListBucket` with its `s3:prefix`, a presigned
URL the request its holder will make with the role's credentials, a SendMessageBatch `sqs:SendMessage` on
its queue.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bindery_local import template

ACCOUNT, REGION = "123456789012", "us-east-1"
TABLE, BUCKET = "bindery", "bindery-artifacts"
# The queues' names in the simulated account: a test that sends to one makes it under this name (moto's
# account is the same), so the ARN its URL names is the one the template's !GetAtt resolves to.
QUEUES = {
    "BuildQueue": "bindery-build",
    "WebhookEventsQueue": "bindery-webhook-events",
    "WebhookSendQueue": "bindery-webhook-send",
}
# What each logical resource's attributes resolve to in the simulated account.
_ATTRIBUTES = {
    "Table.Arn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{TABLE}",
    "Table.StreamArn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{TABLE}/stream/2026-01-01T00:00:00.000",
    "Bucket.Arn": f"arn:aws:s3:::{BUCKET}",
    **{f"{queue}.Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}" for queue, name in QUEUES.items()},
}
FUNCTIONS = {
    "submit": "SubmitFunction",
    "poll": "PollFunction",
    "build_worker": "BuildWorkerFunction",
    "expiry_gc": "ExpiryGcFunction",
    "stale_sweep": "StaleSweepFunction",
    "webhook_ingest": "WebhookIngestFunction",
    "webhook_sender": "WebhookSenderFunction",
    "webhook_sweep": "WebhookSweepFunction",
}
SIMULATOR = Path(__file__).with_name("simulate.mjs")

# The function whose code is running: set by the unit Stack around each handler it invokes.
ACTING: ContextVar[str | None] = ContextVar("acting", default=None)


@contextmanager
def acting_as(function: str) -> Iterator[None]:
    token = ACTING.set(function)
    try:
        yield
    finally:
        ACTING.reset(token)


@dataclass(frozen=True)
class Request:
    """One IAM authorisation: what AWS evaluates against the calling role."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()


@dataclass
class Recorder:
    """A botocore hook: each API call (and each presigned URL) made while a function is acting."""

    calls: dict[str, list[tuple[str, dict[str, Any]]]] = field(default_factory=dict)
    presigning_post: bool = False

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        function = ACTING.get()
        if function is not None and not self.presigning_post:
            self.calls.setdefault(function, []).append((model.name, dict(params)))

    def attach(self, *clients: Any) -> None:
        for client in clients:
            # Before the parameters are built: once per call (not per resend), and presigning fires it too.
            client.meta.events.register("before-parameter-build", self)

    def presigned_posts(self, objects: Any) -> None:
        """A presigned POST is the PutObject its holder will make with the role's credentials. botocore
        builds it on CreateBucket's model, with no key, so the key is taken here instead."""
        presign = objects.presign_upload

        def recorded(key: str, *args: Any, **kwargs: Any) -> Any:
            function = ACTING.get()
            if function is not None:
                self.calls.setdefault(function, []).append(("PutObject", {"Key": key}))
            self.presigning_post = True
            try:
                return presign(key, *args, **kwargs)
            finally:
                self.presigning_post = False

        objects.presign_upload = recorded

    def detach(self, *clients: Any) -> None:
        for client in clients:
            client.meta.events.unregister("before-parameter-build", self)


def _table_arn(_: str) -> str:
    return _ATTRIBUTES["Table.Arn"]


def _object_arn(key: str) -> str:
    return f"{_ATTRIBUTES['Bucket.Arn']}/{key}"


def queue_arn(queue: str) -> str:
    """A queue's ARN, by its logical id."""
    return _ATTRIBUTES[f"{queue}.Arn"]


def _queue_arn_of_url(url: str) -> str:
    # https://sqs.<region>.amazonaws.com/<account>/<name>: the same account and region as the simulation.
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{url.rstrip('/').rsplit('/', 1)[-1]}"


_TRANSACT_ACTIONS = {
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
}
_DYNAMODB_SIMPLE = {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Scan", "DescribeTable"}
_S3_OBJECT = {
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "DeleteObject": "s3:DeleteObject",
}


def requests_for(operation: str, params: dict[str, Any]) -> list[Request]:
    """The IAM requests AWS authorises for one call. An operation this does not know fails the test: a new
    kind of call must be taught here before it can be proven allowed."""
    if operation in _DYNAMODB_SIMPLE:
        return [Request(f"dynamodb:{operation}", _table_arn(params["TableName"]))]
    if operation == "Query":
        arn = _table_arn(params["TableName"])
        index = params.get("IndexName")
        return [Request("dynamodb:Query", f"{arn}/index/{index}" if index else arn)]
    if operation == "TransactWriteItems":
        out = []
        for item in params["TransactItems"]:
            ((kind, body),) = item.items()
            out.append(Request(_TRANSACT_ACTIONS[kind], _table_arn(body["TableName"])))
        return out
    if operation == "TransactGetItems":
        return [
            Request("dynamodb:GetItem", _table_arn(i["Get"]["TableName"])) for i in params["TransactItems"]
        ]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [Request(f"dynamodb:{operation}", _table_arn(t)) for t in params["RequestItems"]]
    if operation in _S3_OBJECT:
        return [Request(_S3_OBJECT[operation], _object_arn(params["Key"]))]
    if operation == "CopyObject":
        source = params["CopySource"]
        source_key = source["Key"] if isinstance(source, dict) else source.split("/", 1)[1]
        return [
            Request("s3:GetObject", _object_arn(source_key)),
            Request("s3:PutObject", _object_arn(params["Key"])),
        ]
    if operation == "DeleteObjects":
        return [Request("s3:DeleteObject", _object_arn(o["Key"])) for o in params["Delete"]["Objects"]]
    if operation in ("ListObjectsV2", "ListObjects"):
        context = (("s3:prefix", params["Prefix"]),) if "Prefix" in params else ()
        return [Request("s3:ListBucket", _ATTRIBUTES["Bucket.Arn"], context)]
    if operation == "ListMultipartUploads":
        # s3:prefix is not a condition key of this action: AWS evaluates it without one.
        return [Request("s3:ListBucketMultipartUploads", _ATTRIBUTES["Bucket.Arn"])]
    if operation in ("SendMessage", "SendMessageBatch"):
        # SQS authorises a batch as SendMessage, once for the call.
        return [Request("sqs:SendMessage", _queue_arn_of_url(params["QueueUrl"]))]
    raise AssertionError(f"no IAM mapping for {operation}: add one to tests/iam")


def _resolve(value: Any) -> Any:
    if isinstance(value, list):
        return [_resolve(v) for v in value]
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            return _ATTRIBUTES[target if isinstance(target, str) else ".".join(target)]
        if "Fn::Sub" in value:
            return re.sub(r"\$\{([^}]+)\}", lambda m: _ATTRIBUTES[m.group(1)], value["Fn::Sub"])
        return {k: _resolve(v) for k, v in value.items()}
    return value


def policy_of(function: str) -> dict[str, Any]:
    """The function's own inline statements from template.yaml, with every reference resolved."""
    statements = []
    for entry in template.resources()[FUNCTIONS[function]]["Properties"]["Policies"]:
        if not (isinstance(entry, dict) and set(entry) == {"Statement"}):
            raise AssertionError(f"{function}: only inline statements can be simulated, not {entry!r}")
        statements += _resolve(entry["Statement"])
    return {"Version": "2012-10-17", "Statement": statements}


def simulator_dir() -> Path:
    base = Path(
        os.environ.get("BINDERY_IAM_SIMULATE_DIR", Path(__file__).parents[2] / ".cache" / "iam-simulate")
    )
    if (
        not (base / "node_modules" / "@cloud-copilot" / "iam-simulate").is_dir()
        or shutil.which("node") is None
    ):
        reason = "the IAM simulator is not installed (make test installs it: @cloud-copilot/iam-simulate)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return base.resolve()


def simulate(asks: list[tuple[str, Request]]) -> list[str]:
    """Each (function, request) evaluated against that function's policy: 'Allowed', 'ImplicitlyDenied',
    'ExplicitlyDenied', or 'error' (the simulator refused the request as malformed)."""
    policies = {f: policy_of(f) for f in {f for f, _ in asks}}
    simulations = [
        {
            "id": str(n),
            "role": FUNCTIONS[function],
            "policy": policies[function],
            "action": request.action,
            "resource": request.resource,
            "context": dict(request.context),
        }
        for n, (function, request) in enumerate(asks)
    ]
    run = subprocess.run(
        ["node", str(SIMULATOR)],
        input=json.dumps({"account": ACCOUNT, "simulations": simulations}),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "IAM_SIMULATE_DIR": str(simulator_dir())},
        check=False,
    )
    assert run.returncode == 0, run.stderr
    answers = json.loads(run.stdout)
    for answer in answers:
        assert answer["result"] != "error", (
            f"the simulator refused request {answer['id']}: {answer['errors']}"
        )
    return [a["result"] for a in answers]
