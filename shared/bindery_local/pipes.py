"""The template's two EventBridge Pipes over the table's stream, each resuming from a checkpoint as Pipes do.

StreamToQueuePipe sends the keys of each record that passes its filters to the build queue.
TransitionsToEventsPipe turns each terminal transition into an event (its input template and detail type),
puts it on the local bus and shows it in the log; the bus's rules (moto's, made by `resources.ensure`) send it
on, WebhookEventsRule's to the webhook ingest's queue.

**A restart neither loses nor repeats an event.** A pipe's checkpoint is, per shard, the sequence number of
the last record it delivered. It moves only once every delivery of a batch has been answered, and with
BINDERY_DATA_DIR it is a file there, written aside and renamed over the old one: a crash (even `kill -9`)
leaves the old checkpoint or the new one, whole, and never one ahead of a delivery. At start a pipe resumes
after its checkpoint, in a stream the replay has rebuilt with the same records at the same sequence numbers
(moto numbers a shard's records by their count, and the replay makes the same writes in the same order).
A crash between a delivery and its checkpoint delivers that batch again: at least once, as Pipes are. The
claim refuses a second build of an export, and the feed appends an event id once (`EVT#<id>` is put under
`attribute_not_exists`, in the transaction that takes the feed's next place), so the feed holds each
transition exactly once. Before checkpoints the pipe skipped, at start, whatever the stream held: an export
that ended just before a crash never had its event (2 restarts in 6, issue 28).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bindery_local import template
from bindery_local.resources import EVENT_BUS

Record = dict[str, Any]
Deliver = Callable[[Record], None]


class Checkpoint:
    """Where a pipe has delivered to in each shard: the last delivered record's sequence number ("" for
    none yet), by shard id alone (a replay makes the table anew, and moto names its stream by the time it
    was made). A file under BINDERY_DATA_DIR, or nothing without one: each start is then a new pipe's."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def load(self) -> dict[str, str] | None:
        """The positions an earlier run saved, or None if the pipe never started here."""
        if self.path is None or not self.path.exists():
            return None
        saved: dict[str, str] = json.loads(self.path.read_text())
        return saved

    def save(self, positions: dict[str, str]) -> None:
        if self.path is None:
            return
        # Aside, then renamed over the old one: a crash mid-write leaves the last checkpoint whole.
        aside = self.path.with_name(self.path.name + ".tmp")
        aside.write_text(json.dumps(positions, sort_keys=True))
        os.replace(aside, self.path)


class Pipe:
    """One pipe: its filters, its target, its batch size and starting position, and its checkpoint. The
    position is taken when the pipe is made (on the main thread, before anything is served)."""

    def __init__(self, name: str, streams: Any, arn: str, deliver: Deliver, checkpoint: Checkpoint) -> None:
        params = template.pipe_stream_parameters(name)
        self.name, self.streams, self.arn, self.deliver, self.checkpoint = (
            name,
            streams,
            arn,
            deliver,
            checkpoint,
        )
        self.filters = template.pipe_filters(name)
        self.batch_size = int(params["BatchSize"])
        self.positions = self._open(latest=params["StartingPosition"] == "LATEST")

    def _shards(self) -> list[str]:
        return [
            s["ShardId"]
            for s in self.streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
        ]

    def _read(self, shard_id: str, after: str, limit: int) -> list[Record]:
        # A fresh iterator after the position on each read, not NextShardIterator: the position is the
        # checkpoint's, so a read never depends on an iterator from before a restart (or, under plain moto,
        # on one taken before a cancelled transaction restored the table from a copy; bindery_local.aws's
        # undo no longer copies it, and any other endpoint is read the same way).
        kind = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
            if after
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        iterator = self.streams.get_shard_iterator(StreamArn=self.arn, ShardId=shard_id, **kind)[
            "ShardIterator"
        ]
        records: list[Record] = self.streams.get_records(ShardIterator=iterator, Limit=limit)["Records"]
        return records

    def _open(self, *, latest: bool) -> dict[str, str]:
        saved = self.checkpoint.load()
        if saved is not None:
            return saved
        # The pipe's first start here, at its StartingPosition: LATEST skips what each shard holds now.
        # Saved before anything is delivered: a crash before the first batch's checkpoint would otherwise
        # take LATEST again at the next start, past the records written in between.
        positions = {}
        for shard_id in self._shards():
            positions[shard_id] = ""
            while latest and (held := self._read(shard_id, positions[shard_id], 1000)):
                positions[shard_id] = held[-1]["dynamodb"]["SequenceNumber"]
        self.checkpoint.save(positions)
        return positions

    def step(self) -> None:
        """Deliver every record past the checkpoint that passes the filters, a batch at a time."""
        for shard_id in self._shards():
            after = self.positions.setdefault(shard_id, "")  # a shard that came later: from its start
            while batch := self._read(shard_id, after, self.batch_size):
                for record in batch:
                    plain = json.loads(json.dumps(record, default=str))
                    if template.matches_any(self.filters, plain):
                        self.deliver(
                            plain
                        )  # if it raises, the checkpoint stays before this batch: it is retried
                # Only once each delivery of the batch was answered: a crash before this line delivers the
                # batch again, one after it delivered all of it. The checkpoint is never ahead.
                after = self.positions[shard_id] = batch[-1]["dynamodb"]["SequenceNumber"]
                self.checkpoint.save(self.positions)
                if len(batch) < self.batch_size:
                    break


def _to_queue(sqs: Any, queue_url: str) -> Deliver:
    body = template.pipe_target_parameters("StreamToQueuePipe")["InputTemplate"]

    def send(record: Record) -> None:  # only the keys, as the input template forwards them
        sqs.send_message(QueueUrl=queue_url, MessageBody=template.render_input_template(body, record))

    return send


def _to_bus(bus: Any, log: Callable[[str], None]) -> Deliver:
    target = template.pipe_target_parameters("TransitionsToEventsPipe")
    params = target["EventBridgeEventBusParameters"]

    def put(record: Record) -> None:
        detail = template.render_input_template(target["InputTemplate"], record)
        detail_type = template.json_path(record, params["DetailType"])
        entry = {"Source": params["Source"], "DetailType": detail_type, "Detail": detail}
        answer = bus.put_events(Entries=[{**entry, "EventBusName": EVENT_BUS}])
        if answer.get("FailedEntryCount"):  # raised, so the checkpoint stays before it: it is retried
            raise RuntimeError(f"the bus refused an event: {answer['Entries']}")
        log(f"event {detail_type} {json.dumps(json.loads(detail), separators=(',', ':'))}")

    return put


def from_template(
    table: str, queue_url: str, data_dir: Path | None, log: Callable[[str], None]
) -> list[Pipe]:
    """Both pipes, each at its checkpoint in `data_dir` (<name>.checkpoint.json), or new without one."""
    import boto3

    streams, sqs, bus = boto3.client("dynamodbstreams"), boto3.client("sqs"), boto3.client("events")
    arn = boto3.client("dynamodb").describe_table(TableName=table)["Table"]["LatestStreamArn"]

    def checkpoint(name: str) -> Checkpoint:
        return Checkpoint(data_dir / f"{name}.checkpoint.json" if data_dir else None)

    return [
        Pipe("StreamToQueuePipe", streams, arn, _to_queue(sqs, queue_url), checkpoint("StreamToQueuePipe")),
        Pipe(
            "TransitionsToEventsPipe", streams, arn, _to_bus(bus, log), checkpoint("TransitionsToEventsPipe")
        ),
    ]
