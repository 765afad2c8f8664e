"""The embedded AWS that `make run` serves: moto's server, with DynamoDB made atomic under concurrent
requests, stream records shared by a transaction's rollback copy, and a recording of whole lines."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.moto_api import recorder

from bindery_local import template
from bindery_local.aws import (
    EmbeddedAws,
    Turns,
    _lock_for,
    dynamodb_answers_are_dumped_as_they_are,
    streams_read_the_live_table,
    transactions_undo_their_own_items,
)
from tests.servers import free_port

TABLE = "atomicity"
WRITERS, CANCELLERS, ROUNDS = 4, 4, 25


def _client(endpoint: str | None = None) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        config=Config(retries={"max_attempts": 1}, max_pool_connections=WRITERS + CANCELLERS),
    )


@pytest.fixture
def embedded() -> Iterator[str]:
    aws = EmbeddedAws(free_port())
    aws.start()
    try:
        yield aws.endpoint
    finally:
        aws.stop()


def _put(n: int) -> dict[str, Any]:
    return {"Put": {"TableName": TABLE, "Item": {"pk": {"S": f"P#{n}"}, "sk": {"S": "X"}}}}


def _refused() -> dict[str, Any]:
    # A condition on an item that is never there: the transaction is always cancelled.
    return {
        "ConditionCheck": {
            "TableName": TABLE,
            "Key": {"pk": {"S": "NEVER"}, "sk": {"S": "X"}},
            "ConditionExpression": "attribute_exists(pk)",
        }
    }


def test_a_cancelled_transaction_undoes_no_write_that_other_requests_made_meanwhile(embedded: str) -> None:
    # moto alone copies the table when a transaction starts and puts the copy back when it is cancelled:
    # a write another thread made in between is undone. Under the lock every write that answered stays.
    setup = _client(embedded)
    template.create_table(setup, TABLE)
    for n in range(200):  # a table big enough that a transaction's copy takes a while
        setup.put_item(TableName=TABLE, Item={"pk": {"S": f"FILL#{n}"}, "sk": {"S": "X"}})
    answered: list[int] = []
    cancelled: list[int] = []
    lock = threading.Lock()

    def write(w: int) -> None:
        client = _client(embedded)
        for r in range(ROUNDS):
            n = w * ROUNDS + r
            client.transact_write_items(TransactItems=[_put(n)])
            with lock:
                answered.append(n)

    def cancel() -> None:
        client = _client(embedded)
        for r in range(ROUNDS):
            try:
                client.transact_write_items(TransactItems=[_put(10_000 + r), _refused()])
            except client.exceptions.TransactionCanceledException:
                with lock:
                    cancelled.append(r)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    threads += [threading.Thread(target=cancel) for _ in range(CANCELLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(answered) == WRITERS * ROUNDS
    kept = {
        int(item["pk"]["S"].removeprefix("P#"))
        for page in setup.get_paginator("scan").paginate(TableName=TABLE)
        for item in page["Items"]
        if item["pk"]["S"].startswith("P#")
    }
    assert sorted(set(answered) - kept) == []  # no write that answered was undone
    assert not any(n >= 10_000 for n in kept)  # and no cancelled one was applied
    assert len(cancelled) == CANCELLERS * ROUNDS  # each refused as itself, not as a fault


def test_a_cancelled_transaction_leaves_no_record_in_the_stream_and_a_committed_one_does() -> None:
    # The rollback copy shares the table's stream records rather than copying them (bindery_local.aws),
    # so this pins that the records a cancelled transaction wrote still go with it.
    with mock_aws():
        client = _client()
        template.create_table(client, TABLE)
        client.transact_write_items(TransactItems=[_put(1)])
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(TransactItems=[_put(2), _refused()])
        client.transact_write_items(TransactItems=[_put(3)])
        # Read from moto's own table: the shard a rollback copy shares is what this pins.
        table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[TABLE]
        records = [record.record for record in table.stream_shard.items]
        inserted = [r["dynamodb"]["Keys"]["pk"]["S"] for r in records if r["eventName"] == "INSERT"]
        assert inserted == ["P#1", "P#3"]


def test_a_cancelled_transaction_puts_back_the_items_it_touched_and_copies_no_table() -> None:
    # moto backed a transaction up by deep-copying the whole table once per item it named; the undo puts
    # back only the items it names, and cuts their stream records off.
    transactions_undo_their_own_items()
    with mock_aws():
        client = _client()
        template.create_table(client, TABLE)
        client.transact_write_items(TransactItems=[_put(1), _put(2)])
        table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[TABLE]
        streamed = len(table.stream_shard.items)
        update = {
            "Update": {
                "TableName": TABLE,
                "Key": {"pk": {"S": "P#1"}, "sk": {"S": "X"}},
                "UpdateExpression": "SET v = :v",
                "ExpressionAttributeValues": {":v": {"N": "7"}},
            }
        }
        delete = {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": "P#2"}, "sk": {"S": "X"}}}}
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(TransactItems=[_put(3), update, delete, _refused()])

        assert dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[TABLE] is table  # not a copy
        rows = client.scan(TableName=TABLE)["Items"]
        assert sorted((r["pk"]["S"], "v" in r) for r in rows) == [("P#1", False), ("P#2", False)]
        assert len(table.stream_shard.items) == streamed  # the put's, update's and delete's records gone


def test_a_dynamodb_answer_dumped_as_it_is_reads_back_every_attribute_type(embedded: str) -> None:
    # Every attribute type, read back by each read: the same JSON both ways (the fixture's server dumps).
    dynamodb_answers_are_dumped_as_they_are()
    client = _client(embedded)
    template.create_table(client, TABLE)
    item = {
        "pk": {"S": "P#1"}, "sk": {"S": "X"}, "n": {"N": "1.5"}, "b": {"B": b"\x00\xff"},
        "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}, "l": {"L": [{"S": "x"}, {"NULL": True}]},
        "m": {"M": {"k": {"BOOL": False}}}, "u": {"S": "Küste ✓"},
    }  # fmt: skip
    client.put_item(TableName=TABLE, Item=item)
    key = {"pk": {"S": "P#1"}, "sk": {"S": "X"}}
    reads = [
        client.get_item(TableName=TABLE, Key=key)["Item"],
        client.query(
            TableName=TABLE, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "P#1"}}
        )["Items"][0],
        client.transact_get_items(TransactItems=[{"Get": {"TableName": TABLE, "Key": key}}])["Responses"][0][
            "Item"
        ],
    ]
    assert all(read == item for read in reads)


def test_an_iterator_taken_before_a_cancelled_transaction_reads_no_phantom_and_skips_nothing() -> None:
    # moto's iterator kept the shard it was made from; a cancelled transaction then replaced the table with
    # its copy, and the old iterator read the discarded one: a record for a put that was rolled back, at a
    # sequence number the next real record takes. The pipe delivered the phantom and skipped the real one.
    streams_read_the_live_table()
    with mock_aws():
        client = _client()
        template.create_table(client, TABLE)
        client.transact_write_items(TransactItems=[_put(1)])
        streams = boto3.client(
            "dynamodbstreams", region_name="us-east-1", config=Config(account_id_endpoint_mode="disabled")
        )
        arn = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        first = streams.get_records(
            ShardIterator=streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
        )["Records"][-1]["dynamodb"]["SequenceNumber"]
        after = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard, ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=first
        )["ShardIterator"]
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(
                TransactItems=[_put(2), _refused()]
            )  # the put applies, then rolls back
        assert streams.get_records(ShardIterator=after)["Records"] == []  # no phantom P#2
        client.transact_write_items(TransactItems=[_put(3)])
        again = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard, ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=first
        )["ShardIterator"]
        keys = [r["dynamodb"]["Keys"]["pk"]["S"] for r in streams.get_records(ShardIterator=again)["Records"]]
        assert keys == ["P#3"]


def test_a_put_events_waits_for_sqs_writes_since_moto_sends_a_rules_events_to_sqs_inside_it() -> None:
    # The webhook rule's send into its queue must not land while a DeleteMessage rebuilds the queue's list.
    dynamodb, sqs = Turns(), Turns()
    assert _lock_for("AWSEvents.PutEvents", dynamodb, sqs) is sqs
    assert _lock_for("AmazonSQS.DeleteMessage", dynamodb, sqs) is sqs
    assert _lock_for("AWSEvents.PutRule", dynamodb, sqs) is None  # the rest of EventBridge runs free
    assert _lock_for("AmazonSQS.ReceiveMessage", dynamodb, sqs) is None  # it may wait for a send


def test_requests_recorded_at_once_from_many_threads_each_keep_a_whole_line(
    embedded: str, tmp_path: Path
) -> None:
    # moto's recorder writes an entry's JSON and its newline apart; an S3 put too big for the write buffer
    # went out alone, and a put recorded meanwhile by another thread landed between the two. The replay
    # then stopped at that line and the state after it was lost (4 to 10 lines of 241 under 8 threads).
    location = recorder._location
    recorder._location = str(tmp_path / "recording.jsonl")
    recorder.start_recording()
    try:
        s3 = boto3.client("s3", endpoint_url=embedded, config=Config(max_pool_connections=8))
        s3.create_bucket(Bucket="recorded")

        def put(n: int) -> None:
            for i in range(20):
                s3.put_object(Bucket="recorded", Key=f"{n}/{i}", Body=b"x" * (50_000 if n % 2 else 10))

        threads = [threading.Thread(target=put, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        recorder.stop_recording()
        recorder._location = location
    lines = (tmp_path / "recording.jsonl").read_text().splitlines()

    def whole(line: str) -> bool:
        try:
            json.loads(line)
        except json.JSONDecodeError:
            return False
        return True

    assert [line[:80] for line in lines if not whole(line)] == []
    urls = [json.loads(line)["url"] for line in lines]
    assert sorted(u.split("/recorded/", 1)[1] for u in urls if "/recorded/" in u) == sorted(
        f"{n}/{i}" for n in range(8) for i in range(20)
    )


def test_the_lock_goes_to_its_waiters_in_the_order_they_asked() -> None:
    # A bare lock went to whichever thread ran next: 64 clients' reads kept it from the pipe and the builds.
    turns, taken, order = Turns(), threading.Event(), []
    turns.__enter__()
    threads = []
    for n in range(6):

        def wait(n: int = n) -> None:
            with turns:
                order.append(n)

        thread = threading.Thread(target=wait)
        thread.start()
        threads.append(thread)
        while len(turns._waiting) < n + 1:  # this one waits before the next asks
            taken.wait(0.001)
    turns.__exit__(None, None, None)
    for thread in threads:
        thread.join(timeout=10)
    assert order == list(range(6))
    assert not turns._held and not turns._waiting
