"""Edges a caller found from outside (issue 28): answers that contradicted their own docs, and states that
changed after they had ended. Each test is named after the promise it now holds."""

from __future__ import annotations

from typing import Any

import pytest

from bindery.settlement import settle_batch
from tests.calls import recording
from tests.unit.conftest import Stack


def _table(stack: Stack) -> list[dict[str, Any]]:
    return sorted(
        (item.attribute_values for item in stack.store.models.item.scan()), key=lambda v: (v["pk"], v["sk"])
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
    rows = (i.attribute_values for i in stack.store.models.item.scan())
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
    """The batch's counts are those of the target rows it shows: a target that ends after the batch row was
    read and before its targets were is counted and shown ended, or neither (read apart and counted from
    the batch row, this answer said `targets_done: 0` beside a target ready)."""
    book = stack.create_book()
    made = stack.http("POST", "/batches", body={"exports": [{"book_id": book, "format": "html"}] * 3}).body
    client = stack.store.client
    ended: list[str] = []

    def end_a_target_first(**_: Any) -> None:
        if not ended:  # once: the build below reads and writes through this same client
            ended.append(made["targets"][len(ended)]["export_id"])
            stack.build(book, ended[-1])

    event = "before-call.dynamodb.BatchGetItem"  # the read of the targets, after the batch row's
    client.meta.events.register(event, end_a_target_first)
    try:
        view = _batch(stack, made["id"])
    finally:
        client.meta.events.unregister(event, end_a_target_first)

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


# ---- the hunt: every malformed id, header and query value is a 4xx, and writes nothing -------------------

MALFORMED_IDS = ["gggggggg", "ABCDEFGH", "x" * 41, "short", "a b c d e", "é" * 8, "..%2F..", "0" * 8]


@pytest.fixture
def everything(stack: Stack) -> dict[str, str]:
    """One of each resource a path can name, all the caller's own."""
    stack.services.hooks.resolve = lambda host, port: ["93.184.216.34"]
    book = stack.create_book()
    export = stack.submit(book).body["id"]
    hook = stack.http(
        "POST", "/webhooks", body={"url": "https://hooks.example.com/in", "events": ["bindery.export.ready"]}
    ).body["id"]
    batch = stack.http("POST", "/batches", body={"exports": [{"book_id": book, "format": "markdown"}]}).body
    return {"bookId": book, "exportId": export, "endpointId": hook, "batchId": batch["id"], "deliveryId": "1"}


_ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "/books/{bookId}", None),
    ("PATCH", "/books/{bookId}", {"title": "T"}),
    ("POST", "/books/{bookId}/assets", {"name": "a.png", "content_type": "image/png", "size": 10}),
    ("PUT", "/books/{bookId}/assets/a.png", {"upload_id": "0123456789abcdef"}),
    ("DELETE", "/books/{bookId}/assets/a.png", None),
    ("PUT", "/books/{bookId}/manuscript", {"manuscript": "# M\n"}),
    ("POST", "/books/{bookId}/uploads", None),
    ("DELETE", "/books/{bookId}", None),
    ("POST", "/books/{bookId}/exports", {"format": "html"}),
    ("GET", "/books/{bookId}/exports", None),
    ("GET", "/books/{bookId}/exports/{exportId}", None),
    ("DELETE", "/books/{bookId}/exports/{exportId}", None),
    ("GET", "/webhooks/{endpointId}", None),
    ("PATCH", "/webhooks/{endpointId}", {"description": "d"}),
    ("DELETE", "/webhooks/{endpointId}", None),
    ("POST", "/webhooks/{endpointId}/rotate-secret", None),
    ("GET", "/webhooks/{endpointId}/deliveries", None),
    ("POST", "/webhooks/{endpointId}/deliveries/{deliveryId}/redeliver", None),
    ("GET", "/batches/{batchId}", None),
    ("DELETE", "/batches/{batchId}", None),
]


