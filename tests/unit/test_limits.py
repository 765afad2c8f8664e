"""Caller classes, the global cap, the storage budget and the RateLimit fields, on moto in-process.

Exactness under concurrency is shown on DynamoDB Local (tests/integration/test_cap_races.py); here each
rule is pinned one request at a time, with the answer a caller gets and what the table then holds."""

from __future__ import annotations

import json

import pytest

from bindery.config import ConfigError, Settings
from bindery.limits import CAP_SHARDS, DEFAULTS, CallerClass, caller_class, shard_caps, shard_of
from bindery.states import State
from bindery.storage import Holdings
from tests.unit.conftest import Stack


def _shards(stack: Stack) -> dict[int, int]:
    caps = stack.exports.settings.shard_caps
    room = stack.store.exports.shard_room()
    return {k: caps[k] - room[k] for k in room}


def test_the_class_claim_names_the_class_and_an_unknown_one_is_held_to_restricted() -> None:
    assert caller_class({}) == CallerClass.STANDARD
    assert caller_class({"bindery_class": "fleet"}) == CallerClass.FLEET
    assert caller_class({"bindery_class": "restricted"}) == CallerClass.RESTRICTED
    assert caller_class({"bindery_class": "Fleet"}) == CallerClass.RESTRICTED
    assert caller_class({"bindery_class": "admin"}) == CallerClass.RESTRICTED


