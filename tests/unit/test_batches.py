"""Batches on moto in-process: one job of many exports, its counts moved exactly once per ending target.

The races (8 batches of 20 at once, duplicated build messages, crashed builds) run on DynamoDB Local, in
tests/integration/test_batch_races.py."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from bindery.limits import CallerClass
from bindery.storage import BATCH_CHECK_SECONDS, StorageError
from tests.calls import recording
from tests.unit.conftest import Reply, Stack
from tests.unit.test_lost_answers import answer_lost


def _create(stack: Stack, targets: list[dict[str, Any]], **kw: Any) -> Reply:
    return stack.http("POST", "/batches", body={"exports": targets}, **kw)


def _batch(stack: Stack, batch_id: str, **kw: Any) -> dict[str, Any]:
    reply = stack.http("GET", f"/batches/{batch_id}", **kw)
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


def _build_all(stack: Stack, batch: dict[str, Any]) -> None:
    for target in batch["targets"]:
        assert stack.build(target["book_id"], target["export_id"])["batchItemFailures"] == []


def _table_keys(stack: Stack) -> list[tuple[str, str]]:
    client = stack.store.client
    items = client.scan(TableName=stack.store.settings.table, ProjectionExpression="pk, sk")["Items"]
    return sorted((i["pk"]["S"], i["sk"]["S"]) for i in items)


@pytest.fixture
def two_books(stack: Stack) -> tuple[str, str]:
    return stack.create_book(), stack.create_book("# Other\n\ntext\n", title="Other")


def test_a_batch_is_accepted_with_every_target_an_ordinary_export(stack: Stack, two_books: Any) -> None:
    a, b = two_books
    reply = _create(
        stack,
        [
            {"book_id": a, "format": "html"},
            {"book_id": a, "format": "markdown"},
            {"book_id": b, "format": "epub"},
        ],
    )
    assert reply.status == 202
    assert reply.headers["Location"] == f"/batches/{reply.body['id']}"
    assert reply.headers["Retry-After"] == "2"
    batch = _batch(stack, reply.body["id"])
    assert (batch["status"], batch["targets_total"], batch["targets_done"]) == ("queued", 3, 0)
    assert batch["counts"]["pending"] == 3
    assert [(t["book_id"], t["format"], t["state"]) for t in batch["targets"]] == [
        (a, "html", "pending"),
        (a, "markdown", "pending"),
        (b, "epub", "pending"),
    ]
    listed = stack.http("GET", f"/books/{a}/exports").body["exports"]
    assert {e["id"] for e in listed} == {t["export_id"] for t in batch["targets"][:2]}
    # Targets take no place in the caller's live set of single exports: that cap is for those alone.
    assert stack.http("GET", "/me").body["live"] == {"exports": 0, "batches": 1}


def test_creating_a_batch_costs_two_reads_and_one_write(stack: Stack, two_books: Any) -> None:
    a, b = two_books
    with recording(stack.store.client) as calls:
        _create(stack, [{"book_id": a, "format": "html"}, {"book_id": b, "format": "html"}])
    # The books' owners, the cap's shards, the one write of everything, and the RateLimit read.
    assert calls.made == [
        ("dynamodb", "BatchGetItem"),
        ("dynamodb", "BatchGetItem"),
        ("dynamodb", "TransactWriteItems"),
        ("dynamodb", "GetItem"),
    ]


def test_a_target_on_a_book_not_yours_is_a_404_for_the_whole_batch_and_writes_nothing(
    stack: Stack, two_books: Any
) -> None:
    a, _ = two_books
    strangers = stack.create_book(caller="user-mallory")
    before = _table_keys(stack)
    for book in (strangers, "0000000000000000missing", "not an id!"):
        reply = _create(stack, [{"book_id": a, "format": "html"}, {"book_id": book, "format": "html"}])
        assert reply.status == 404 and reply.body["error"]["code"] == "not_found"
    assert _table_keys(stack) == before


@pytest.mark.parametrize(
    ("targets", "status", "code", "said"),
    [
        ([], 400, "invalid_field", "non-empty array"),
        ("html", 400, "invalid_field", "non-empty array"),
        ([{"book_id": "B", "format": "odt"}], 422, "unknown_format", "exports[0]: unknown format"),
        (
            [{"book_id": "B", "format": "html"}, {"book_id": "B"}],
            400,
            "missing_field",
            "exports[1]: missing field: format",
        ),
        ([{"book_id": "B", "format": 5}], 400, "invalid_format", "exports[0]: format must be a string"),
        ([{"book_id": "B", "format": "html", "colour": 1}], 400, "invalid_field", "exports[0]: a target"),
        ([{"book_id": "B", "format": "html", "options": {"x": 1}}], 422, "unknown_option", "exports[0]"),
        ([{"book_id": "B", "format": "html", "options": None}], 400, "invalid_options", "exports[0]: opt"),
        ([{"book_id": "B", "format": "html"}] * 11, 422, "too_many_targets", "at most 10"),
    ],
)
def test_a_bad_batch_is_refused_naming_the_target_and_writes_nothing(
    stack: Stack, two_books: Any, targets: Any, status: int, code: str, said: str
) -> None:
    a, _ = two_books
    if isinstance(targets, list):
        targets = [{**t, "book_id": a} if t.get("book_id") == "B" else t for t in targets]
    before = _table_keys(stack)
    reply = _create(stack, targets, caller_class="restricted")
    assert (reply.status, reply.body["error"]["code"]) == (status, code)
    assert said in reply.body["error"]["message"]
    assert _table_keys(stack) == before


def test_every_target_ready_is_done_with_its_bytes_and_its_place_given_back(
    stack: Stack, two_books: Any
) -> None:
    a, b = two_books
    batch = _batch(
        stack,
        _create(stack, [{"book_id": a, "format": "html"}, {"book_id": b, "format": "markdown"}]).body["id"],
    )
    _build_all(stack, batch)
    done = _batch(stack, batch["id"])
    sizes = [stack.poll(t["book_id"], t["export_id"]).body["size_bytes"] for t in done["targets"]]
    assert (done["status"], done["targets_done"], done["ended"]) == (
        "done",
        2,
        {"ready": 2, "failed": 0, "cancelled": 0},
    )
    assert done["bytes"] == sum(sizes) and done["finished_at"] is not None
    assert done["counts"]["ready"] == 2
    assert stack.http("GET", "/me").body["live"]["batches"] == 0
    assert stack.store.exports.holdings("user-alice").usage == sum(sizes)


def test_some_ready_is_partial_and_none_ready_is_failed(stack: Stack) -> None:
    book = stack.create_book()
    empty = stack.create_book("")
    partial = _batch(
        stack,
        _create(stack, [{"book_id": book, "format": "html"}, {"book_id": empty, "format": "html"}]).body[
            "id"
        ],
    )
    failed = _batch(stack, _create(stack, [{"book_id": empty, "format": "epub"}]).body["id"])
    _build_all(stack, partial)
    _build_all(stack, failed)
    partial, failed = _batch(stack, partial["id"]), _batch(stack, failed["id"])
    assert (partial["status"], partial["ended"]["ready"], partial["ended"]["failed"]) == ("partial", 1, 1)
    assert partial["targets"][1]["failure_code"] == "empty_book"
    assert (failed["status"], failed["ended"]["failed"], failed["bytes"]) == ("failed", 1, 0)


def test_a_redelivered_build_message_moves_targets_done_once(stack: Stack, two_books: Any) -> None:
    a, b = two_books
    batch = _batch(
        stack, _create(stack, [{"book_id": a, "format": "html"}, {"book_id": b, "format": "html"}]).body["id"]
    )
    first = batch["targets"][0]
    for _ in range(3):
        stack.build(first["book_id"], first["export_id"])
    after = _batch(stack, batch["id"])
    assert (after["status"], after["targets_done"], after["ended"]["ready"]) == ("running", 1, 1)


def test_a_finish_whose_answer_was_lost_counts_once_and_still_ends_the_batch(stack: Stack) -> None:
    book = stack.create_book()
    batch = _batch(stack, _create(stack, [{"book_id": book, "format": "html"}]).body["id"])
    target = batch["targets"][0]
    with answer_lost(stack.store.client, "TransactWriteItems"):
        assert stack.build(book, target["export_id"])["batchItemFailures"] == []
    after = _batch(stack, batch["id"])
    assert (after["status"], after["targets_done"], after["ended"]["ready"]) == ("done", 1, 1)


def test_the_sweep_ends_a_batch_whose_last_ending_could_not(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book()
    batch = _batch(stack, _create(stack, [{"book_id": book, "format": "html"}]).body["id"])
    store_type = type(stack.store.batches)

    def lost_process(self: Any, caller: str, batch_id: str) -> None:
        raise StorageError("InternalServerError: injected")  # what the store's read raises for it

    with monkeypatch.context() as patched:
        patched.setattr(store_type, "read_batch_row", lost_process)
        stack.build(book, batch["targets"][0]["export_id"])
    assert _batch(stack, batch["id"])["status"] == "running"  # the target ended; its batch did not
    assert stack.sweep()["settled"] == 0  # not due yet
    stack.clock.advance(BATCH_CHECK_SECONDS)
    assert stack.sweep()["settled"] == 1
    assert _batch(stack, batch["id"])["status"] == "done"
    assert stack.http("GET", "/me").body["live"]["batches"] == 0


def test_a_build_that_died_between_its_ending_and_its_batchs_is_settled_by_the_redelivery(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the kill test: a worker killed after its target's ending and before the batch's settlement
    left the batch running until the batch sweep, ten minutes on. Its message comes back, unanswered."""
    book = stack.create_book()
    batch = _batch(stack, _create(stack, [{"book_id": book, "format": "html"}]).body["id"])

    class Killed(BaseException):
        """The process dying: no handler catches it."""

    def killed(self: Any, caller: str, batch_id: str) -> None:
        raise Killed

    with monkeypatch.context() as patched, pytest.raises(Killed):
        patched.setattr(type(stack.store.batches), "read_batch_row", killed)
        stack.build(book, batch["targets"][0]["export_id"])
    assert _batch(stack, batch["id"])["status"] == "running"  # the target ended; its batch did not

    assert stack.build(book, batch["targets"][0]["export_id"])["batchItemFailures"] == []  # redelivered

    after = _batch(stack, batch["id"])
    assert (after["status"], after["targets_done"], after["bundle"]["state"]) == ("done", 1, "pending")
    assert stack.http("GET", "/me").body["live"]["batches"] == 0