def test_every_malformed_path_id_is_a_4xx_that_writes_nothing(
    stack: Stack, everything: dict[str, str]
) -> None:
    before = _table(stack)
    answered: dict[int, int] = {}
    for method, template, body in _ROUTES:
        names = [n for n in everything if "{" + n + "}" in template]
        for name in names:
            real = everything[name]
            bad = [*MALFORMED_IDS, real[:-1] + "g", real + "0"]
            if name == "deliveryId":
                bad = ["abc", "-1", "9" * 20, "1.5", "０"]
            for value in bad:
                path = template
                for other in names:
                    path = path.replace("{" + other + "}", value if other == name else everything[other])
                reply = stack.http(method, path, body=body)
                answered[reply.status] = answered.get(reply.status, 0) + 1
                assert 400 <= reply.status < 500, (method, path, reply.status, reply.body)
    assert _table(stack) == before
    assert set(answered) <= {400, 404}, answered


def test_a_malformed_delivery_id_is_the_404_a_missing_delivery_is(
    stack: Stack, everything: dict[str, str]
) -> None:
    hook = everything["endpointId"]
    for value in ("abc", "-1", "9" * 20, "1.5", "０", "99999"):
        reply = stack.http("POST", f"/webhooks/{hook}/deliveries/{value}/redeliver")
        assert (reply.status, reply.body["error"]["code"]) == (404, "not_found"), (value, reply.body)


@pytest.mark.parametrize(
    ("path", "query", "code"),
    [
        ("/books/{bookId}", {"chapters_after": "-1"}, "invalid_chapters_after"),
        ("/books/{bookId}", {"chapters_after": "1e3"}, "invalid_chapters_after"),
        ("/books/{bookId}/exports", {"limit": "0"}, "invalid_limit"),
        ("/books/{bookId}/exports", {"limit": "abc"}, "invalid_limit"),
        ("/books/{bookId}/exports", {"cursor": "!!!"}, "invalid_cursor"),
        ("/books/{bookId}/exports", {"cursor": "eyJhZnRlciI6IDF9"}, "invalid_cursor"),
        ("/webhooks", {"limit": "1000"}, "invalid_limit"),
        ("/webhooks", {"cursor": "%00"}, "invalid_cursor"),
        ("/webhooks", {"cursor": "abcdefgh"}, "invalid_cursor"),
        ("/webhooks/{endpointId}/deliveries", {"state": "done"}, None),
        ("/webhooks/{endpointId}/deliveries", {"cursor": "x"}, "invalid_cursor"),
        ("/events", {"after": "-1"}, "invalid_cursor"),
        ("/events", {"after": "1" * 13}, "invalid_cursor"),
        ("/events", {"after": "99"}, "invalid_cursor"),
        ("/events", {"limit": "-5"}, "invalid_limit"),
        ("/batches", {"limit": "1.5"}, "invalid_limit"),
        ("/batches", {"cursor": "bm90IGpzb24"}, "invalid_cursor"),
    ],
)
def test_every_malformed_query_value_is_a_400_naming_it(
    stack: Stack, everything: dict[str, str], path: str, query: dict[str, str], code: str | None
) -> None:
    for name, value in everything.items():
        path = path.replace("{" + name + "}", value)
    reply = stack.http("GET", path, query=query)
    assert reply.status == 400, (path, query, reply.body)
    if code is not None:
        assert reply.body["error"]["code"] == code, reply.body