def test_class_limits_come_from_json_and_restricted_is_never_freer_than_the_tightest() -> None:
    settings = Settings.from_env({"BINDERY_CLASS_LIMITS": json.dumps({"fleet": {"live_exports": 200}})})
    assert settings.limits(CallerClass.FLEET).live_exports == 200
    assert settings.limits(CallerClass.STANDARD) == DEFAULTS[CallerClass.STANDARD]
    # A configuration that tries to make restricted freer than standard is clamped to the tightest.
    loose = json.dumps({"restricted": {"live_exports": 500, "storage_bytes": 10**15}})
    clamped = Settings.from_env({"BINDERY_CLASS_LIMITS": loose}).limits(CallerClass.RESTRICTED)
    assert clamped.live_exports == DEFAULTS[CallerClass.STANDARD].live_exports
    assert clamped.storage_bytes == DEFAULTS[CallerClass.STANDARD].storage_bytes


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("{", "not JSON"),
        ('{"gold": {}}', "unknown class 'gold'"),
        ('{"fleet": {"speed": 1}}', "may set only"),
        ('{"fleet": {"live_exports": 0}}', "live_exports must be a whole number"),
        ('{"fleet": {"live_exports": true}}', "live_exports must be a whole number"),
        ('{"fleet": {"batch_targets": 91}}', "batch_targets may be at most 90"),
    ],
)
def test_bad_class_limits_are_refused_at_start_naming_the_problem(raw: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        Settings.from_env({"BINDERY_CLASS_LIMITS": raw})


def test_the_shards_caps_sum_to_the_global_cap_and_an_id_names_its_shard() -> None:
    for total in (1, 15, 16, 17, 1000, 1001):
        caps = shard_caps(total)
        assert len(caps) == CAP_SHARDS and sum(caps) == total and max(caps) - min(caps) <= 1
    assert shard_of("19b2f3c4d5e0a1b2c3d4e") == 0xE


def test_each_class_gets_its_own_cap_of_live_exports(stack: Stack) -> None:
    book = stack.create_book()
    cap = stack.exports.settings.limits(CallerClass.RESTRICTED).live_exports
    for _ in range(cap):
        assert stack.submit(book, caller_class="restricted").status == 202
    refused = stack.submit(book, caller_class="restricted")
    assert refused.status == 429 and refused.body["error"]["code"] == "too_many_live_exports"
    # The same caller, as standard, has more room: the cap is the class's, counted on one live set.
    assert stack.submit(book).status == 202


def test_every_answer_carries_the_live_export_cap_in_the_drafts_fields(stack: Stack) -> None:
    book = stack.create_book()
    cap = stack.exports.settings.limits(CallerClass.STANDARD).live_exports
    first = stack.submit(book)
    assert first.headers["RateLimit-Limit"] == str(cap)
    assert first.headers["RateLimit-Remaining"] == str(cap - 1)
    assert first.headers["RateLimit-Reset"] == "0"
    assert stack.poll(book, first.body["id"]).headers["RateLimit-Remaining"] == str(cap - 1)
    for _ in range(cap - 1):
        stack.submit(book)
    refused = stack.submit(book)
    assert refused.status == 429
    assert refused.headers["RateLimit-Remaining"] == "0"
    assert refused.headers["RateLimit-Reset"] == refused.headers["Retry-After"] == "30"
    # A fleet caller is told its own class's cap.
    assert stack.http("GET", "/me", caller_class="fleet").headers["RateLimit-Limit"] == str(
        stack.exports.settings.limits(CallerClass.FLEET).live_exports
    )
    assert "RateLimit-Limit" not in stack.http("GET", "/me", caller=None).headers


def test_me_shows_the_class_what_is_held_and_every_cap(stack: Stack) -> None:
    book = stack.create_book()
    stack.submit(book, caller_class="fleet")
    me = stack.http("GET", "/me", caller_class="fleet")
    assert me.status == 200
    limits = stack.exports.settings.limits(CallerClass.FLEET)
    assert me.body == {
        "caller": "user-alice",
        "class": "fleet",
        "limits": {**limits.view(), "live_exports_total": stack.exports.settings.max_live_exports_total},
        "live": {"exports": 1, "batches": 0},
        "storage": {
            "usage_bytes": 0,
            "budget_bytes": limits.storage_bytes,
            "remaining_bytes": limits.storage_bytes,
        },
    }


def test_the_global_cap_refuses_with_503_and_writes_nothing(stack: Stack) -> None:
    stack.reconfigured(max_live_exports_total=3)
    books = {user: stack.create_book(caller=user) for user in ("user-a", "user-b")}
    accepted = [stack.submit(books["user-a"], caller="user-a") for _ in range(2)]
    accepted.append(stack.submit(books["user-b"], caller="user-b"))
    assert [r.status for r in accepted] == [202, 202, 202]
    # Three shards have a cap of one, and each id names one of those three.
    assert {shard_of(r.body["id"]) for r in accepted} == {0, 1, 2}
    before = sorted(e.id for e in stack.store.exports.all_exports())

    refused = stack.submit(books["user-b"], caller="user-b")

    assert refused.status == 503 and refused.body["error"]["code"] == "service_at_capacity"
    assert refused.headers["Retry-After"] == "30"
    assert sorted(e.id for e in stack.store.exports.all_exports()) == before
    assert sum(_shards(stack).values()) == 3
    # An ending gives its slot back, in the same write: the next submit fits.
    stack.http("DELETE", f"/books/{books['user-a']}/exports/{accepted[0].body['id']}", caller="user-a")
    assert sum(_shards(stack).values()) == 2
    assert stack.submit(books["user-b"], caller="user-b").status == 202


def test_a_full_shard_sends_the_submit_to_one_with_room(stack: Stack) -> None:
    stack.reconfigured(max_live_exports_total=CAP_SHARDS, max_live_exports=CAP_SHARDS + 1)
    book = stack.create_book()
    ids = [stack.submit(book).body["id"] for _ in range(CAP_SHARDS)]
    # Every shard has a cap of one: sixteen accepted submits can only have found sixteen shards.
    assert sorted(shard_of(i) for i in ids) == list(range(CAP_SHARDS))
    assert stack.submit(book).status == 503


def test_the_budget_moves_with_publish_and_unlink_and_refuses_with_507(stack: Stack) -> None:
    book = stack.create_book()
    stack.reconfigured(class_limits=json.dumps({"standard": {"storage_bytes": 10}}))
    export_id = stack.submit(book).body["id"]
    stack.build(book, export_id)
    size = stack.poll(book, export_id).body["size_bytes"]
    assert size > 10 and stack.store.exports.holdings("user-alice").usage == size

    refused = stack.submit(book)

    assert refused.status == 507
    assert refused.body["error"]["code"] == "storage_budget_exceeded"
    assert (refused.body["error"]["usage_bytes"], refused.body["error"]["budget_bytes"]) == (size, 10)
    assert "DELETE /books/{bookId}/exports/{exportId}" in refused.body["error"]["message"]
    assert len(list(stack.store.exports.all_exports())) == 1
    # Cancelling the ready export deletes its file at once, and its bytes leave the usage in that write.
    assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204
    assert stack.store.exports.holdings("user-alice").usage == 0
    assert stack.submit(book).status == 202


def test_a_lapsed_links_bytes_leave_the_usage_when_the_gc_unlinks_them(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    stack.build(book, export_id)
    assert stack.store.exports.holdings("user-alice").usage > 0
    stack.clock.advance(stack.exports.settings.link_ttl_seconds)
    assert stack.gc()["unlinked"] == 1
    assert stack.store.exports.holdings("user-alice").usage == 0
    # A second run (the same rows, nothing left in the unlink queue) moves nothing.
    stack.gc()
    assert stack.store.exports.holdings("user-alice").usage == 0


def test_a_failed_export_publishes_nothing_to_the_usage(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    stack.clock.advance(stack.exports.settings.queue_grace_seconds + 1)
    stack.sweep()
    stack.gc()
    assert stack.poll(book, export_id).body["state"] == State.FAILED
    assert stack.store.exports.holdings("user-alice").usage == 0


def test_a_class_pdf_limit_fails_the_build_early_and_never_reaches_the_engine(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine import pdf

    monkeypatch.setattr(pdf.RENDERER, "render", lambda *a: pytest.fail("the engine was called"))
    stack.reconfigured(class_limits=json.dumps({"standard": {"pdf_manuscript_bytes": 10}}))
    book = stack.create_book("# Long enough\n\nto be over ten bytes\n")
    for cls in ("standard", "restricted"):  # restricted is held to the tightest, so to 10 as well
        export_id = stack.submit(book, "pdf", caller_class=cls).body["id"]
        assert stack.services.builds.build(book, export_id) == "failed:too_large_for_format"


def test_rows_from_before_the_caps_end_and_unlink_without_moving_a_shard_or_the_usage(stack: Stack) -> None:
    import boto3

    book = stack.create_book()
    table = boto3.resource("dynamodb").Table(stack.exports.settings.table)
    pending, ready = (stack.submit(book).body["id"] for _ in range(2))
    stack.build(book, ready)
    # As a stack deployed before the caps left them: no caller_class, no shard slot, no bytes in the usage.
    for export_id in (pending, ready):
        table.update_item(
            Key={"pk": f"BOOK#{book}", "sk": f"EXPORT#{export_id}"}, UpdateExpression="REMOVE caller_class"
        )
    table.update_item(
        Key={"pk": "CAP#live", "sk": f"SHARD#{shard_of(pending):02d}"},
        UpdateExpression="ADD n :minus",
        ExpressionAttributeValues={":minus": -1},
    )
    table.update_item(
        Key={"pk": "CALLER#user-alice", "sk": "LIVE"},
        UpdateExpression="SET #u = :zero",
        ExpressionAttributeNames={"#u": "usage"},
        ExpressionAttributeValues={":zero": 0},
    )
    room = stack.store.exports.shard_room()

    stack.clock.advance(stack.exports.settings.link_ttl_seconds)
    stack.sweep()  # the pending one fails (queue_timeout): the sweep's slot guessed "counted", and was told
    stack.gc()  # the ready one lapses and is unlinked

    assert stack.poll(book, pending).body["state"] == "failed"
    assert stack.store.exports.shard_room() == room
    assert stack.store.exports.holdings("user-alice") == Holdings(0, 0, 0)