def test_a_stale_target_fails_by_the_sweep_and_the_batch_ends_failed(stack: Stack) -> None:
    book = stack.create_book()
    batch = _batch(stack, _create(stack, [{"book_id": book, "format": "html"}] * 2).body["id"])
    stack.clock.advance(stack.exports.settings.queue_grace_seconds + 1)
    assert stack.sweep()["failed"] == 2
    after = _batch(stack, batch["id"])
    assert (after["status"], after["ended"]["failed"]) == ("failed", 2)
    assert {t["failure_code"] for t in after["targets"]} == {"queue_timeout"}


def test_cancel_ends_pending_targets_and_the_links_of_ready_ones(stack: Stack, two_books: Any) -> None:
    a, b = two_books
    batch = _batch(
        stack, _create(stack, [{"book_id": a, "format": "html"}, {"book_id": b, "format": "html"}]).body["id"]
    )
    ready = batch["targets"][0]
    stack.build(ready["book_id"], ready["export_id"])
    path = next(e for e in stack.store.exports.all_exports() if e.id == ready["export_id"]).path
    assert stack.http("DELETE", f"/batches/{batch['id']}").status == 204
    after = _batch(stack, batch["id"])
    assert after["status"] == "cancelled"
    assert [t["state"] for t in after["targets"]] == ["expired", "cancelled"]
    assert (after["targets_done"], after["ended"]) == (2, {"ready": 1, "failed": 0, "cancelled": 1})
    assert path not in set(stack.objects.keys("artifacts/"))  # the ready one's file went before the answer
    assert stack.store.exports.holdings("user-alice").usage == 0
    assert stack.http("GET", "/me").body["live"]["batches"] == 0
    # A second cancel changes nothing; another caller's cancel, or read, finds no such batch.
    assert stack.http("DELETE", f"/batches/{batch['id']}").status == 204
    assert _batch(stack, batch["id"])["status"] == "cancelled"
    assert stack.http("DELETE", f"/batches/{batch['id']}", caller="user-mallory").status == 404
    assert stack.http("GET", f"/batches/{batch['id']}", caller="user-mallory").status == 404


