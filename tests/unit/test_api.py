"""The HTTP API's rules: bad input names its problem and writes nothing; a stranger sees a missing item."""

from __future__ import annotations

from typing import Any

import pytest

from bindery.storage.table import ExportItem
from tests.calls import recording
from tests.unit.conftest import Stack


def _table(stack: Stack) -> list[dict[str, Any]]:
    return sorted(
        (item.attribute_values for item in stack.store.models.item.scan()), key=lambda v: (v["pk"], v["sk"])
    )


def test_create_book_returns_the_book_with_chapters_cut_at_level_one_headings(stack: Stack) -> None:
    manuscript = (
        "Prologue text.\n\n# One\n\n## Not a cut\n\ntext\n\n> # Quoted, not a cut\n\nTwo\n===\n\nmore\n"
    )
    reply = stack.http("POST", "/books", body={"title": "Cuts", "manuscript": manuscript})

    assert reply.status == 201
    assert reply.headers["Location"] == f"/books/{reply.body['id']}"
    assert reply.body["revision"] == 1
    assert [c["title"] for c in reply.body["chapters"]] == ["Opening", "One", "Two"]
    assert stack.http("GET", f"/books/{reply.body['id']}").body == reply.body


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        ("{", 400, "invalid_json"),
        ('{"format": "html"', 400, "invalid_json"),
        ("[]", 400, "invalid_json"),
        ('"html"', 400, "invalid_json"),
        ("{}", 400, "missing_field"),
        ('{"format": 7}', 400, "invalid_format"),
        ('{"format": null}', 400, "invalid_format"),
        ('{"format": "html", "owner": "user-mallory"}', 400, "unknown_field"),
        ('{"format": "odt"}', 422, "unknown_format"),
        ('{"format": "' + "x" * 20_000 + '"}', 413, "body_too_large"),
    ],
)
def test_a_bad_export_request_is_refused_with_its_reason_and_writes_nothing(
    stack: Stack, raw: str, status: int, code: str
) -> None:
    book = stack.create_book()
    before = _table(stack)
    with recording(stack.store.client, stack.objects.client) as calls:
        reply = stack.http("POST", f"/books/{book}/exports", raw_body=raw)
    assert (reply.status, reply.body["error"]["code"]) == (status, code)
    assert calls.writes() == []
    assert _table(stack) == before


def test_an_unknown_format_is_answered_with_the_known_ones(stack: Stack) -> None:
    book = stack.create_book()
    reply = stack.submit(book, "odt")
    assert reply.body["error"]["known"] == ["docx", "epub", "html", "markdown", "pdf"]
    assert "odt" in reply.body["error"]["message"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"title": "t"}, "missing_field"),
        ({"title": 1, "manuscript": "x"}, "invalid_field"),
        ({"title": "  ", "manuscript": "x"}, "invalid_title"),
        ({"title": "S\u0000", "manuscript": "x"}, "invalid_title"),
        ({"title": "S\u0007\u001b", "manuscript": "x"}, "invalid_title"),
        ({"title": "two\nlines", "manuscript": "x"}, "invalid_title"),
        ({"title": "t", "manuscript": "x", "owner": "someone-else"}, "unknown_field"),
    ],
)
def test_a_bad_book_is_refused_and_writes_nothing(stack: Stack, body: dict[str, Any], code: str) -> None:
    with recording(stack.store.client, stack.objects.client) as calls:
        reply = stack.http("POST", "/books", body=body)
    assert (reply.status, reply.body["error"]["code"]) == (400, code)
    assert calls.writes() == []


def test_a_manuscript_over_the_limit_is_413_and_writes_nothing(stack: Stack) -> None:
    big = "# A\n" + "x" * (stack.exports.settings.max_manuscript_bytes + 1)
    with recording(stack.store.client, stack.objects.client) as calls:
        reply = stack.http("POST", "/books", body={"title": "big", "manuscript": big})
    assert (reply.status, reply.body["error"]["code"]) == (413, "manuscript_too_large")
    assert calls.writes() == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/books"),
        ("GET", "/books/0123456789abcdef0123"),
        ("POST", "/books/0123456789abcdef0123/exports"),
        ("GET", "/books/0123456789abcdef0123/exports"),
        ("GET", "/books/0123456789abcdef0123/exports/0123456789abcdef01234"),
        ("DELETE", "/books/0123456789abcdef0123/exports/0123456789abcdef01234"),
    ],
)
def test_no_caller_is_401(stack: Stack, method: str, path: str) -> None:
    reply = stack.http(method, path, caller=None, body={"format": "html"})
    assert (reply.status, reply.body["error"]["code"]) == (401, "unauthorized")


