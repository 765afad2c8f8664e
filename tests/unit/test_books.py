"""Books: replacing the manuscript, uploads, deletion, immutable revisions, progress and skipped chapters."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from bindery import engine
from bindery.engine import Source
from bindery.objects import ARTIFACT_PREFIX, cut_key, upload_key
from bindery.states import State
from tests.calls import recording
from tests.unit.conftest import Stack


def _snapshot(stack: Stack) -> tuple[list[Any], list[str]]:
    items = sorted(
        (i.attribute_values for i in stack.store.models.item.scan()), key=lambda v: (v["pk"], v["sk"])
    )
    return items, sorted(stack.objects.keys(""))


def _titles(reply: Any) -> list[str]:
    return [c["title"] for c in reply.body["chapters"]]


def test_replacing_the_manuscript_recuts_it_and_bumps_the_revision(stack: Stack) -> None:
    book = stack.create_book("# One\n\nfirst\n")
    reply = stack.http(
        "PUT", f"/books/{book}/manuscript", body={"manuscript": "Intro.\n\n# A\n\na\n\n# B\n\nb\n"}
    )

    assert reply.status == 200
    assert (reply.body["revision"], reply.headers["ETag"]) == (2, '"2"')
    assert _titles(reply) == ["Opening", "A", "B"]
    assert _titles(stack.http("GET", f"/books/{book}")) == ["Opening", "A", "B"]


def test_a_cuts_chapters_are_read_whole_when_the_table_answers_a_page_at_a_time(stack: Stack) -> None:
    """DynamoDB answers a query a page at a time (1 MB in earnest; two rows here): every page is read, in
    order, and each row is its chapter."""
    book = stack.create_book("".join(f"# Chapter {n}\n\nText {n}.\n\n" for n in range(1, 8)))
    found = stack.store.books.read_book(book)
    assert found is not None
    pages: list[str] = []

    def two_rows_a_page(params: dict[str, Any], model: Any, **_: Any) -> None:
        params["Limit"] = 2
        pages.append(model.name)

    stack.store.client.meta.events.register("provide-client-params.dynamodb.Query", two_rows_a_page)
    try:
        chapters = stack.store.books.read_chapters(book, found.cut)
    finally:
        stack.store.client.meta.events.unregister("provide-client-params.dynamodb.Query", two_rows_a_page)
    assert len(pages) == 4
    assert [(c.ordinal, c.title) for c in chapters] == [(n, f"Chapter {n}") for n in range(1, 8)]
    text = stack.objects.read_text(cut_key(book, found.cut))
    assert [text[c.offset : c.offset + c.size_bytes].split("\n")[0] for c in chapters] == [
        f"# Chapter {n}" for n in range(1, 8)
    ]


def test_if_match_on_a_stale_revision_is_412_and_changes_nothing(stack: Stack) -> None:
    book = stack.create_book()
    stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "# Two\n"})
    before = _snapshot(stack)

    reply = stack.http(
        "PUT", f"/books/{book}/manuscript", body={"manuscript": "# Three\n"}, headers={"If-Match": '"1"'}
    )

    assert (reply.status, reply.body["error"]["code"], reply.body["error"]["revision"]) == (
        412,
        "revision_mismatch",
        2,
    )
    assert _snapshot(stack) == before


def test_if_match_on_the_current_revision_replaces(stack: Stack) -> None:
    book = stack.create_book()
    reply = stack.http(
        "PUT", f"/books/{book}/manuscript", body={"manuscript": "# New\n"}, headers={"If-Match": '"1"'}
    )
    assert (reply.status, reply.body["revision"]) == (200, 2)


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        ({}, None, 400, "missing_field"),
        ({"manuscript": "# a", "upload_id": "abcdef012345"}, None, 400, "missing_field"),
        ({"manuscript": 5}, None, 400, "invalid_field"),
        ({"manuscript": "# a"}, {"If-Match": "three"}, 400, "invalid_if_match"),
        ({"upload_id": "../../etc"}, None, 400, "invalid_upload_id"),
        ({"upload_id": "abcdef0123456789abcdef01"}, None, 422, "upload_not_found"),
    ],
)
def test_a_bad_replacement_names_its_problem_and_changes_nothing(
    stack: Stack, body: dict[str, Any], headers: dict[str, str] | None, status: int, code: str
) -> None:
    book = stack.create_book()
    before = _snapshot(stack)
    reply = stack.http("PUT", f"/books/{book}/manuscript", body=body, headers=headers)
    assert (reply.status, reply.body["error"]["code"]) == (status, code)
    assert _snapshot(stack) == before


def test_a_manuscript_over_5_mb_is_413_and_names_the_upload_route(stack: Stack) -> None:
    book = stack.create_book()
    big = "# Big\n" + "x" * (stack.exports.settings.max_manuscript_bytes + 1)
    reply = stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": big})
    assert (reply.status, reply.body["error"]["code"]) == (413, "manuscript_too_large")
    assert "POST /books/{bookId}/uploads" in reply.body["error"]["message"]


def test_a_large_manuscript_goes_through_a_presigned_upload(stack: Stack) -> None:
    book = stack.create_book()
    upload = stack.http("POST", f"/books/{book}/uploads")
    assert upload.status == 201
    assert upload.body["method"] == "POST" and upload.body["max_bytes"] == 500 * 1024 * 1024
    # The policy S3 enforces: this key and no other, 1 byte to 500 MiB, for ten minutes.
    fields = upload.body["fields"]
    policy = json.loads(base64.b64decode(fields["policy"]))
    key = upload_key(book, upload.body["upload_id"])
    assert fields["key"] == key and {"key": key} in policy["conditions"]
    assert ["content-length-range", 1, 500 * 1024 * 1024] in policy["conditions"]
    expires = datetime.fromisoformat(policy["expiration"].replace("Z", "+00:00"))
    assert 0 < (expires - datetime.now(UTC)).total_seconds() <= 600
    manuscript = "".join(f"# Part {n}\n\n{'words ' * 50}\n\n" for n in range(1, 301))
    # What the caller's PUT to the presigned URL does.
    stack.objects.put_bytes(upload_key(book, upload.body["upload_id"]), manuscript.encode())

    reply = stack.http("PUT", f"/books/{book}/manuscript", body={"upload_id": upload.body["upload_id"]})

    assert (reply.status, reply.body["revision"], len(reply.body["chapters"])) == (200, 2, 300)
    assert reply.body["manuscript_bytes"] == len(manuscript.encode()) - 1  # normalised: one final newline
    assert stack.objects.keys("books/uploads/") == []  # adopted, then removed
    export_id = stack.submit(book, "markdown").body["id"]
    stack.services.builds.build(book, export_id)
    assert stack.poll(book, export_id).body["built_revision"] == 2


def _adopt(stack: Stack, book: str, data: bytes) -> tuple[Any, Any]:
    upload_id = stack.http("POST", f"/books/{book}/uploads").body["upload_id"]
    stack.objects.put_bytes(upload_key(book, upload_id), data)
    with recording(stack.objects.client) as calls:
        reply = stack.http("PUT", f"/books/{book}/manuscript", body={"upload_id": upload_id})
    assert reply.status == 200, reply.body
    return reply, calls


def test_an_upload_that_is_already_normal_is_kept_by_a_server_side_copy(stack: Stack) -> None:
    book = stack.create_book()
    data = b"\n".join(b"# Part %d\n\nwords  \nand more\n" % n for n in range(1, 40))
    reply, calls = _adopt(stack, book, data)
    # One streaming read to cut it, one copy to keep it, one delete of the upload: no byte re-uploaded (and
    # the cut's chapter list, written: bindery/chapter_lists.py).
    assert calls.count() == {
        "HeadObject": 1,
        "GetObject": 1,
        "CopyObject": 1,
        "DeleteObject": 1,
        "PutObject": 1,
    }
    assert reply.body["manuscript_bytes"] == len(data)
    export_id = stack.submit(book, "markdown").body["id"]
    stack.services.builds.build(book, export_id)
    [artifact] = stack.objects.keys("artifacts/")
    assert stack.objects.read_text(artifact).encode() == data  # the markdown export is the manuscript


def test_an_upload_with_crlf_and_a_bom_is_kept_normalised_and_cut_at_the_same_places(stack: Stack) -> None:
    book = stack.create_book()
    normal = b"".join(b"# Part %d\n\nwords  \nand more\n\n" % n for n in range(1, 40)).rstrip(b"\n") + b"\n"
    reply, calls = _adopt(stack, book, b"\xef\xbb\xbf\r\n" + normal.replace(b"\n", b"\r\n") + b"\r\n\r\n")
    assert calls.count()["GetObject"] == 2  # cut, then a second streaming pass to write it normalised
    assert "CopyObject" not in calls.count()
    assert reply.body["manuscript_bytes"] == len(normal)
    assert [c["title"] for c in reply.body["chapters"]] == [f"Part {n}" for n in range(1, 40)]
    export_id = stack.submit(book, "markdown").body["id"]
    stack.services.builds.build(book, export_id)
    [artifact] = stack.objects.keys("artifacts/")
    assert stack.objects.read_text(artifact).encode() == normal


def test_a_build_reads_exactly_one_revision_even_when_the_manuscript_is_replaced_mid_build(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book("# Old One\n\nold text one\n\n# Old Two\n\nold text two\n")
    export_id = stack.submit(book, "html").body["id"]  # a format that reads the chapters as it goes
    real_open = type(stack.objects).open

    def open_then_replace(objects: Any, key: str) -> Any:
        body = real_open(objects, key)  # the build has read the book and is now reading its text ...
        reply = stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "# New\n\nnew text\n"})
        assert reply.status == 200  # ... when the author replaces the manuscript
        return body

    monkeypatch.setattr(type(stack.objects), "open", open_then_replace)
    assert stack.services.builds.build(book, export_id) == "ready"
    monkeypatch.undo()

    polled = stack.poll(book, export_id).body
    assert (polled["built_revision"], polled["book_revision"]) == (1, 2)  # a caller can tell it is stale
    [key] = stack.objects.keys("artifacts/")
    artifact = stack.objects.read_text(key)
    assert "old text one" in artifact and "old text two" in artifact and "new text" not in artifact


def test_a_superseded_revision_is_removed_once_no_build_can_read_it(stack: Stack) -> None:
    book = stack.create_book("# Old\n\nold\n")
    old_cut = [k for k in stack.objects.keys("books/")]
    stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "# New\n\nnew\n"})

    stack.clock.advance(stack.exports.settings.lease_seconds - 1)
    stack.gc()
    assert set(old_cut) <= set(stack.objects.keys("books/"))  # a build claimed just before may still read it

    stack.clock.advance(2)
    assert stack.gc()["cuts_retired"] == 1
    assert not set(old_cut) & set(stack.objects.keys("books/"))
    chapters = [i.sk for i in stack.store.models.item.scan() if i.sk.startswith("CH#")]
    assert len(chapters) == 1  # only the new revision's
    assert _titles(stack.http("GET", f"/books/{book}")) == ["New"]


def test_a_stranded_cut_is_removed_when_nothing_adopted_it(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book("# Kept\n")

    def crash(*_: Any, **__: Any) -> None:
        raise RuntimeError("the function died before publishing the new revision")

    monkeypatch.setattr(stack.store.books, "publish_cut", crash)
    with pytest.raises(RuntimeError):
        stack.services.books.replace_manuscript(
            "user-alice", book, None, manuscript="# Lost\n", upload_id=None
        )
    monkeypatch.undo()
    assert len(stack.objects.keys("books/")) == 4  # each cut's manuscript and chapter list

    stack.clock.advance(3600)
    stack.gc()

    assert len(stack.objects.keys("books/")) == 2  # the kept cut's
    assert _titles(stack.http("GET", f"/books/{book}")) == ["Kept"]


def test_deleting_a_book_cancels_its_pending_exports_and_the_gc_removes_every_byte(stack: Stack) -> None:
    book = stack.create_book()
    ready = stack.submit(book, "html").body["id"]
    stack.services.builds.build(book, ready)
    pending = stack.submit(book, "markdown").body["id"]
    other = stack.create_book()
    kept = stack.submit(other, "markdown").body["id"]
    stack.services.builds.build(other, kept)

    assert stack.http("DELETE", f"/books/{book}").status == 204

    assert stack.http("GET", f"/books/{book}").status == 404
    rows = {e.id: e for e in stack.store.exports.all_exports()}
    assert rows[pending].state == State.CANCELLED and rows[ready].state == State.EXPIRED
    assert stack.store.exports.live_ids("user-alice") == frozenset()
    assert stack.services.builds.build(book, pending) == "refused:ended"
    stack.clock.advance(1)
    stack.gc()
    assert [k for k in stack.objects.keys("") if book in k] == []
    assert [k for k in stack.objects.keys("") if other in k] != []  # the other book is untouched
    assert not [
        i for i in stack.store.models.item.scan() if i.pk == f"BOOK#{book}" and not i.sk.startswith("EXPORT#")
    ]


def test_a_build_whose_book_was_deleted_under_it_is_cancelled(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    monkeypatch.setattr(stack.store.books, "read_book", lambda book_id: None)
    assert stack.services.builds.build(book, export_id) == "cancelled:book_deleted"
    monkeypatch.undo()
    assert stack.store.exports.live_ids("user-alice") == frozenset()


def test_a_stranger_cannot_replace_upload_to_or_delete_a_book(stack: Stack) -> None:
    book = stack.create_book()
    before = _snapshot(stack)
    for method, path, body in (
        ("PUT", f"/books/{book}/manuscript", {"manuscript": "# Mine now"}),
        ("POST", f"/books/{book}/uploads", None),
        ("DELETE", f"/books/{book}", None),
    ):
        assert stack.http(method, path, caller="user-mallory", body=body).status == 404
    assert _snapshot(stack) == before


class _Recording:
    """A renderer that polls the API between chapters, as a caller would, and may fail one chapter."""

    extension, content_type = "txt", "text/plain"

    def __init__(self, stack: Stack, book: str, fail_on: int | None = None):
        self.stack, self.book, self.fail_on = stack, book, fail_on
        self.export_id = ""
        self.seen: list[Any] = []

    def render(self, source: Source, chapters: Any, out: Any) -> engine.Report:
        missed: list[dict[str, object]] = []
        for text in chapters:
            self.stack.clock.advance(2)  # a chapter takes two seconds
            self.seen.append(self.stack.poll(self.book, self.export_id).body.get("progress"))
            if text.ordinal == self.fail_on:
                missed.append(engine.skipped(text, ValueError("cannot typeset this")))
                continue
            out.write(text.markdown.encode())
        return engine.Report(skipped=missed)


def _many_chapters(n: int) -> str:
    return "".join(f"# C{i}\n\ntext {i}\n\n" for i in range(1, n + 1))


def test_poll_shows_progress_while_the_build_runs_at_most_every_few_seconds(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book(_many_chapters(6))
    recorder = _Recording(stack, book)
    monkeypatch.setattr(engine, "renderer_for", lambda fmt: recorder)
    recorder.export_id = stack.submit(book, "html").body["id"]

    assert stack.services.builds.build(book, recorder.export_id) == "ready"

    shown = [p for p in recorder.seen if p]
    assert shown and shown[-1]["chapters_total"] == 6
    assert [p["chapters_done"] for p in shown] == sorted(p["chapters_done"] for p in shown)
    assert len({p["chapters_done"] for p in shown}) < 6  # not one write per chapter
    assert "progress" not in stack.poll(book, recorder.export_id).body  # ready: no progress shown


def test_a_chapter_that_cannot_be_rendered_is_skipped_named_and_the_export_is_incomplete(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book(_many_chapters(3))
    recorder = _Recording(stack, book, fail_on=2)
    monkeypatch.setattr(engine, "renderer_for", lambda fmt: recorder)
    recorder.export_id = stack.submit(book, "html").body["id"]

    assert stack.services.builds.build(book, recorder.export_id) == "ready"

    polled = stack.poll(book, recorder.export_id).body
    assert polled["complete"] is False
    assert polled["skipped_chapters"] == [
        {"ordinal": 2, "title": "C2", "reason": "ValueError: cannot typeset this"}
    ]


def test_a_book_too_large_for_pdf_fails_early_and_never_reaches_the_engine(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine import pdf

    monkeypatch.setattr(pdf.RENDERER, "max_manuscript_bytes", 10)
    monkeypatch.setattr(pdf.RENDERER, "render", lambda *a: pytest.fail("the engine was called"))
    book = stack.create_book("# Long enough\n\nto be over ten bytes\n")
    export_id = stack.submit(book, "pdf").body["id"]

    assert stack.services.builds.build(book, export_id) == "failed:too_large_for_format"


def test_a_pdf_over_its_time_limit_fails_as_render_failed_and_leaves_no_artifact(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine import pdf

    monkeypatch.setattr(pdf.RENDERER, "time_limit", 0.001)  # no compile finishes in a millisecond
    book = stack.create_book("# One\n\ntext\n\n# Two\n\nmore text\n")
    export_id = stack.submit(book, "pdf").body["id"]

    assert stack.services.builds.build(book, export_id) == "failed:render_failed"
    polled = stack.poll(book, export_id).body
    assert (polled["state"], polled["failure_code"]) == ("failed", "render_failed")
    listed = boto3.client("s3").list_objects_v2(Bucket=stack.exports.settings.bucket, Prefix=ARTIFACT_PREFIX)
    assert listed["KeyCount"] == 0  # the build's upload was aborted


def test_each_chapter_is_read_from_its_own_byte_range(stack: Stack) -> None:
    manuscript = "Ünïcödé opening.\n\n# Один\n\nπρώτο 🎉\n\n# 二\n\n第二\n"
    book = stack.create_book(manuscript)
    _, chapters = stack.services.books.get_book("user-alice", book)
    data = manuscript.encode()
    texts = [data[c.offset : c.offset + c.size_bytes].decode() for c in chapters]
    assert texts == ["Ünïcödé opening.\n\n", "# Один\n\nπρώτο 🎉\n\n", "# 二\n\n第二\n"]
    book_item = stack.store.books.read_book(book)
    assert book_item is not None
    assert stack.objects.read_text(cut_key(book, book_item.cut)) == manuscript


def test_a_retried_create_with_its_idempotency_key_answers_with_the_book_it_made(stack: Stack) -> None:
    body = {"title": "Once", "manuscript": "# One\n\ntext\n"}
    first = stack.http("POST", "/books", body=body, headers={"Idempotency-Key": "create-1"})
    again = stack.http("POST", "/books", body=body, headers={"Idempotency-Key": "create-1"})

    assert (first.status, again.status) == (201, 200)
    assert again.headers["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first.headers
    assert again.body == first.body
    books = [i for i in stack.store.models.item.scan() if i.attribute_values["sk"] == "BOOK"]
    assert len(books) == 1
    # The replay's staged cut is no book's: the GC retires it once its grace is over.
    stack.clock.advance(600)
    stack.gc()
    assert len(stack.objects.keys("books/")) == 2  # the book's manuscript and its chapter list

    other = stack.http(
        "POST", "/books", body={**body, "title": "Twice"}, headers={"Idempotency-Key": "create-1"}
    )
    assert (other.status, other.body["error"]["code"]) == (422, "idempotency_key_reused")
    bob = stack.http("POST", "/books", caller="user-bob", body=body, headers={"Idempotency-Key": "create-1"})
    assert bob.status == 201 and bob.body["id"] != first.body["id"]  # a key is its caller's own


def test_a_replayed_key_whose_book_was_deleted_is_a_conflict_that_says_so(stack: Stack) -> None:
    body = {"title": "Gone", "manuscript": "# One\n\ntext\n"}
    first = stack.http("POST", "/books", body=body, headers={"Idempotency-Key": "gone-1"})
    assert stack.http("DELETE", f"/books/{first.body['id']}").status == 204
    again = stack.http("POST", "/books", body=body, headers={"Idempotency-Key": "gone-1"})
    assert (again.status, again.body["error"]["code"]) == (409, "idempotent_book_deleted")
    assert [
        i for i in stack.store.models.item.scan() if i.attribute_values["sk"] == "BOOK"
    ] == []  # nothing was made
