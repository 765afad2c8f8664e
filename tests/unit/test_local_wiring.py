"""The local stack's wiring, made from template.yaml: every queue with its redrive, every queue's consumer,
and the bus's rule, which moto's EventBridge runs, so an export's event reaches the webhook ingest's queue
as the EventBridge envelope the ingest reads, and nothing else does; the pipes' checkpoints, and the
recording a kill can tear."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from bindery.deliveries import parse_event
from bindery.states import EVENT_TYPES
from bindery_local import pipes, resources, template
from bindery_local.recording import recorded as _recorded
from bindery_local.resources import EVENT_BUS


def _detail(kind: str) -> dict[str, object]:
    export, batch = "19b2f3c4d5e0a1b2c3d4e", "19b2f3c4d5e0a1b2c3d40"
    state = kind.rsplit(".", 1)[1]
    if kind.startswith("bindery.batch."):  # a batch's ending, as the same input template writes it
        return {"id": f":{state}", "export_id": "", "book_id": "", "owner": "user-alice", "format": "",
                "state": state, "attempt": "", "failure_code": "", "batch_id": batch, "targets_total": "2",
                "targets_done": "2"}  # fmt: skip
    return {"id": f"{export}:{state}", "export_id": export, "book_id": "0123456789abcdef0123",
            "owner": "user-alice", "format": "html", "state": state, "attempt": "1",
            "failure_code": "", "batch_id": "", "targets_total": "", "targets_done": ""}  # fmt: skip


def test_every_queue_is_made_with_its_redrive_and_every_consumer_has_its_queue() -> None:
    with mock_aws():
        urls = resources.ensure("wiring", "wiring")
        assert resources.ensure("wiring", "wiring") == urls  # a restart finds everything as it was
        sqs = boto3.client("sqs")
        for queue in template.queues():
            dead_letter = template.dead_letter_queue(queue)
            attributes = sqs.get_queue_attributes(QueueUrl=urls[queue], AttributeNames=["All"])["Attributes"]
            own = template.queue_attributes(queue)
            assert {k: attributes[k] for k in own} == own  # visibility timeout, retention
            if dead_letter is None:
                assert "RedrivePolicy" not in attributes
                continue
            redrive = json.loads(attributes["RedrivePolicy"])
            assert redrive["deadLetterTargetArn"].endswith(f":{resources.queue_name(dead_letter)}")
            assert redrive["maxReceiveCount"] == template.max_receive_count(queue)
    # A recording made before this wiring names the build queues so: they keep their names.
    assert (resources.queue_name("BuildQueue"), resources.queue_name("BuildDeadLetterQueue")) == (
        "bindery-build", "bindery-build-dlq"
    )  # fmt: skip
    fed = {c.queue: c.function for c in template.queue_consumers()}
    assert fed == {
        "BuildQueue": "build_worker",
        "WebhookEventsQueue": "webhook_ingest",
        "WebhookSendQueue": "webhook_sender",
    }
    # Every queue is consumed, or holds dead letters (some queue's, or the events pipe's): none forgotten.
    dead = {d for q in template.queues() if (d := template.dead_letter_queue(q))} | {"EventsDeadLetterQueue"}
    assert set(template.queues()) == set(fed) | dead
    assert template.queue_environment() == {
        "BINDERY_QUEUE_URL": "BuildQueue", "BINDERY_WEBHOOK_SEND_QUEUE_URL": "WebhookSendQueue"
    }  # fmt: skip


def test_the_rule_sends_each_export_event_and_nothing_else_to_the_ingest_queue_as_an_envelope() -> None:
    with mock_aws():
        urls = resources.ensure("wiring", "wiring")
        entries = [
            {"Source": "bindery", "DetailType": kind, "Detail": json.dumps(_detail(kind))}
            for kind in EVENT_TYPES
        ]
        entries += [
            {
                "Source": "bindery",
                "DetailType": "bindery.export.progress",
                "Detail": json.dumps(_detail("bindery.export.x")),
            },
            {
                "Source": "someone.else",
                "DetailType": EVENT_TYPES[0],
                "Detail": json.dumps(_detail("bindery.export.ready")),
            },
        ]
        for at in range(0, len(entries), 10):  # PutEvents takes 10 entries at most
            chunk = [{**e, "EventBusName": EVENT_BUS} for e in entries[at : at + 10]]
            assert boto3.client("events").put_events(Entries=chunk)["FailedEntryCount"] == 0
        sqs = boto3.client("sqs")
        bodies: list[str] = []
        while got := sqs.receive_message(QueueUrl=urls["WebhookEventsQueue"], MaxNumberOfMessages=10).get(
            "Messages"
        ):
            bodies += [m["Body"] for m in got]
            for m in got:
                sqs.delete_message(QueueUrl=urls["WebhookEventsQueue"], ReceiptHandle=m["ReceiptHandle"])

    envelopes = [json.loads(b) for b in bodies]
    assert sorted(e["detail-type"] for e in envelopes) == sorted(EVENT_TYPES)
    for envelope, body in zip(envelopes, bodies, strict=True):
        assert envelope["source"] == "bindery" and envelope["version"] == "0"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", envelope["time"])
        assert envelope["detail"] == _detail(envelope["detail-type"])  # an object, not text
        event = parse_event(body)  # what the ingest reads from it
        detail = envelope["detail"]
        assert (event.id, event.type, event.caller) == (
            detail["id"] if detail["export_id"] else f"{detail['batch_id']}:{detail['state']}",
            envelope["detail-type"],
            "user-alice",
        )


# ---- the pipes' checkpoints ----------------------------------------------------------------------


def _stream(client: Any) -> tuple[Any, str]:
    streams = boto3.client(
        "dynamodbstreams", region_name="us-east-1", config=Config(account_id_endpoint_mode="disabled")
    )
    return streams, client.describe_table(TableName="piped")["Table"]["LatestStreamArn"]


def _export_row(client: Any, n: int) -> None:
    # An export row's INSERT: what StreamToQueuePipe's filter passes.
    client.put_item(TableName="piped", Item={"pk": {"S": "BOOK#b"}, "sk": {"S": f"EXPORT#{n:04d}"}})


def _delivered(got: list[str]) -> Callable[[dict[str, Any]], None]:
    return lambda record: got.append(record["dynamodb"]["Keys"]["sk"]["S"])


def test_a_restarted_pipe_resumes_after_its_checkpoint_and_redelivers_a_batch_cut_off_mid_way(
    tmp_path: Path,
) -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        template.create_table(client, "piped")
        streams, arn = _stream(client)
        for n in range(3):
            _export_row(client, n)
        checkpoint = pipes.Checkpoint(tmp_path / "StreamToQueuePipe.checkpoint.json")
        first: list[str] = []
        pipes.Pipe("StreamToQueuePipe", streams, arn, _delivered(first), checkpoint).step()
        assert first == ["EXPORT#0000", "EXPORT#0001", "EXPORT#0002"]  # TRIM_HORIZON: what the stream held

        # A crash in the middle of the next batch: two of its records delivered, the third never.
        for n in range(3, 15):
            _export_row(client, n)
        cut: list[str] = []

        def crash(record: dict[str, Any]) -> None:
            if len(cut) == 2:
                raise KeyboardInterrupt("killed")
            _delivered(cut)(record)

        with pytest.raises(KeyboardInterrupt):
            pipes.Pipe("StreamToQueuePipe", streams, arn, crash, checkpoint).step()

        # The next start delivers that batch again, whole, then the rest; nothing before it, nothing skipped.
        again: list[str] = []
        pipes.Pipe("StreamToQueuePipe", streams, arn, _delivered(again), checkpoint).step()
    assert cut == ["EXPORT#0003", "EXPORT#0004"]
    assert again == [f"EXPORT#{n:04d}" for n in range(3, 15)]


def _ended(client: Any, n: int) -> None:
    # An export row that ends: pending, then ready. Its MODIFY is what TransitionsToEventsPipe passes.
    row = {"pk": {"S": "BOOK#b"}, "sk": {"S": f"EXPORT#{n:04d}"}, "format": {"S": "html"}}
    client.put_item(TableName="piped", Item={**row, "state": {"S": "pending"}})
    client.put_item(TableName="piped", Item={**row, "state": {"S": "ready"}})


def test_a_new_latest_pipe_saves_where_it_starts_before_it_delivers_anything(tmp_path: Path) -> None:
    # TransitionsToEventsPipe starts at LATEST: a new pipe skips what the stream holds. Were its position
    # not saved until its first delivery, a crash before that would start it at LATEST again, past the
    # transitions written in between: their events lost.
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        template.create_table(client, "piped")
        streams, arn = _stream(client)
        _ended(client, 0)
        path = tmp_path / "TransitionsToEventsPipe.checkpoint.json"
        pipes.Pipe("TransitionsToEventsPipe", streams, arn, _delivered([]), pipes.Checkpoint(path))
        assert path.exists()  # saved when the pipe was made, before any step
        _ended(client, 1)  # after the start, before any delivery; then the stack is killed
        got: list[str] = []
        pipes.Pipe("TransitionsToEventsPipe", streams, arn, _delivered(got), pipes.Checkpoint(path)).step()
    assert got == ["EXPORT#0001"]


def test_a_checkpoint_is_replaced_whole_and_none_without_a_data_dir(tmp_path: Path) -> None:
    saved = pipes.Checkpoint(tmp_path / "p.json")
    assert saved.load() is None  # never started here
    saved.save({"shard": "11"})
    saved.save({"shard": "12"})
    assert saved.load() == {"shard": "12"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]  # nothing left aside
    memory = pipes.Checkpoint(None)
    memory.save({"shard": "12"})
    assert memory.load() is None


def test_a_recording_torn_by_a_kill_loses_only_its_last_unapplied_request() -> None:
    # moto records a request before it applies it: a line torn by kill -9 was never applied nor answered.
    whole = [json.dumps({"method": "POST", "n": n}) for n in range(3)]
    assert _recorded([*whole, whole[0][:17]]) == [{"method": "POST", "n": n} for n in range(3)]
    with pytest.raises(json.JSONDecodeError):  # anywhere else it is damage: the start stops
        _recorded([whole[0], whole[1][:17], whole[2]])
