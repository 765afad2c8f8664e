"""The local stack's resources in the embedded AWS, made from template.yaml: the table, the bucket, every
queue with its redrive, the bus, and the bus's rules with their queue targets.

A rule runs in moto itself: moto's EventBridge matches each PutEvents entry against the rule's pattern and
sends the event to the rule's queue as EventBridge does, the whole envelope ("version", "id",
"detail-type", "source", "account", "time" in ISO form with a Z, "region", "resources", "detail" as an
object). So the events pipe's put reaches the webhook ingest by the same path as in AWS, and the pattern
is evaluated by an EventBridge implementation rather than by a copy of one here. (moto adds one key AWS
does not send, "ingestion-time"; nothing reads it.) What moto does not enforce is the queue's policy.

Each call is safe to repeat: a restart that replayed a recording finds everything there and changes
nothing, a rule and its targets being put again as they were.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bindery_local import template

EVENT_BUS = "bindery-events"


def queue_name(logical_id: str) -> str:
    """A queue's local name: BuildQueue is bindery-build, WebhookEventsDeadLetterQueue is
    bindery-webhook-events-dlq (the names a recording made before this module kept)."""
    stem, dead = re.subn(r"DeadLetterQueue$", "", logical_id)
    stem = stem.removesuffix("Queue")
    words = re.findall(r"[A-Z][a-z0-9]*", stem)
    return "-".join(["bindery", *(w.lower() for w in words), *(["dlq"] if dead else [])])


def _arn(sqs: Any, url: str) -> str:
    found: str = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return found


def ensure(table: str, bucket: str, build_visibility: int | None = None) -> dict[str, str]:
    """Everything the handlers and the pipes need, as the template defines it. Returns each queue's URL by
    its logical id. `build_visibility`: the build queue's visibility timeout, where the settings name one
    other than the template's (BINDERY_BUILD_VISIBILITY_TIMEOUT_SECONDS, which the graces are checked
    against at start)."""
    import boto3

    dynamodb, s3, sqs, events = (boto3.client(s) for s in ("dynamodb", "s3", "sqs", "events"))
    if table not in dynamodb.list_tables()["TableNames"]:
        template.create_table(dynamodb, table)
    if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
        s3.create_bucket(Bucket=bucket)
    urls: dict[str, str] = {}
    for logical in template.queues():  # dead-letter queues first: their ARNs go into the redrives
        attributes = template.queue_attributes(logical)
        dead_letter = template.dead_letter_queue(logical)
        if dead_letter is not None:
            attributes["RedrivePolicy"] = json.dumps(
                {
                    "deadLetterTargetArn": _arn(sqs, urls[dead_letter]),
                    "maxReceiveCount": template.max_receive_count(logical),
                }
            )
        if logical == "BuildQueue" and build_visibility is not None:
            attributes["VisibilityTimeout"] = str(build_visibility)
        try:
            urls[logical] = sqs.create_queue(QueueName=queue_name(logical), Attributes=attributes)["QueueUrl"]
        except sqs.exceptions.QueueNameExists:  # a restart under other settings: the queue takes them now
            urls[logical] = sqs.get_queue_url(QueueName=queue_name(logical))["QueueUrl"]
            sqs.set_queue_attributes(QueueUrl=urls[logical], Attributes=attributes)
    if EVENT_BUS not in {b["Name"] for b in events.list_event_buses()["EventBuses"]}:
        events.create_event_bus(Name=EVENT_BUS)
    for rule in template.bus_rules():
        events.put_rule(
            Name=rule.name, EventBusName=EVENT_BUS, EventPattern=json.dumps(rule.pattern), State="ENABLED"
        )
        events.put_targets(
            Rule=rule.name,
            EventBusName=EVENT_BUS,
            Targets=[{"Id": tid, "Arn": _arn(sqs, urls[queue])} for tid, queue in rule.targets.items()],
        )
    return urls