@pytest.mark.parametrize(
    ("header", "value", "code"),
    [
        ("Idempotency-Key", "x" * 256, "invalid_idempotency_key"),
        ("Idempotency-Key", "tab\there", "invalid_idempotency_key"),
        ("Idempotency-Key", "ключ", "invalid_idempotency_key"),
        ("If-Match", "*x", "invalid_if_match"),
        ("If-Match", '"99999999999999"', "invalid_if_match"),
    ],
)
def test_every_malformed_header_is_a_400_that_writes_nothing(
    stack: Stack, everything: dict[str, str], header: str, value: str, code: str
) -> None:
    book = everything["bookId"]
    before = _table(stack)
    if header == "Idempotency-Key":
        calls = [
            ("POST", "/books", {"title": "T", "manuscript": "# M\n"}),
            ("POST", f"/books/{book}/exports", {"format": "html"}),
            ("POST", "/batches", {"exports": [{"book_id": book, "format": "html"}]}),
        ]
    else:
        calls = [
            ("PATCH", f"/books/{book}", {"title": "T"}),
            ("PUT", f"/books/{book}/manuscript", {"manuscript": "# M\n"}),
            ("DELETE", f"/books/{book}/assets/a.png", None),
        ]
    for method, path, body in calls:
        reply = stack.http(method, path, body=body, headers={header: value})
        assert (reply.status, reply.body["error"]["code"]) == (400, code), (method, path, reply.body)
    assert _table(stack) == before


# ---- the hunt: nothing that has ended is rewritten ------------------------------------------------------


def _export_row(stack: Stack, export_id: str) -> Any:
    return next(e for e in stack.store.exports.all_exports() if e.id == export_id)


def _end_export(stack: Stack, book: str, how: str) -> tuple[str, Any]:
    """An export ended `how`, and the claim its attempt held (None where no attempt claimed it)."""
    from bindery.states import FailureCode
    from bindery.storage.types import Claimed

    export_id = stack.submit(book).body["id"]
    if how == "queue_timeout":
        stack.clock.advance(stack.exports.settings.queue_grace_seconds + 1)
        assert stack.sweep()["failed"] == 1
        return export_id, None
    if how == "cancelled":
        assert stack.http("DELETE", f"/books/{book}/exports/{export_id}").status == 204
        return export_id, None
    claim = stack.store.claims.claim_build(book, export_id, f"artifacts/{book}/{export_id}/1", stack.clock())
    assert isinstance(claim, Claimed)
    held = claim.export
    if how == "ready":  # attempt 1 gives its lease back, and attempt 2 builds it: attempt 1 is a late one
        stack.store.claims.release_claim(held, stack.clock())
        stack.build(book, export_id)
    if how == "failed":
        assert stack.store.claims.fail_export(held, FailureCode.RENDER_FAILED, stack.clock())
    if how == "worker_lost":
        settings = stack.exports.settings
        stack.clock.advance(settings.lease_seconds + settings.retry_grace_seconds + 1)
        assert stack.sweep()["failed"] == 1
    return export_id, held


ENDED_FIELDS = ("state", "finished_at", "failure_code", "attempt", "size_bytes", "sha256", "built_revision")


@pytest.mark.parametrize("how", ["ready", "failed", "worker_lost", "queue_timeout", "cancelled"])
def test_an_ended_export_keeps_its_ending_under_every_later_write(stack: Stack, how: str) -> None:
    """Every write an export can meet, tried after it has ended: a redelivered build, a late attempt's
    finish, fail, cancel, progress and lease release, the caller's cancel, the sweep and the GC. Only ready
    may move on, to expired (a link ends), keeping the time it finished."""
    from bindery.states import FailureCode
    from bindery.storage.types import ClaimRefused

    book = stack.create_book()
    export_id, held = _end_export(stack, book, how)
    first = _export_row(stack, export_id)
    ended = {f: getattr(first, f) for f in ENDED_FIELDS}
    assert ended["state"].value != "pending"

    stack.clock.advance(1)
    late = held if held is not None else first
    stack.build(book, export_id)  # a redelivered build message
    assert isinstance(
        stack.store.claims.claim_build(book, export_id, "artifacts/late", stack.clock()), ClaimRefused
    )
    stack.store.claims.finish_export(
        late, path="artifacts/late", size_bytes=1, built_revision=1, now=stack.clock()
    )
    stack.store.claims.fail_export(late, FailureCode.RENDER_FAILED, stack.clock())
    stack.store.claims.cancel_attempt(late, stack.clock())
    stack.store.claims.record_progress(late, 1, 2)
    stack.store.claims.release_claim(late, stack.clock())
    stack.http("DELETE", f"/books/{book}/exports/{export_id}")
    stack.clock.advance(stack.exports.settings.link_ttl_seconds + 1)
    stack.sweep()
    stack.gc()

    after = _export_row(stack, export_id)
    now = {f: getattr(after, f) for f in ENDED_FIELDS}
    if how == "ready":
        assert now["state"].value == "expired"  # the one transition an ending may have
        now["state"] = ended["state"]
    assert now == ended