def test_an_idempotency_key_replays_the_batch_and_refuses_another_request(stack: Stack) -> None:
    book = stack.create_book()
    targets = [{"book_id": book, "format": "html"}]
    first = _create(stack, targets, headers={"Idempotency-Key": "k1"})
    again = _create(stack, targets, headers={"Idempotency-Key": "k1"})
    assert (again.status, again.body["id"], again.headers["Idempotent-Replayed"]) == (
        202,
        first.body["id"],
        "true",
    )
    other = _create(stack, [{"book_id": book, "format": "epub"}], headers={"Idempotency-Key": "k1"})
    assert (other.status, other.body["error"]["code"]) == (422, "idempotency_key_reused")
    assert len(stack.http("GET", "/batches").body["batches"]) == 1


def test_each_class_has_its_cap_of_live_batches(stack: Stack) -> None:
    book = stack.create_book()
    cap = stack.exports.settings.limits(CallerClass.RESTRICTED).live_batches
    for _ in range(cap):
        assert _create(stack, [{"book_id": book, "format": "html"}], caller_class="restricted").status == 202
    refused = _create(stack, [{"book_id": book, "format": "html"}], caller_class="restricted")
    assert (refused.status, refused.body["error"]["code"]) == (429, "too_many_live_batches")
    assert refused.headers["Retry-After"] == "30"


