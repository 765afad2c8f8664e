"""Edges a caller found from outside (issue 28): answers that contradicted their own docs, and states that
changed after they had ended. Each test is named after the promise it now holds."""

from __future__ import annotations

from typing import Any

import pytest

from tests.calls import recording
from tests.unit.conftest import Stack


def _table(stack: Stack) -> list[dict[str, Any]]:
    return sorted(
        (item.attribute_values for item in stack.store.m.item.scan()), key=lambda v: (v["pk"], v["sk"])
    )


# ---- 1: an id that could not exist is a 404, whatever the route ------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("tail", ["g", "z", "-"])
def test_an_export_id_whose_shard_digit_is_not_hex_is_a_404_and_writes_nothing(
    stack: Stack, method: str, tail: str
) -> None:
    book = stack.create_book()
    real = stack.submit(book).body["id"]
    before = _table(stack)
    for export_id in (real[:-1] + tail, "abcdefgh" if tail != "-" else "abcdefg-"):
        with recording(stack.store.client, stack.objects.client) as calls:
            reply = stack.http(method, f"/books/{book}/exports/{export_id}")
        assert (reply.status, reply.body["error"]["code"]) == (404, "not_found"), export_id
        assert calls.writes() == []
    assert _table(stack) == before


# ---- 6: If-Match is a quoted revision, as the README says -------------------------------------------


@pytest.mark.parametrize("if_match", ["3", "1", '"1', '1"', "W/1", '"1", "2"', ""])
def test_an_unquoted_if_match_is_400_and_the_revision_stays(stack: Stack, if_match: str) -> None:
    book = stack.create_book()
    before = _table(stack)
    for method, path, body in (
        ("PATCH", f"/books/{book}", {"title": "Renamed"}),
        ("PUT", f"/books/{book}/manuscript", {"manuscript": "# New\n\ntext\n"}),
    ):
        reply = stack.http(method, path, body=body, headers={"If-Match": if_match})
        assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_if_match"), (method, if_match)
    assert _table(stack) == before
    assert stack.http("GET", f"/books/{book}").body["revision"] == 1


def test_a_quoted_if_match_still_works(stack: Stack) -> None:
    book = stack.create_book()
    reply = stack.http("PATCH", f"/books/{book}", body={"title": "Renamed"}, headers={"If-Match": '"1"'})
    assert (reply.status, reply.body["revision"], reply.headers["ETag"]) == (200, 2, '"2"')
    stale = stack.http("PATCH", f"/books/{book}", body={"title": "Again"}, headers={"If-Match": '"1"'})
    assert (stale.status, stale.body["error"]["code"]) == (412, "revision_mismatch")


# ---- 2: nothing that has ended is rewritten: a batch keeps how and when it ended --------------------


def _batch(stack: Stack, batch_id: str) -> dict[str, Any]:
    reply = stack.http("GET", f"/batches/{batch_id}")
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


def _batch_row(stack: Stack, batch_id: str) -> dict[str, Any]:
    rows = (i.attribute_values for i in stack.store.m.item.scan())
    return next(v for v in rows if v["sk"] == f"BATCH#{batch_id}")


def test_cancelling_a_done_batch_keeps_its_status_and_time_and_records_when_its_links_ended(
    stack: Stack,
) -> None:
    book = stack.create_book()
    made = stack.http("POST", "/batches", body={"exports": [{"book_id": book, "format": "html"}] * 2}).body
    for target in made["targets"]:
        stack.build(book, target["export_id"])
    done = _batch(stack, made["id"])
    stack.build(made["id"], done["bundle"]["id"])
    assert (done["status"], done["revoked_at"]) == ("done", None)
    stack.clock.advance(60)

    assert stack.http("DELETE", f"/batches/{made['id']}").status == 204

    after = _batch(stack, made["id"])
    assert (after["status"], after["finished_at"]) == ("done", done["finished_at"])
    assert after["revoked_at"] is not None and after["revoked_at"] > done["finished_at"]
    assert [t["state"] for t in after["targets"]] == ["expired", "expired"]
    assert (after["bundle"]["state"], after["bundle"]["download_url"]) == ("expired", None)
    assert stack.objects.keys("artifacts/") == []
    # A second cancel is answered the same and changes nothing: not the time, not the event.
    row = _batch_row(stack, made["id"])
    stack.clock.advance(60)
    assert stack.http("DELETE", f"/batches/{made['id']}").status == 204
    assert _batch_row(stack, made["id"]) == row
    assert _batch(stack, made["id"])["revoked_at"] == after["revoked_at"]