BATCH_FIELDS = ("status", "finished_at", "targets_done", "n_ready", "n_failed", "n_cancelled", "bytes")


@pytest.mark.parametrize("how", ["done", "partial", "failed", "cancelled"])
def test_an_ended_batch_keeps_its_ending_under_every_later_write(stack: Stack, how: str) -> None:
    """A batch ended each way it can, then every write it can meet: its targets' redelivered builds, a
    settle (the worker's and the sweep's), the caller's cancel twice, the sweep and the GC. Only `revoked_at`
    may be written after, once, and only where there were links to end."""
    good, empty = stack.create_book(), stack.create_book("")
    books = {"done": [good, good], "partial": [good, empty], "failed": [empty], "cancelled": [good, good]}[
        how
    ]
    made = stack.http(
        "POST",
        "/batches",
        body={
            "exports": [
                {"book_id": b, "format": f} for b, f in zip(books, ["html", "markdown"], strict=False)
            ]
        },
    ).body
    if how == "cancelled":
        stack.build(books[0], made["targets"][0]["export_id"])
        assert stack.http("DELETE", f"/batches/{made['id']}").status == 204
    else:
        for target in made["targets"]:
            stack.build(target["book_id"], target["export_id"])
    first = next(b for b in stack.store.batches.all_batches() if b.id == made["id"])
    assert first.status == how

    stack.clock.advance(1)
    for target in made["targets"]:
        stack.build(target["book_id"], target["export_id"])
    assert settle_batch(stack.store.batches, "user-alice", made["id"], stack.clock()) is None
    for _ in range(2):
        assert stack.http("DELETE", f"/batches/{made['id']}").status == 204
        stack.clock.advance(120)
    stack.sweep()
    stack.gc()

    after = next(b for b in stack.store.batches.all_batches() if b.id == made["id"])
    assert {f: getattr(after, f) for f in BATCH_FIELDS} == {f: getattr(first, f) for f in BATCH_FIELDS}
    if how in ("done", "partial"):
        assert first.finished_at is not None
        assert after.revoked_at == first.finished_at + 1  # the first cancel's time: the second wrote none
    else:
        assert after.revoked_at is None


def test_a_batch_of_fifty_reads_and_its_cancel_ends_every_link_before_its_answer(stack: Stack) -> None:
    """A standard caller's largest batch (50 targets): a read is not one transaction of 52 items, which
    moto (as some engines) refuses past 25, so it reads; and a cancel of it, done, ends every link."""
    book = stack.create_book()
    made = stack.http(
        "POST", "/batches", body={"exports": [{"book_id": book, "format": "markdown"}] * 50}
    ).body
    assert _batch(stack, made["id"])["targets_total"] == 50
    for target in made["targets"]:
        stack.build(book, target["export_id"])
    done = _batch(stack, made["id"])
    stack.build(made["id"], done["bundle"]["id"])
    assert (done["status"], done["targets_done"], done["ended"]["ready"]) == ("done", 50, 50)

    assert stack.http("DELETE", f"/batches/{made['id']}").status == 204

    after = _batch(stack, made["id"])
    assert after["status"] == "done" and after["revoked_at"] is not None
    assert after["counts"]["expired"] == 50 and after["bundle"]["state"] == "expired"
    assert stack.objects.keys("artifacts/") == []


def test_metadata_that_is_not_an_object_names_the_field_metadata(stack: Stack) -> None:
    book = stack.create_book()
    reply = stack.http("PATCH", f"/books/{book}", body={"metadata": []})
    assert (reply.status, reply.body["error"]["code"], reply.body["error"]["field"]) == (
        422,
        "invalid_metadata",
        "metadata",
    )
