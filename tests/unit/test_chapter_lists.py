"""A cut's chapter list beside its manuscript (bindery/chapter_lists.py): a build reads it in one GET rather
than the cut's chapter items; without it whole, the build reads the items, and builds the same bytes."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from bindery.chapter_lists import chapters_key
from bindery.objects import cut_key
from bindery.piece_cache import CacheCounts
from tests.unit.conftest import Stack, count_pieces

BOOK = "# One\n\nfirst\n\n# Two\n\nsecond, *with* words\n\n# Three\n\nthird\n"


def _artifact(stack: Stack, book: str) -> bytes:
    export_id = stack.submit(book, "html").body["id"]
    assert stack.services.builds.build(book, export_id) == "ready"
    found = stack.store.exports.read_export_for_owner(book, export_id, "user-alice", stack.clock())
    assert found is not None
    return bytes(
        stack.objects.client.get_object(Bucket=stack.objects.settings.bucket, Key=found[0].path)[
            "Body"
        ].read()
    )


def _cut(stack: Stack, book: str) -> str:
    found = stack.store.books.read_book(book)
    assert found is not None
    return found.cut


def _cut_key(stack: Stack, book: str) -> str:
    return cut_key(book, _cut(stack, book))


def test_a_cut_keeps_its_chapter_list_and_a_build_reads_it_not_the_items(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book(BOOK)
    kept = json.loads(stack.objects.read_or_none(chapters_key(book, _cut(stack, book))) or b"null")
    listed = kept["chapters"]
    assert [row[:2] for row in listed] == [[1, "One"], [2, "Two"], [3, "Three"]]
    # and the cut's anchors: every heading's chapter, level, id, words and content as written
    # (bindery.engine.anchors)
    assert kept["anchors"]["headings"] == [
        [1, 1, "one", "One", "One"],
        [2, 1, "two", "Two", "Two"],
        [3, 1, "three", "Three", "Three"],
    ]
    items = [
        (c.ordinal, c.title, c.offset, c.size_bytes)
        for c in stack.store.books.read_chapters(book, _cut(stack, book))
    ]
    assert [tuple(row[:4]) for row in listed] == items
    # and each chapter's SHA-256, which the items do not hold: a build finds its built piece by it
    manuscript = bytes(
        stack.objects.client.get_object(Bucket=stack.objects.settings.bucket, Key=_cut_key(stack, book))[
            "Body"
        ].read()
    )
    assert [row[4] for row in listed] == [
        hashlib.sha256(manuscript[at : at + size]).hexdigest() for _, _, at, size in items
    ]

    def no_items(*_: Any) -> None:
        raise AssertionError("a build with the cut's list read its items")

    monkeypatch.setattr(stack.store.books, "read_chapters", no_items)
    assert b"<em>with</em> words" in _artifact(stack, book)


@pytest.mark.parametrize(
    "list_bytes",
    [
        None,  # a cut made before lists were kept
        b'[[1, "One", 0, 16]',  # cut short
        b'[[1, "One", 0, 16], [2, "Two", 16, 30]]',  # not the cut's (two chapters of three)
        b'[[1, "One", 0], [2, "Two", 16, 30], [3, "Three", 46, 16]]',  # a row of another shape
        b'{"chapters": 3}',
    ],
)
def test_without_a_whole_list_a_build_reads_the_items_and_builds_the_same(
    stack: Stack, list_bytes: bytes | None
) -> None:
    book = stack.create_book(BOOK)
    cold = _artifact(stack, book)
    key = chapters_key(book, _cut(stack, book))
    if list_bytes is None:
        stack.objects.delete([key])
    else:
        stack.objects.put_bytes(key, list_bytes, "application/json")
    assert _artifact(stack, book) == cold


@pytest.mark.parametrize(
    "anchors", [{"version": 0, "headings": []}, {"version": 1, "headings": [[9, 1, "x", "X"]]}]
)
def test_anchors_of_another_version_or_not_the_cuts_are_found_again_and_build_the_same(
    stack: Stack, anchors: dict[str, Any]
) -> None:
    book = stack.create_book(BOOK)
    cold = _artifact(stack, book)
    key = chapters_key(book, _cut(stack, book))
    kept = json.loads(stack.objects.read_or_none(key) or b"null")
    stack.objects.put_bytes(key, json.dumps({**kept, "anchors": anchors}).encode(), "application/json")
    assert _artifact(stack, book) == cold


def test_a_list_written_before_it_held_digests_is_read_and_the_texts_hashed_as_they_are_read(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book(BOOK)
    key = chapters_key(book, _cut(stack, book))
    rows = json.loads(stack.objects.read_or_none(key) or b"null")["chapters"]
    cold = _artifact(stack, book)  # fills the cache, its pieces found by the list's digests
    stack.objects.put_bytes(key, json.dumps([row[:4] for row in rows]).encode(), "application/json")

    def no_items(*_: Any) -> None:
        raise AssertionError("a build with the cut's list read its items")

    monkeypatch.setattr(stack.store.books, "read_chapters", no_items)
    counted = count_pieces(monkeypatch)
    assert _artifact(stack, book) == cold
    # The digests it took of the texts as it read them are the ones the cut wrote: every chapter a hit.
    assert counted == [CacheCounts(hits=3)]


def test_a_replaced_manuscript_writes_its_own_list_and_the_old_one_retires_with_its_cut(stack: Stack) -> None:
    book = stack.create_book(BOOK)
    old = chapters_key(book, _cut(stack, book))
    assert (
        stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "# Only\n\nnew\n"}).status == 200
    )
    new = chapters_key(book, _cut(stack, book))
    only = hashlib.sha256(b"# Only\n\nnew\n").hexdigest()
    assert json.loads(stack.objects.read_or_none(new) or b"null")["chapters"] == [[1, "Only", 0, 12, only]]
    stack.clock.advance(stack.services.settings.lease_seconds + 1)
    assert stack.gc()["cuts_retired"] == 1
    assert stack.objects.read_or_none(old) is None and stack.objects.read_or_none(new) is not None
