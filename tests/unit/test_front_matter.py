"""A manuscript's own metadata through the API (issue 48): a YAML metadata block or a `%` title block at its
top is the book's title and metadata, never a chapter; what the request says wins; a block that is not
YAML, or a value of the wrong kind, is refused naming its line, and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

from bindery.front_matter import MAX_BYTES, read, split
from bindery.objects import upload_key
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export

YAML_BOOK = """---
title: The Harbour Light
author: [M. Keeper, A. Pilot]
lang: en-GB
subject: lighthouses
date: 2026-06-28
rights: CC BY 4.0
toc: true
---
A word before the first chapter.

# The Breakwater

The lamp was lit at dusk.
"""


def _create(stack: Stack, **body: Any) -> Any:
    return stack.http("POST", "/books", body=body)


def _given(metadata: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in metadata.items() if value is not None}


def test_a_yaml_block_is_the_books_title_and_metadata_and_no_chapter(stack: Stack) -> None:
    reply = _create(stack, manuscript=YAML_BOOK)
    assert reply.status == 201, reply.body
    book = reply.body
    assert book["title"] == "The Harbour Light"
    assert _given(book["metadata"]) == {
        "authors": ["M. Keeper", "A. Pilot"],
        "language": "en-GB",
        "subjects": ["lighthouses"],
        "published": "2026-06-28",
        "rights": "CC BY 4.0",
    }
    assert [c["title"] for c in book["chapters"]] == ["Opening", "The Breakwater"]
    _, html = export(stack, book["id"], "html")
    page = html.decode()
    assert "A word before the first chapter." in page and "The lamp was lit" in page
    assert "title:" not in page and "toc: true" not in page and "M. Keeper" in page  # (the title page's)
    _, markdown = export(stack, book["id"], "markdown")
    assert markdown.decode() == YAML_BOOK  # the markdown export is the manuscript, front matter and all


def test_what_the_request_says_wins_field_by_field(stack: Stack) -> None:
    reply = _create(stack, title="Mine", manuscript=YAML_BOOK, metadata={"language": "fr", "rights": None})
    assert reply.status == 201, reply.body
    assert reply.body["title"] == "Mine"
    metadata = reply.body["metadata"]
    assert metadata["language"] == "fr" and metadata["rights"] is None
    assert metadata["authors"] == ["M. Keeper", "A. Pilot"]


def test_a_percent_title_block_gives_title_authors_and_a_day(stack: Stack) -> None:
    manuscript = "% The Harbour Light\n% M. Keeper;\n  A. Pilot\n% 2026-06-28\n\n# One\n\ntext\n"
    reply = _create(stack, manuscript=manuscript)
    assert reply.status == 201, reply.body
    assert reply.body["title"] == "The Harbour Light"
    metadata = reply.body["metadata"]
    assert (metadata["authors"], metadata["published"]) == (["M. Keeper", "A. Pilot"], "2026-06-28")
    assert [c["title"] for c in reply.body["chapters"]] == ["One"]


def test_without_a_title_anywhere_the_book_is_refused_naming_the_field(stack: Stack) -> None:
    reply = _create(stack, manuscript="---\nauthor: A\n---\n# One\n")
    assert (reply.status, reply.body["error"]["code"], reply.body["error"].get("field")) == (
        400,
        "missing_field",
        "title",
    )
    assert stack.http("GET", "/books").body["books"] == []


@pytest.mark.parametrize(
    ("manuscript", "line", "where", "said"),
    [
        ("---\ntitle: [unclosed\n---\n# One\n", 2, "front matter", "not YAML"),
        ("---\ntitle: T\nauthor: 12\n---\n# One\n", 3, "author", "a string or a list"),
        ("---\ntitle: T\nlang: no\n---\n# One\n", 3, "lang", "not bool: quote it"),
        ("---\ntitle: T\ndate: 2026-13-45\n---\n# One\n", 3, "date", "no such value"),
        ("---\ntitle: T\ntitle: U\n---\n# One\n", 3, "title", "given twice (first on line 2)"),
        ("---\n- a list\n---\n# One\n", 2, "front matter", "key: value"),
    ],
)
def test_a_front_matter_mistake_is_refused_naming_its_line_and_nothing_is_written(
    stack: Stack, manuscript: str, line: int, where: str, said: str
) -> None:
    reply = _create(stack, manuscript=manuscript)
    assert (reply.status, reply.body["error"]["code"]) == (422, "invalid_front_matter"), reply.body
    assert (reply.body["error"]["line"], reply.body["error"]["field"]) == (line, where)
    assert (
        said in reply.body["error"]["message"] and f"line {line}: {where}" in reply.body["error"]["message"]
    )
    assert stack.http("GET", "/books").body["books"] == []
    assert stack.objects.keys("books/") == []


def test_a_front_matter_value_the_metadata_refuses_is_named_as_the_metadata_field(stack: Stack) -> None:
    reply = _create(stack, manuscript="---\ntitle: T\nidentifier: 978-0-00-000000-1\n---\n# One\n")
    assert (reply.status, reply.body["error"]["code"], reply.body["error"]["field"]) == (
        422,
        "invalid_metadata",
        "metadata.identifier",
    )
    assert stack.objects.keys("books/") == []


def test_a_new_manuscript_with_a_front_matter_changes_title_and_metadata_in_the_same_revision(
    stack: Stack,
) -> None:
    book = stack.create_book()
    stack.http("PATCH", f"/books/{book}", body={"metadata": {"publisher": "Quay Press", "language": "de"}})
    reply = stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": YAML_BOOK})
    assert reply.status == 200, reply.body
    assert (reply.body["revision"], reply.body["title"]) == (3, "The Harbour Light")
    metadata = reply.body["metadata"]
    assert metadata["language"] == "en-GB" and metadata["publisher"] == "Quay Press"  # a merge patch
    assert stack.http("GET", f"/books/{book}").body["metadata"] == metadata
    plain = stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "# Only\n\ntext\n"})
    assert (plain.body["revision"], plain.body["title"], plain.body["metadata"]) == (
        4,
        "The Harbour Light",
        metadata,
    )


def test_an_uploaded_manuscripts_front_matter_is_read_as_it_streams(stack: Stack) -> None:
    book = stack.create_book()
    upload_id = stack.http("POST", f"/books/{book}/uploads").body["upload_id"]
    stack.objects.put_bytes(upload_key(book, upload_id), YAML_BOOK.replace("\n", "\r\n").encode())
    reply = stack.http("PUT", f"/books/{book}/manuscript", body={"upload_id": upload_id})
    assert reply.status == 200, reply.body
    assert reply.body["title"] == "The Harbour Light" and reply.body["metadata"]["language"] == "en-GB"
    assert [c["title"] for c in reply.body["chapters"]] == ["Opening", "The Breakwater"]


@pytest.mark.parametrize(
    ("text", "front"),
    [
        ("---\n\n# One\n", False),  # `---` then a blank line: a thematic break
        ("---\ntitle: never closed\n# One\n", False),
        ("# One\n---\ntitle: x\n---\n", False),  # only at the top
        ("---\ntitle: x\n...\n# One\n", True),
        ("%not a space\n# One\n", True),
    ],
)
def test_a_front_matter_is_only_what_pandoc_reads_as_one(text: str, front: bool) -> None:
    head, replayed = split(iter(text.encode().splitlines(keepends=True)))
    assert bool(head) is front
    assert b"".join(head + replayed) == text.encode()[: len(b"".join(head + replayed))]


def test_a_block_past_the_bound_is_the_books_text_read_in_bounded_lines() -> None:
    lines = [b"---\n"] + [b"k: v\n"] * (MAX_BYTES // 5 + 10) + [b"---\n"]
    head, replayed = split(iter(lines))
    assert head == [] and len(b"".join(replayed)) <= MAX_BYTES + 10
    assert read(b"% T\n% \n% June 2026\n").metadata == {}  # pandoc's free-text date is not a day: left out


def test_yaml_nested_past_the_readers_depth_is_refused_not_a_server_error(stack: Stack) -> None:
    reply = _create(stack, manuscript="---\ntitle: D\nfoo: " + "[" * 2000 + "]" * 2000 + "\n---\n# A\n")
    assert (reply.status, reply.body["error"]["code"]) == (422, "invalid_front_matter"), reply.body
    assert "nested too deep" in reply.body["error"]["message"]
    assert stack.http("GET", "/books").body["books"] == []
