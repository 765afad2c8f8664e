"""Input that once ended in a 500, or in an answer larger than Lambda can return, gets a 4xx that names the
problem, and nothing is written. A book's chapters come a page at a time, and every answer says no-store."""

from __future__ import annotations

import json
from typing import Any

import boto3

from bindery.api.books import CHAPTERS_PAGE
from bindery.api.http import INLINE_BODY_LIMIT
from bindery.library import MAX_CHAPTERS
from bindery.objects import upload_key
from tests.unit.conftest import Stack
from tests.unit.test_client import Script, server  # noqa: F401  (the scripted HTTP server fixture)


def _everything(stack: Stack) -> tuple[list[Any], list[str]]:
    """Every item and every key: what 'nothing was written' compares."""
    items = boto3.client("dynamodb").scan(TableName=stack.exports.settings.table, ConsistentRead=True)[
        "Items"
    ]
    return sorted(items, key=json.dumps), sorted(stack.objects.keys(""))


def _code(reply: Any) -> tuple[int, str]:
    return reply.status, reply.body["error"]["code"]


def test_a_lone_surrogate_is_a_400_naming_the_field_and_writes_nothing(stack: Stack) -> None:
    book = stack.create_book()
    before = _everything(stack)
    # json.dumps sends it as the \ud800 escape, as a client would: valid JSON, not valid Unicode.
    for method, path, body in [
        ("POST", "/books", {"title": "t", "manuscript": "# A\n\n\ud800\n"}),
        ("POST", "/books", {"title": "\udfff", "manuscript": "# A\n"}),
        ("PUT", f"/books/{book}/manuscript", {"manuscript": "x\ud800y"}),
    ]:
        reply = stack.http(method, path, body=body)
        assert _code(reply) == (400, "invalid_unicode"), reply.body
        assert next(f for f in body if not _unicode(body[f])) in reply.body["error"]["message"]
    assert _everything(stack) == before


def _unicode(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def test_more_chapters_than_a_book_may_have_is_a_422_naming_the_limit_and_writes_nothing(
    stack: Stack,
) -> None:
    book = stack.create_book()
    before = _everything(stack)
    headings = "".join("# a\n" for _ in range(MAX_CHAPTERS + 1))
    for method, path in [("POST", "/books"), ("PUT", f"/books/{book}/manuscript")]:
        body = {"title": "t", "manuscript": headings} if method == "POST" else {"manuscript": headings}
        reply = stack.http(method, path, body=body)
        assert _code(reply) == (422, "too_many_chapters") and reply.body["error"]["limit"] == MAX_CHAPTERS
    # And through an upload: the staged text is the caller's; no chapter, cut or revision is written.
    upload = stack.http("POST", f"/books/{book}/uploads").body["upload_id"]
    stack.objects.put_bytes(upload_key(book, upload), headings.encode())
    before = _everything(stack)
    reply = stack.http("PUT", f"/books/{book}/manuscript", body={"upload_id": upload})
    assert _code(reply) == (422, "too_many_chapters")
    assert _everything(stack) == before
    # At the limit, the book is made.
    assert stack.http("POST", "/books", body={"title": "t", "manuscript": headings[4:]}).status == 201


def test_an_inline_body_over_the_limit_is_a_413_that_names_the_upload_route_and_writes_nothing(
    stack: Stack,
) -> None:
    before = _everything(stack)
    manuscript = "# A\n" + "\u4e2d" * (INLINE_BODY_LIMIT // 3)  # 3 bytes a character in UTF-8
    reply = stack.http("POST", "/books", body={"title": "t", "manuscript": manuscript})
    assert _code(reply) == (413, "manuscript_too_large")
    assert "POST /books/{bookId}/uploads" in reply.body["error"]["message"]
    assert reply.body["error"]["limit"] == INLINE_BODY_LIMIT
    assert _everything(stack) == before


def test_a_books_chapters_come_a_page_at_a_time(stack: Stack) -> None:
    total = 2 * CHAPTERS_PAGE + 17
    book = stack.create_book("".join(f"# Chapter {n}\n\ntext {n}\n" for n in range(1, total + 1)))
    seen: list[int] = []
    after = 0
    while True:
        page = stack.http("GET", f"/books/{book}", query={"chapters_after": str(after)})
        assert page.status == 200 and page.body["chapters_total"] == total
        assert len(page.body["chapters"]) <= CHAPTERS_PAGE
        seen += [c["ordinal"] for c in page.body["chapters"]]
        if page.body["chapters_next"] is None:
            break
        after = page.body["chapters_next"]
    assert seen == list(range(1, total + 1))
    # The answers that make a book show its first page too.
    made = stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "# only\n"})
    assert (len(made.body["chapters"]), made.body["chapters_next"]) == (1, None)
    for bad in ["-1", "x", "1e3", "9999999999", "\u00b2"]:
        reply = stack.http("GET", f"/books/{book}", query={"chapters_after": bad})
        assert _code(reply) == (400, "invalid_chapters_after"), bad


def test_every_answer_says_no_store_those_with_a_url_included(stack: Stack) -> None:
    book = stack.create_book()
    export = stack.submit(book, "markdown")
    stack.build(book, export.body["id"])
    answers = [
        stack.poll(book, export.body["id"]),  # carries download_url
        stack.http("POST", f"/books/{book}/uploads"),  # carries upload_url
        stack.http("GET", f"/books/{book}"),
        stack.http("GET", "/books/nope"),
        export,
    ]
    assert "download_url" in answers[0].body and "upload_url" in answers[1].body
    for reply in answers:
        assert reply.headers.get("Cache-Control") == "no-store", reply


def test_the_client_sends_utf8_json_not_ascii_escapes_and_follows_chapter_pages(
    server: tuple[str, Script],  # noqa: F811
) -> None:
    from bindery_cli.client import Client

    api, script = server
    page = {"id": "b1", "chapters": [{"ordinal": 1}], "chapters_total": 2}
    script.answers = [
        (201, {}, {**page, "chapters_next": None}),
        (200, {}, {**page, "chapters_next": 1}),
        (200, {}, {**page, "chapters": [{"ordinal": 2}], "chapters_next": None}),
    ]
    client = Client(api, "tok", sleep=lambda _: None)
    client.create_book("t", "\u4e2d" * 1000)
    sent = script.seen[0][3]
    assert len(sent) < 3_100 and "\u4e2d".encode() in sent  # 3 bytes a character, not a 6-byte \\u escape
    book = client.get_book("b1")
    assert [c["ordinal"] for c in book["chapters"]] == [1, 2] and script.seen[-1][
        1
    ] == "/books/b1?chapters_after=1"