def test_cancelling_a_failed_batch_changes_nothing(stack: Stack) -> None:
    book = stack.create_book("")  # no chapters: every target fails empty_book
    made = stack.http("POST", "/batches", body={"exports": [{"book_id": book, "format": "html"}]}).body
    stack.build(book, made["targets"][0]["export_id"])
    failed = _batch(stack, made["id"])
    assert failed["status"] == "failed"
    before = _table(stack)
    assert stack.http("DELETE", f"/batches/{made['id']}").status == 204
    assert _table(stack) == before


# ---- 3: a batch's answer is one moment ----------------------------------------------------------------


def test_a_batch_read_is_one_moment_though_a_target_ends_between_its_reads(stack: Stack) -> None:
    """The batch row's counts and its targets' states are read together: a target that ends after the
    read that learns which rows to read is either counted and shown ended, or neither."""
    book = stack.create_book()
    made = stack.http("POST", "/batches", body={"exports": [{"book_id": book, "format": "html"}] * 3}).body
    client = stack.store.client
    ended: list[str] = []

    def end_a_target_first(**_: Any) -> None:
        if not ended:  # once: the build below reads and writes through this same client
            ended.append(made["targets"][len(ended)]["export_id"])
            stack.build(book, ended[-1])

    for op in ("BatchGetItem", "TransactGetItems"):
        client.meta.events.register(f"before-call.dynamodb.{op}", end_a_target_first)
    try:
        view = _batch(stack, made["id"])
    finally:
        for op in ("BatchGetItem", "TransactGetItems"):
            client.meta.events.unregister(f"before-call.dynamodb.{op}", end_a_target_first)

    assert ended, "the read made no second call for the ending to land before"
    states = [t["state"] for t in view["targets"]]
    assert states.count("ready") == 1
    assert view["targets_done"] == view["targets_total"] - view["counts"]["pending"] == 1
    assert view["ended"]["ready"] == 1


# ---- 12: settings that contradict each other are refused at start, naming both ------------------------


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"BINDERY_QUEUE_GRACE_SECONDS": "300"}, ("BINDERY_QUEUE_GRACE_SECONDS", "VISIBILITY_TIMEOUT")),
        ({"BINDERY_BUILD_VISIBILITY_TIMEOUT_SECONDS": "2000"}, ("RETRY_GRACE", "VISIBILITY_TIMEOUT")),
        (
            {"BINDERY_WORKER_TIMEOUT_SECONDS": "60", "BINDERY_RETRY_GRACE_SECONDS": "30"},
            ("BINDERY_RETRY_GRACE_SECONDS", "BINDERY_WORKER_TIMEOUT_SECONDS", "VISIBILITY_TIMEOUT"),
        ),
    ],
)
def test_graces_shorter_than_the_queues_redelivery_are_refused_at_start(
    env: dict[str, str], named: tuple[str, ...]
) -> None:
    from bindery.config import ConfigError, Settings

    with pytest.raises(ConfigError) as refused:
        Settings.from_env(env)
    assert all(name in str(refused.value) for name in named), str(refused.value)


def test_the_default_settings_and_a_short_local_timeout_with_its_queue_start() -> None:
    from bindery.config import Settings

    assert Settings.from_env({}).queue_grace_seconds == 1_800
    short = {"BINDERY_BUILD_VISIBILITY_TIMEOUT_SECONDS": "40", "BINDERY_WORKER_TIMEOUT_SECONDS": "30"}
    assert Settings.from_env({**short, "BINDERY_QUEUE_GRACE_SECONDS": "60"}).lease_seconds == 60
