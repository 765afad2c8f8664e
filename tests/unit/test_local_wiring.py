"""The local stack's wiring, made from template.yaml: every queue with its redrive, every queue's consumer,
and the bus's rule, which moto's EventBridge runs, so an export's event reaches the webhook ingest's queue
as the EventBridge envelope the ingest reads, and nothing else does."""

from __future__ import annotations

import json
import re

import boto3
from moto import mock_aws

from bindery.deliveries import parse_event
from bindery.states import EVENT_TYPES
from bindery_local import resources, template
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
