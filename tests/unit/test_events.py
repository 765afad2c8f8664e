"""Each terminal transition publishes exactly one event, built by the template's events pipe from the
table's stream: the stream records of a real run go through the pipe's own filters and input template."""

from __future__ import annotations

import json
from typing import Any

import boto3
from botocore.config import Config

from bindery.states import FailureCode
from bindery_local import template
from tests.unit.conftest import Stack

PIPE = "TransitionsToEventsPipe"
SCHEMA_KEYS = {
    "id", "export_id", "book_id", "owner", "format", "state", "attempt", "failure_code", "batch_id",
    "targets_total", "targets_done",
}  # fmt: skip


def _events(stack: Stack) -> list[tuple[str, dict[str, Any]]]:
    """What the events pipe would put on the bus, for every stream record so far, in order."""
    # Not botocore's account-based endpoint (the account id in the host), which moto does not route.
    streams = boto3.client(
        "dynamodbstreams", region_name="us-east-1", config=Config(account_id_endpoint_mode="disabled")
    )
    arn = boto3.client("dynamodb", region_name="us-east-1").describe_table(
        TableName=stack.exports.settings.table
    )["Table"]["LatestStreamArn"]
    filters = template.pipe_filters(PIPE)
    target = template.pipe_target_parameters(PIPE)
    out = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator)["Records"]
        for record in json.loads(json.dumps(records, default=str)):
            if template.matches_any(filters, record):
                detail_type = template.json_path(
                    record, target["EventBridgeEventBusParameters"]["DetailType"]
                )
                out.append(
                    (detail_type, json.loads(template.render_input_template(target["InputTemplate"], record)))
                )
    return out


def test_every_terminal_transition_publishes_one_event_and_a_retry_publishes_none(stack: Stack) -> None:
    book = stack.create_book()
    ready = stack.submit(book, "markdown").body["id"]
    stack.services.builds.build(book, ready)
    stack.services.builds.build(book, ready)  # a duplicate delivery: refused, no second transition
    cancelled = stack.submit(book).body["id"]
    for _ in range(2):  # the caller retries the cancel
        stack.http("DELETE", f"/books/{book}/exports/{cancelled}")
    failed = stack.submit(book).body["id"]
    claimed = stack.store.claims.claim_build(book, failed, "artifacts/x", stack.clock())
    for _ in range(2):  # fail, retried after a timeout: the second write is refused
        stack.store.claims.fail_export(claimed.export, FailureCode.RENDER_FAILED, stack.clock())  # type: ignore[union-attr]
    stack.clock.advance(stack.exports.settings.link_ttl_seconds + 1)
    for _ in range(2):  # the GC runs twice over the same lapsed link
        stack.gc()

    events = _events(stack)

    assert [(kind, detail["export_id"]) for kind, detail in events] == [
        ("bindery.export.ready", ready),
        ("bindery.export.cancelled", cancelled),
        ("bindery.export.failed", failed),
        ("bindery.export.expired", ready),
    ]
    for kind, detail in events:
        assert set(detail) == SCHEMA_KEYS
        assert kind == f"bindery.export.{detail['state']}"
        assert detail["id"] == f"{detail['export_id']}:{detail['state']}"  # a subscriber's dedupe key
        assert (detail["book_id"], detail["owner"]) == (book, "user-alice")
    assert [d["failure_code"] for _, d in events] == ["", "", "render_failed", ""]
    assert [d["format"] for _, d in events] == ["markdown", "html", "html", "markdown"]


def test_writes_that_are_not_terminal_transitions_publish_nothing(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]  # insert
    claimed = stack.store.claims.claim_build(
        book, export_id, "artifacts/x", stack.clock()
    )  # pending -> pending
    stack.store.claims.record_progress(claimed.export, 1, 2)  # type: ignore[union-attr]
    stack.poll(book, export_id)
    assert _events(stack) == []


def test_a_batchs_ending_publishes_one_event_and_its_targets_name_it(stack: Stack) -> None:
    from bindery.deliveries import parse_event
    from tests.unit.hooks import envelope

    book = stack.create_book()
    made = stack.http(
        "POST", "/batches", body={"exports": [{"book_id": book, "format": "markdown"}] * 2}
    ).body
    for target in made["targets"]:
        stack.build(book, target["export_id"])
        stack.build(book, target["export_id"])  # a duplicate delivery: no second transition
    for _ in range(2):  # the caller cancels the ended batch, and retries
        stack.http("DELETE", f"/batches/{made['id']}")

    events = _events(stack)

    kinds = [kind for kind, _ in events]
    # The cancel of an ended batch rewrites none of its ending: one more event says its links ended, then
    # its targets' links end. Its retry publishes nothing.
    assert (
        kinds
        == ["bindery.export.ready"] * 2
        + ["bindery.batch.done", "bindery.batch.revoked"]
        + ["bindery.export.expired"] * 2
    )
    assert {d["batch_id"] for k, d in events if k.startswith("bindery.export.")} == {made["id"]}
    bodies = [
        parse_event(envelope(k, d, stack.clock())).body for k, d in events if k.startswith("bindery.batch.")
    ]
    assert [b["data"] for b in bodies] == [
        {"batch_id": made["id"], "status": "done", "targets_total": 2, "targets_done": 2},
        {"batch_id": made["id"], "status": "done", "targets_total": 2, "targets_done": 2},
    ]
    assert [b["id"] for b in bodies] == [f"{made['id']}:done", f"{made['id']}:revoked"]
