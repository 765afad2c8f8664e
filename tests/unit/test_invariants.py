"""The checker (tests/invariants.py) can fail: each promise, broken by hand in the table or the bucket, is
named, and a clean system names nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest

from bindery.objects import artifact_key
from tests.invariants import limit_violations, violations, webhook_violations
from tests.unit.conftest import Stack
from tests.unit.hooks import hooked


def _ready_book(stack: Stack) -> tuple[str, str]:
    book = stack.create_book()
    export = stack.submit(book, "markdown", key="k1").body["id"]
    stack.build(book, export)
    return book, export


def _table(stack: Stack) -> Any:
    return boto3.resource("dynamodb").Table(stack.exports.settings.table)


def _stray_manuscript(stack: Stack, book: str, _: str) -> None:
    stack.objects.put_bytes(f"books/{book}/not-a-cut.md", b"# stray\n")


def _ready_without_bytes(stack: Stack, book: str, export: str) -> None:
    row = _table(stack).get_item(Key={"pk": f"BOOK#{book}", "sk": f"EXPORT#{export}"})["Item"]
    stack.objects.delete([row["path"]])


def _stray_artifact(stack: Stack, book: str, export: str) -> None:
    stack.objects.put_bytes(artifact_key(book, export, "nobody"), b"x")


def _second_export_for_one_key(stack: Stack, book: str, export: str) -> None:
    row = _table(stack).get_item(Key={"pk": f"BOOK#{book}", "sk": f"EXPORT#{export}"})["Item"]
    twin = {**row, "sk": "EXPORT#twin", "export_id": "twin", "requested_at": row["requested_at"] + 60}
    _table(stack).put_item(Item={k: v for k, v in twin.items() if k not in ("path", "paths")})


def _pending_outside_the_live_set(stack: Stack, book: str, export: str) -> None:
    _table(stack).update_item(
        Key={"pk": f"BOOK#{book}", "sk": f"EXPORT#{export}"},
        UpdateExpression="SET #s = :p",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":p": "pending"},
    )


BREAKS: dict[str, tuple[Callable[[Stack, str, str], None], str]] = {
    "a manuscript no cut names": (_stray_manuscript, "2: books/"),
    "a ready row without its object": (_ready_without_bytes, "2: ready export"),
    "an artifact no row names": (_stray_artifact, "2: object artifacts/"),
    "two exports for one key in one window": (_second_export_for_one_key, "4: one key"),
    "a pending export outside its caller's live set": (_pending_outside_the_live_set, "3: user-alice's live"),
}


def test_a_clean_system_breaks_no_promise(stack: Stack) -> None:
    _, export = _ready_book(stack)
    assert violations(stack.store, stack.objects, accepted={export}, after_gc=False) == []


@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_each_broken_promise_is_named(stack: Stack, broken: str) -> None:
    book, export = _ready_book(stack)
    breaking, named = BREAKS[broken]
    breaking(stack, book, export)
    found = violations(stack.store, stack.objects, accepted={export}, after_gc=False)
    assert any(line.startswith(named) for line in found), found


def test_an_accepted_export_without_a_row_is_named(stack: Stack) -> None:
    _ready_book(stack)
    found = violations(stack.store, stack.objects, accepted={"1a0000000000000000000"}, after_gc=False)
    assert found == ["1: accepted export 1a0000000000000000000 has no row"]


def _delivered(stack: Stack) -> tuple[str, str]:
    """An endpoint, an export's ready event ingested, and its delivery acked: a clean webhook ledger."""
    h = hooked(stack)
    endpoint = h.register("https://hooks.example.com/in")["id"]
    book, _ = _ready_book(stack)
    h.publish()
    h.send_all()
    return endpoint, book


def _count_off(stack: Stack, endpoint: str, _: str) -> None:
    _table(stack).update_item(
        Key={"pk": "CALLER#user-alice", "sk": f"HOOK#{endpoint}"}, UpdateExpression="ADD n_acked :one",
        ExpressionAttributeValues={":one": 1},
    )  # fmt: skip


def _delivery_left_queued(stack: Stack, endpoint: str, _: str) -> None:
    _table(stack).update_item(
        Key={"pk": f"HOOK#{endpoint}", "sk": "DLV#000000000001"},
        UpdateExpression="SET #s = :q",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":q": "queued"},
    )


