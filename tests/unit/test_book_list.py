"""GET /books: a caller's shelf, newest first, a page at a time, and never anyone else's."""

from __future__ import annotations

import pytest

from tests.invariants import violations
from tests.unit.conftest import Stack
from tests.unit.test_lost_answers import answer_lost
from tests.unit.test_openapi import _conforms


def _ids(stack: Stack, caller: str = "user-alice", **query: str) -> tuple[list[str], str | None]:
    reply = stack.http("GET", "/books", caller=caller, query=query or None)
    assert reply.status == 200, reply.body
    return [b["id"] for b in reply.body["books"]], reply.body["next_cursor"]


def test_the_list_shows_each_of_the_callers_books_newest_first_and_no_strangers(stack: Stack) -> None:
    made = []
    for n in range(3):
        made.append(stack.create_book(title=f"Book {n}"))
        stack.clock.advance(1)
    stack.create_book(caller="user-bob")

    stack.http("PATCH", f"/books/{made[0]}", body={"metadata": {"authors": ["A. Writer"], "language": "de"}})
    reply = stack.http("GET", "/books")

    _conforms("GET /books", reply)
    assert [b["id"] for b in reply.body["books"]] == made[::-1]
    first = reply.body["books"][-1]
    assert (first["title"], first["revision"], first["chapters_total"], first["assets_total"]) == (
        "Book 0",
        2,
        2,
        0,
    )
    assert first["metadata"]["authors"] == ["A. Writer"]
    assert reply.body["next_cursor"] is None


def test_pages_follow_their_cursor_to_every_book_once(stack: Stack) -> None:
    made = []
    for _ in range(5):
        made.append(stack.create_book())
        stack.clock.advance(0.001)  # a millisecond apart: the shelf's order is the creation's

    first, cursor = _ids(stack, limit="2")
    assert cursor is not None
    second, cursor = _ids(stack, limit="2", cursor=cursor)
    assert cursor is not None
    third, cursor = _ids(stack, limit="2", cursor=cursor)

    assert first + second + third == made[::-1]
    assert cursor is None


def test_an_edit_shows_in_the_list_and_a_deleted_book_leaves_it(stack: Stack) -> None:
    kept, gone = stack.create_book(title="Kept"), stack.create_book(title="Gone")
    stack.http("PATCH", f"/books/{kept}", body={"title": "Kept, renamed"})
    stack.http("DELETE", f"/books/{gone}")

    books = stack.http("GET", "/books").body["books"]

    assert [(b["id"], b["title"], b["revision"]) for b in books] == [(kept, "Kept, renamed", 2)]
    assert violations(stack.store, stack.objects, after_gc=False) == []


def test_a_create_whose_answer_was_lost_is_listed_once(stack: Stack) -> None:
    with answer_lost(stack.store.client, "TransactWriteItems"):
        reply = stack.http("POST", "/books", body={"title": "Once", "manuscript": "# A\n\na\n"})

    assert _ids(stack) == ([reply.body["id"]], None)
    assert violations(stack.store, stack.objects, after_gc=False) == []


def test_a_delete_whose_answer_was_lost_leaves_no_shelf_entry(stack: Stack) -> None:
    book = stack.create_book()
    with answer_lost(stack.store.client, "TransactWriteItems"):
        assert stack.http("DELETE", f"/books/{book}").status == 204

    assert _ids(stack) == ([], None)
    assert violations(stack.store, stack.objects, after_gc=False) == []


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"limit": "0"}, "invalid_limit"),
        ({"limit": "101"}, "invalid_limit"),
        ({"cursor": "abcdefgh"}, "invalid_cursor"),
        # A cursor of another list (an export id's) is not a place on a shelf.
        ({"cursor": "eyJhZnRlciI6ICIwMTkzNGU1ZjAwMGFiY2RlZjAxMjM0In0"}, "invalid_cursor"),
    ],
)
def test_a_bad_page_request_is_400_naming_it(stack: Stack, query: dict[str, str], code: str) -> None:
    stack.create_book()
    reply = stack.http("GET", "/books", query=query)
    _conforms("GET /books", reply)
    assert (reply.status, reply.body["error"]["code"]) == (400, code)


def test_listing_costs_one_query_and_one_batch_read_beside_the_rate_limit_read(stack: Stack) -> None:
    for _ in range(3):
        stack.create_book()
    calls: list[str] = []

    def count(model: object, **_: object) -> None:
        calls.append(model.name)  # type: ignore[attr-defined]

    stack.store.client.meta.events.register("before-call", count)
    try:
        assert len(stack.http("GET", "/books").body["books"]) == 3
    finally:
        stack.store.client.meta.events.unregister("before-call", count)
    # The GetItem is every answer's own: the RateLimit fields' read of the caller's live set.
    assert calls == ["Query", "BatchGetItem", "GetItem"]
