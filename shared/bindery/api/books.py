"""The books' routes: a book, its manuscript, its uploads and its image assets."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from bindery import errors
from bindery.api.http import (
    INLINE_BODY_LIMIT,
    SMALL_BODY_LIMIT,
    answer,
    caller,
    no_content,
    read_body,
    reads,
    services,
    writes,
)
from bindery.library import book_summary
from bindery.storage import Book, Chapter

# A book's answer lists at most this many chapters (titles are at most 500 characters): far under Lambda's
# 6 MB answer. `chapters_next` names where the next page starts.
CHAPTERS_PAGE = 1_000


def _manuscript_too_large() -> errors.PayloadTooLarge:
    return errors.PayloadTooLarge(
        f"a manuscript sent inline may be at most {INLINE_BODY_LIMIT:,} bytes of JSON; upload a larger one "
        'with POST /books/{bookId}/uploads and then PUT /books/{bookId}/manuscript with {"upload_id": ...}',
        code="manuscript_too_large",
        limit=INLINE_BODY_LIMIT,
    )


def book_view(book: Book, chapters: list[Chapter], after: int, page_size: int) -> dict[str, Any]:
    """A book as its owner reads it: its summary, its assets, and its chapters after `after`, `page_size`
    of them at most."""

    page = [c for c in chapters if c.ordinal > after][:page_size]
    more = bool(page) and page[-1].ordinal < chapters[-1].ordinal
    return {
        **book_summary(book),
        "assets": [
            {
                "name": a.name,
                "content_type": a.content_type,
                "width": a.width,
                "height": a.height,
                "size_bytes": a.size_bytes,
            }
            for a in book.assets
        ],
        "chapters": [{"ordinal": c.ordinal, "title": c.title, "size_bytes": c.size_bytes} for c in page],
        "chapters_next": page[-1].ordinal if more else None,
    }


def _book_reply(
    status: int, book: Book, chapters: list[Chapter], headers: dict[str, str] | None = None, after: int = 0
) -> Response:
    # The revision is the book's ETag: what If-Match on a manuscript replacement compares against.
    view = book_view(book, chapters, after, CHAPTERS_PAGE)
    return answer(status, view, {"ETag": f'"{book.revision}"', **(headers or {})})


@writes.post("/books")
def create_book() -> Response:
    who = caller(writes)
    body = read_body(
        writes,
        INLINE_BODY_LIMIT,
        {"title": str, "manuscript": str, "metadata": object},
        optional=("title", "metadata"),  # (a title may come from the manuscript's front matter)
        too_large=_manuscript_too_large,
    )
    key = writes.current_event.headers.get("idempotency-key")
    book, chapters, created = services(writes).books.create_book(
        who, body.get("title"), body["manuscript"], key, body.get("metadata")
    )
    headers = {"Location": f"/books/{book.id}"}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return _book_reply(201 if created else 200, book, chapters, headers)


@writes.patch("/books/<book_id>")
def edit_book(book_id: str) -> Response:
    who = caller(writes)
    books = services(writes).books
    body = read_body(
        writes, SMALL_BODY_LIMIT, {"title": str, "metadata": object}, optional=("title", "metadata")
    )
    if not body:
        raise errors.BadRequest("send title, metadata, or both", code="missing_field")
    if_match = writes.current_event.headers.get("if-match")
    book = books.edit_book(who, book_id, if_match, body.get("title"), body.get("metadata"))
    return _book_reply(200, book, books.chapters(book))


@writes.post("/books/<book_id>/assets")
def create_asset(book_id: str) -> Response:
    who = caller(writes)
    body = read_body(writes, SMALL_BODY_LIMIT, {"name": str, "content_type": str, "size": object})
    assets = services(writes).assets
    upload = assets.create_asset_upload(who, book_id, body["name"], body["content_type"], body["size"])
    return answer(201, upload)


# An asset's name is a path (images/coast.png): the route takes the rest of the path, as API Gateway's
# greedy {name+} does, and a client may send its slashes as they are or as %2F.
@writes.put("/books/<book_id>/assets/.+")
def adopt_asset(book_id: str) -> Response:
    who = caller(writes)
    books, assets = services(writes).books, services(writes).assets
    body = read_body(writes, SMALL_BODY_LIMIT, {"upload_id": str})
    if_match = writes.current_event.headers.get("if-match")
    book = assets.adopt_asset(who, book_id, _asset_in_path(writes), body["upload_id"], if_match)
    return _book_reply(200, book, books.chapters(book))


@writes.delete("/books/<book_id>/assets/.+")
def delete_asset(book_id: str) -> Response:
    who = caller(writes)
    if_match = writes.current_event.headers.get("if-match")
    services(writes).assets.delete_asset(who, book_id, _asset_in_path(writes), if_match)
    return no_content()


def _asset_in_path(app: APIGatewayHttpResolver) -> str:
    return unquote(app.current_event.path.split("/assets/", 1)[1])


@writes.put("/books/<book_id>/manuscript")
def replace_manuscript(book_id: str) -> Response:
    who = caller(writes)
    body = read_body(
        writes,
        INLINE_BODY_LIMIT,
        {"manuscript": str, "upload_id": str},
        one_of=True,
        too_large=_manuscript_too_large,
    )
    book, chapters = services(writes).books.replace_manuscript(
        who,
        book_id,
        writes.current_event.headers.get("if-match"),
        manuscript=body.get("manuscript"),
        upload_id=body.get("upload_id"),
    )
    return _book_reply(200, book, chapters)


@writes.post("/books/<book_id>/uploads")
def create_upload(book_id: str) -> Response:
    who = caller(writes)
    return answer(201, services(writes).books.create_upload(who, book_id))


@writes.delete("/books/<book_id>")
def delete_book(book_id: str) -> Response:
    who = caller(writes)
    services(writes).books.delete_book(who, book_id)
    return no_content()


@reads.get("/books")
def list_books() -> Response:
    who = caller(reads)
    params = reads.current_event.query_string_parameters or {}
    return answer(200, services(reads).books.list_books(who, params.get("limit"), params.get("cursor")))


@reads.get("/books/<book_id>")
def get_book(book_id: str) -> Response:
    who = caller(reads)
    after = (reads.current_event.query_string_parameters or {}).get("chapters_after", "0")
    if not (after.isascii() and after.isdigit()) or len(after) > 9:  # isdigit alone takes "²"
        raise errors.BadRequest(
            "chapters_after must be a chapter's ordinal (a whole number), as chapters_next gives it",
            code="invalid_chapters_after",
        )
    book, chapters = services(reads).books.get_book(who, book_id)
    return _book_reply(200, book, chapters, after=int(after))