def test_a_caller_over_its_budget_gets_507_for_a_batch(stack: Stack) -> None:
    book = stack.create_book()
    stack.reconfigured(class_limits=json.dumps({"standard": {"storage_bytes": 10}}))
    stack.build(book, stack.submit(book).body["id"])
    refused = _create(stack, [{"book_id": book, "format": "html"}])
    assert (refused.status, refused.body["error"]["code"]) == (507, "storage_budget_exceeded")


def test_the_global_cap_holds_batches_too(stack: Stack) -> None:
    book = stack.create_book()
    stack.reconfigured(max_live_exports_total=5)
    assert _create(stack, [{"book_id": book, "format": "html"}] * 4).status == 202
    refused = _create(stack, [{"book_id": book, "format": "html"}] * 2)
    assert (refused.status, refused.body["error"]["code"]) == (503, "service_at_capacity")
    assert _create(stack, [{"book_id": book, "format": "html"}]).status == 202


def test_batches_list_newest_first_a_page_at_a_time(stack: Stack) -> None:
    book = stack.create_book()
    made = []
    for _ in range(3):
        made.append(_create(stack, [{"book_id": book, "format": "html"}]).body["id"])
        stack.clock.advance(1)
    first = stack.http("GET", "/batches", query={"limit": "2"}).body
    assert [b["id"] for b in first["batches"]] == made[::-1][:2]
    rest = stack.http("GET", "/batches", query={"limit": "2", "cursor": first["next_cursor"]}).body
    assert [b["id"] for b in rest["batches"]] == made[:1]
    assert stack.http("GET", "/batches", caller="user-mallory").body["batches"] == []