def test_a_stranger_gets_exactly_the_answer_a_missing_item_gets(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    missing_book, missing_export = "ffffffffffffffffffff", "fffffffffffffffffffff"
    routes = [
        ("GET", "/books/{b}", None),
        ("GET", "/books/{b}/exports", None),
        ("GET", "/books/{b}/exports/{e}", None),
        ("POST", "/books/{b}/exports", {"format": "html"}),
        ("DELETE", "/books/{b}/exports/{e}", None),
    ]
    before = _table(stack)
    for method, template, body in routes:
        theirs = stack.http(method, template.format(b=book, e=export_id), caller="user-mallory", body=body)
        missing = stack.http(
            method, template.format(b=missing_book, e=missing_export), caller="user-mallory", body=body
        )
        assert theirs.status == 404, (method, template)
        assert (theirs.status, theirs.body) == (missing.status, missing.body), (method, template)
    assert _table(stack) == before
    assert stack.poll(book, export_id).body["state"] == "pending"  # the owner still sees it


@pytest.mark.parametrize("bad_id", ["..%2F..%2Fetc", "%E2%98%83", "A" * 41, "UPPERCASE0000"])
def test_ids_that_could_never_be_issued_read_as_missing(stack: Stack, bad_id: str) -> None:
    book = stack.create_book()
    assert stack.http("GET", f"/books/{bad_id}").status == 404
    assert stack.http("GET", f"/books/{book}/exports/{bad_id}").status == 404


def test_same_idempotency_key_and_request_returns_the_same_export_and_writes_no_new_row(stack: Stack) -> None:
    book = stack.create_book()
    first = stack.submit(book, key="order-1")
    again = stack.submit(book, key="order-1")

    assert (first.status, again.status) == (202, 202)
    assert again.body == first.body
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(list(stack.store.models.export.scan(ExportItem.sk.startswith("EXPORT#")))) == 1


def test_the_same_key_for_a_different_request_is_422(stack: Stack) -> None:
    book = stack.create_book()
    stack.submit(book, "html", key="order-2")
    reply = stack.submit(book, "markdown", key="order-2")
    assert (reply.status, reply.body["error"]["code"]) == (422, "idempotency_key_reused")


def test_idempotency_keys_are_scoped_to_their_caller(stack: Stack) -> None:
    alice_book = stack.create_book(caller="user-alice")
    bob_book = stack.create_book(caller="user-bob")
    a = stack.submit(alice_book, caller="user-alice", key="shared-key")
    b = stack.submit(bob_book, caller="user-bob", key="shared-key")
    assert (a.status, b.status) == (202, 202) and a.body["id"] != b.body["id"]


@pytest.mark.parametrize("key", ["x" * 256, "bad\x01key", "tab\tkey", "snow☃"])
def test_a_malformed_idempotency_key_is_400(stack: Stack, key: str) -> None:
    book = stack.create_book()
    reply = stack.submit(book, key=key)
    assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_idempotency_key")


def test_over_the_live_cap_is_429_with_retry_after_and_the_live_ids(stack: Stack) -> None:
    book = stack.create_book()
    cap = stack.exports.settings.max_live_exports
    live = sorted(stack.submit(book).body["id"] for _ in range(cap))

    reply = stack.submit(book)

    assert reply.status == 429
    assert reply.headers["Retry-After"].isdigit()
    assert reply.body["error"]["code"] == "too_many_live_exports"
    assert reply.body["error"]["live_exports"] == live
    assert stack.store.exports.live_ids("user-alice") == set(live)


def test_a_replay_is_answered_even_at_the_cap(stack: Stack) -> None:
    book = stack.create_book()
    first = stack.submit(book, key="before-cap")
    for _ in range(stack.exports.settings.max_live_exports - 1):
        stack.submit(book)
    assert stack.submit(book, key="before-cap").body["id"] == first.body["id"]


def test_exports_list_newest_first_in_pages_with_an_opaque_cursor(stack: Stack) -> None:
    book = stack.create_book()
    ids = []
    for _ in range(5):
        ids.append(stack.submit(book).body["id"])
        stack.clock.advance(1)
    seen: list[str] = []
    cursor = None
    while True:
        query = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = stack.http("GET", f"/books/{book}/exports", query=query).body
        seen += [e["id"] for e in page["exports"]]
        assert all(e["book_revision"] == 1 for e in page["exports"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"limit": "0"}, "invalid_limit"),
        ({"limit": "-1"}, "invalid_limit"),
        ({"limit": "x"}, "invalid_limit"),
        ({"limit": "101"}, "invalid_limit"),
        # Read by int() these were numbers (an outside test's): a limit is ASCII digits alone.
        ({"limit": "1_0"}, "invalid_limit"),
        ({"limit": "+1"}, "invalid_limit"),
        ({"limit": " 1"}, "invalid_limit"),
        ({"limit": "1\n"}, "invalid_limit"),
        ({"limit": "\uff11"}, "invalid_limit"),
        ({"cursor": "garbage!"}, "invalid_cursor"),
        ({"cursor": "eyJhZnRlciI6IC4uLn0"}, "invalid_cursor"),
    ],
)
def test_bad_page_parameters_are_400(stack: Stack, query: dict[str, str], code: str) -> None:
    book = stack.create_book()
    reply = stack.http("GET", f"/books/{book}/exports", query=query)
    assert (reply.status, reply.body["error"]["code"]) == (400, code)


def test_an_unknown_route_answers_like_a_missing_item(stack: Stack) -> None:
    assert stack.http("GET", "/nope").body == stack.http("GET", "/books/ffffffffffffffffffff").body