def _delivery_lost(stack: Stack, endpoint: str, _: str) -> None:
    _table(stack).delete_item(Key={"pk": f"HOOK#{endpoint}", "sk": "DLV#000000000001"})


def _hole_in_the_feed(stack: Stack, _: str, __: str) -> None:
    _table(stack).delete_item(Key={"pk": "FEED#user-alice", "sk": "E#000000000001"})


HOOK_BREAKS: dict[str, tuple[Callable[[Stack, str, str], None], str]] = {
    "a ledger count its rows do not hold": (_count_off, "7: endpoint"),
    "a delivery that never ended": (_delivery_left_queued, "6: delivery"),
    "an event that never reached its endpoint": (_delivery_lost, "6: event"),
    "a hole in the feed": (_hole_in_the_feed, "8: user-alice's feed"),
}


def test_a_clean_webhook_ledger_breaks_no_promise(stack: Stack) -> None:
    _delivered(stack)
    assert webhook_violations(stack.store) == []


@pytest.mark.parametrize("broken", sorted(HOOK_BREAKS))
def test_each_broken_webhook_promise_is_named(stack: Stack, broken: str) -> None:
    endpoint, book = _delivered(stack)
    breaking, named = HOOK_BREAKS[broken]
    breaking(stack, endpoint, book)
    found = webhook_violations(stack.store)
    assert any(line.startswith(named) for line in found), found


def _batch_book(stack: Stack) -> tuple[str, str]:
    """A book with one batch of two targets, one built, and one ready single export."""
    book = stack.create_book()
    made = stack.http(
        "POST", "/batches", body={"exports": [{"book_id": book, "format": "markdown"}] * 2}
    ).body
    stack.build(book, made["targets"][0]["export_id"])
    stack.build(book, stack.submit(book, "markdown").body["id"])
    return book, made["id"]


def _update(stack: Stack, pk: str, sk: str, expression: str, **values: Any) -> None:
    _table(stack).update_item(
        Key={"pk": pk, "sk": sk},
        UpdateExpression=expression,
        ExpressionAttributeValues={f":{k}": v for k, v in values.items()},
    )


LIMIT_BREAKS: dict[str, tuple[Callable[[Stack, str, str], None], str]] = {
    "a batch's targets_done off its targets": (
        lambda s, _, b: _update(s, "CALLER#user-alice", f"BATCH#{b}", "ADD targets_done :one", one=1),
        "9: batch",
    ),
    "a batch's bytes off its targets": (
        lambda s, _, b: _table(s).update_item(
            Key={"pk": "CALLER#user-alice", "sk": f"BATCH#{b}"},
            UpdateExpression="ADD #b :one",
            ExpressionAttributeNames={"#b": "bytes"},
            ExpressionAttributeValues={":one": 1},
        ),
        "9: batch",
    ),
    "a running batch out of its caller's live batches": (
        lambda s, _, b: _update(s, "CALLER#user-alice", "LIVE", "DELETE batch_ids :b", b={b}),
        "9: batch",
    ),
    "usage off the bytes stored": (
        lambda s, _, __: _table(s).update_item(
            Key={"pk": "CALLER#user-alice", "sk": "LIVE"},
            UpdateExpression="ADD #u :n",
            ExpressionAttributeNames={"#u": "usage"},
            ExpressionAttributeValues={":n": -1},
        ),
        "10: user-alice's usage",
    ),
    "a shard that counts a slot nobody holds": (
        lambda s, _, __: _update(s, "CAP#live", "SHARD#03", "ADD n :one", one=1),
        "11: shard 3",
    ),
}


def test_a_clean_system_with_batches_breaks_no_limit_promise(stack: Stack) -> None:
    _batch_book(stack)
    assert limit_violations(stack.store, settled=False) == []


@pytest.mark.parametrize("broken", sorted(LIMIT_BREAKS))
def test_each_broken_limit_promise_is_named(stack: Stack, broken: str) -> None:
    book, batch = _batch_book(stack)
    breaking, named = LIMIT_BREAKS[broken]
    breaking(stack, book, batch)
    found = limit_violations(stack.store, settled=False)
    assert any(v.startswith(named) for v in found), found