def _bundle_bytes(stack: Stack, batch_id: str) -> bytes:
    bundle = _batch(stack, batch_id)["bundle"]
    assert bundle["state"] == "ready" and bundle["download_url"], bundle
    row = next(e for e in stack.store.exports.all_exports() if e.id == bundle["id"])
    body: bytes = stack.objects.client.get_object(Bucket=stack.objects.settings.bucket, Key=row.path)[
        "Body"
    ].read()
    return body


def test_a_batch_with_a_ready_target_gets_one_zip_with_a_manifest_that_unzip_accepts(
    stack: Stack, two_books: Any, tmp_path: Any
) -> None:
    import hashlib
    import io
    import subprocess
    import zipfile

    a, b = two_books
    empty = stack.create_book("")
    batch = _batch(
        stack,
        _create(
            stack,
            [
                {"book_id": a, "format": "html"},
                {"book_id": b, "format": "markdown"},
                {"book_id": empty, "format": "html"},
            ],
        ).body["id"],
    )
    _build_all(stack, batch)
    partial = _batch(stack, batch["id"])
    assert partial["status"] == "partial" and partial["bundle"]["state"] == "pending"
    assert stack.build(partial["id"], partial["bundle"]["id"])["batchItemFailures"] == []

    data = _bundle_bytes(stack, batch["id"])
    (tmp_path / "bundle.zip").write_bytes(data)
    tested = subprocess.run(["unzip", "-t", str(tmp_path / "bundle.zip")], capture_output=True, text=True)
    assert tested.returncode == 0 and "No errors detected" in tested.stdout, tested.stdout
    archive = zipfile.ZipFile(io.BytesIO(data))
    manifest = json.loads(archive.read("manifest.json"))["files"]
    ready = [t for t in partial["targets"] if t["state"] == "ready"]
    assert [(f["book_id"], f["format"], f["export_id"]) for f in manifest] == [
        (t["book_id"], t["format"], t["export_id"]) for t in ready
    ]
    for entry in manifest:
        member = archive.read(entry["name"])
        polled = stack.poll(entry["book_id"], entry["export_id"]).body
        assert hashlib.sha256(member).hexdigest() == entry["sha256"] == polled["sha256"]
        assert len(member) == entry["size_bytes"] == polled["size_bytes"]
        assert entry["revision"] == polled["built_revision"]
    bundle = _batch(stack, batch["id"])["bundle"]
    assert bundle["sha256"] == hashlib.sha256(data).hexdigest() and bundle["size_bytes"] == len(data)
    # The bundle is a stored file of the caller's: its bytes count in the usage, with the targets'.
    sizes = sum(stack.poll(t["book_id"], t["export_id"]).body["size_bytes"] for t in ready)
    assert stack.store.exports.holdings("user-alice").usage == sizes + len(data)


def test_a_batch_with_nothing_ready_gets_no_bundle(stack: Stack) -> None:
    empty = stack.create_book("")
    batch = _batch(stack, _create(stack, [{"book_id": empty, "format": "html"}]).body["id"])
    _build_all(stack, batch)
    assert _batch(stack, batch["id"])["bundle"] is None


def test_the_bundles_link_lapses_and_the_gc_unlinks_it_as_any_exports(stack: Stack) -> None:
    book = stack.create_book()
    batch = _batch(stack, _create(stack, [{"book_id": book, "format": "html"}]).body["id"])
    _build_all(stack, batch)
    bundle = _batch(stack, batch["id"])["bundle"]
    stack.build(batch["id"], bundle["id"])
    path = next(e for e in stack.store.exports.all_exports() if e.id == bundle["id"]).path
    stack.clock.advance(stack.exports.settings.link_ttl_seconds)
    assert _batch(stack, batch["id"])["bundle"]["state"] == "expired"
    assert stack.gc()["unlinked"] == 2  # the target's file and the bundle
    assert path not in set(stack.objects.keys("artifacts/"))
    assert stack.store.exports.holdings("user-alice").usage == 0


def test_cancelling_a_done_batch_ends_its_bundles_link_too(stack: Stack) -> None:
    book = stack.create_book()
    batch = _batch(stack, _create(stack, [{"book_id": book, "format": "html"}]).body["id"])
    _build_all(stack, batch)
    stack.build(batch["id"], _batch(stack, batch["id"])["bundle"]["id"])
    assert stack.http("DELETE", f"/batches/{batch['id']}").status == 204
    after = _batch(stack, batch["id"])
    assert (after["status"], after["bundle"]["state"], after["bundle"]["download_url"]) == (
        "done",
        "expired",
        None,
    )
    assert stack.objects.keys("artifacts/") == []
    assert stack.store.exports.holdings("user-alice").usage == 0


@pytest.mark.parametrize("bundle_state", ["ready", "pending"])
def test_deleting_a_book_ends_the_bundles_that_hold_its_files(
    stack: Stack, two_books: Any, bundle_state: str
) -> None:
    """A bundle is copies of its targets' files: a book's delete must not leave its bytes downloadable
    there. The bundle ends (a pending one is cancelled, so its build cannot finish it); the other book's
    own export keeps its link."""
    a, b = two_books
    batch = _batch(
        stack, _create(stack, [{"book_id": a, "format": "html"}, {"book_id": b, "format": "html"}]).body["id"]
    )
    _build_all(stack, batch)
    bundle = _batch(stack, batch["id"])["bundle"]
    if bundle_state == "ready":
        assert stack.build(batch["id"], bundle["id"])["batchItemFailures"] == []
    assert _batch(stack, batch["id"])["bundle"]["state"] == bundle_state

    assert stack.http("DELETE", f"/books/{a}").status == 204
    stack.gc()  # the purge, should the delete have left it to the GC
    after = _batch(stack, batch["id"])
    assert (after["status"], after["bundle"]["state"], after["bundle"]["download_url"]) == (
        "done",
        "expired" if bundle_state == "ready" else "cancelled",
        None,
    )
    assert stack.build(batch["id"], bundle["id"])["batchItemFailures"] == []  # a late build changes nothing
    assert _batch(stack, batch["id"])["bundle"]["state"] == after["bundle"]["state"]
    kept = {e.id: e for e in stack.store.exports.all_exports()}
    other = next(t for t in batch["targets"] if t["book_id"] == b)
    assert kept[other["export_id"]].state == "ready"
    assert set(stack.objects.keys("artifacts/")) == {kept[other["export_id"]].path}


def test_a_bundle_nobody_builds_fails_by_the_sweep_and_frees_no_cap(stack: Stack) -> None:
    book = stack.create_book()
    batch = _batch(stack, _create(stack, [{"book_id": book, "format": "html"}]).body["id"])
    _build_all(stack, batch)
    room = stack.store.exports.shard_room()
    stack.clock.advance(stack.exports.settings.queue_grace_seconds + 1)
    assert stack.sweep()["failed"] == 1
    assert _batch(stack, batch["id"])["bundle"]["failure_code"] == "queue_timeout"
    assert (
        stack.store.exports.shard_room() == room
    )  # it held no place in the global cap, so it gave none back


def test_a_batch_larger_than_a_small_global_cap_could_ever_take_is_422_not_503(stack: Stack) -> None:
    book = stack.create_book()
    stack.reconfigured(max_live_exports_total=20)  # 16 shards of 1 or 2: 7 of them take at most 11
    refused = _create(stack, [{"book_id": book, "format": "html"}] * 12)
    assert (refused.status, refused.body["error"]["code"], refused.body["error"]["limit"]) == (
        422,
        "too_many_targets",
        11,
    )
    assert stack.http("GET", "/me").body["limits"]["batch_targets"] == 11
    assert _create(stack, [{"book_id": book, "format": "html"}] * 11).status == 202


def test_a_cancelled_batch_is_kept_as_long_as_an_ended_one_and_not_cancelled_past_it(stack: Stack) -> None:
    book = stack.create_book()
    batch = _create(stack, [{"book_id": book, "format": "html"}]).body["id"]
    assert stack.http("DELETE", f"/batches/{batch}").status == 204
    stack.clock.advance(stack.exports.settings.ended_retention_seconds + 1)
    assert stack.http("GET", f"/batches/{batch}").status == 404
    assert stack.http("GET", "/batches").body["batches"] == []
    before = _table_keys(stack)
    assert stack.http("DELETE", f"/batches/{batch}").status == 404
    assert _table_keys(stack) == before


def test_the_batch_sweep_stops_at_its_deadline_and_leaves_the_rest_due(stack: Stack) -> None:
    book = stack.create_book()
    batch = _batch(stack, _create(stack, [{"book_id": book, "format": "html"}]).body["id"])
    store_type = type(stack.store.batches)
    real = store_type.read_batch_row
    store_type.read_batch_row = lambda *a, **k: None  # type: ignore[method-assign]  # the worker's settle lost
    try:
        stack.build(book, batch["targets"][0]["export_id"])
    finally:
        store_type.read_batch_row = real  # type: ignore[method-assign]
    stack.clock.advance(BATCH_CHECK_SECONDS)
    assert stack.services.batches.settle_batches(lambda: True) == {"settled": 0, "deferred": 0, "cleared": 0}
    assert _batch(stack, batch["id"])["status"] == "running"
    assert stack.services.batches.settle_batches()["settled"] == 1


def test_an_empty_file_leaves_the_unlink_queue_like_any_other(stack: Stack) -> None:
    from bindery.objects import artifact_key
    from bindery.storage import Claimed

    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    path = artifact_key(book, export_id, "empty")
    claimed = stack.store.claims.claim_build(book, export_id, path, stack.clock())
    assert isinstance(claimed, Claimed)
    stack.objects.put_bytes(path, b"")
    stack.store.claims.finish_export(
        claimed.export, path=path, size_bytes=0, built_revision=1, now=stack.clock()
    )
    stack.clock.advance(stack.exports.settings.link_ttl_seconds)
    assert stack.gc()["unlinked"] == 1
    assert stack.gc()["unlinked"] == 0  # it left the queue: no run finds it again


def test_a_batch_with_a_docx_target_builds_it_and_bundles_it_as_a_word_document(
    stack: Stack, two_books: Any
) -> None:
    import io
    import zipfile

    a, b = two_books
    batch = _batch(
        stack, _create(stack, [{"book_id": a, "format": "docx"}, {"book_id": b, "format": "epub"}]).body["id"]
    )
    _build_all(stack, batch)
    done = _batch(stack, batch["id"])
    assert (done["status"], done["ended"]) == ("done", {"ready": 2, "failed": 0, "cancelled": 0})
    polled = stack.poll(a, done["targets"][0]["export_id"]).body
    assert polled["format"] == "docx" and polled["complete"] is True
    assert polled["download_name"].endswith(".docx")
    assert stack.build(done["id"], done["bundle"]["id"])["batchItemFailures"] == []
    archive = zipfile.ZipFile(io.BytesIO(_bundle_bytes(stack, batch["id"])))
    manifest = json.loads(archive.read("manifest.json"))["files"]
    (entry,) = [f for f in manifest if f["format"] == "docx"]
    assert entry["name"].endswith(".docx")
    word = zipfile.ZipFile(io.BytesIO(archive.read(entry["name"])))
    document = word.read("word/document.xml").decode()
    for title in ("One", "Two"):  # book a's chapters, each a heading 1
        bookmark = f'<w:bookmarkStart w:id="[0-9]+" w:name="{title.lower()}"/>'  # (a link's target)
        pattern = (
            f'<w:pStyle w:val="Heading1"/></w:pPr>{bookmark}<w:r><w:t xml:space="preserve">{title}</w:t>'
        )
        assert re.search(pattern, document), title
