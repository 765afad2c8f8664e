"""Assets: what is refused, and that a refusal writes nothing; limits; a replaced or deleted image's bytes
retired a lease later; a deleted book's images gone with it."""

from __future__ import annotations

import io
from typing import Any

import pytest

from bindery import assets
from bindery.objects import asset_key, assets_prefix, upload_key
from bindery.states import Queue
from tests.books.illustrated import picture
from tests.calls import recording
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import add_asset

PNG = picture("PNG", 64, 48)
TOO_LARGE = assets.MAX_ASSET_BYTES + 1
TEXT = b"some notes, not a picture\n" * 9
JPEG = picture("JPEG", 64, 48)


def _state(stack: Stack, book: str) -> tuple[Any, list[str], list[Any]]:
    """What a refused upload must leave as it was: the book, its asset objects, the chores owed."""
    got = stack.http("GET", f"/books/{book}").body
    return (
        (got["revision"], got["assets"]),
        stack.objects.keys(assets_prefix(book)),
        stack.store.books.due_markers(
            __import__("bindery.states", fromlist=["Queue"]).Queue.RETIRE, 1e12, 100
        ),
    )


def _bomb() -> bytes:
    """A 60 KB PNG that declares 40,000 x 40,000 pixels: a decoder asked to open it would need 4.8 GB."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 40_000, 40_000, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 60_000))
        + chunk(b"IEND", b"")
    )


SVG = b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'

HOSTILE = {
    "a PNG named .jpg": ("images/photo.jpg", "image/jpeg", PNG, 422, "type_mismatch"),
    "a PNG declared as JPEG": ("images/photo", "image/jpeg", PNG, 422, "type_mismatch"),
    "text declared as PNG": ("images/notes.png", "image/png", TEXT, 422, "not_an_image"),
    "a truncated JPEG": ("images/cut.jpg", "image/jpeg", JPEG[: len(JPEG) // 2], 422, "truncated"),
    "a truncated PNG": ("images/cut.png", "image/png", PNG[:-20], 422, "truncated"),
    "an image bomb": ("images/bomb.png", "image/png", _bomb(), 422, "image_too_large"),
    "an SVG with script, declared as PNG": ("images/evil.png", "image/png", SVG, 422, "svg_refused"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_bytes_are_refused_naming_the_problem_and_nothing_is_written(stack: Stack, case: str) -> None:
    name, declared, data, status, code = HOSTILE[case]
    book = stack.create_book()
    before = _state(stack, book)
    reply = add_asset(stack, book, name, declared, data)
    assert (reply.status, reply.body["error"]["code"]) == (status, code), reply.body
    assert name.rsplit("/", 1)[-1] in reply.body["error"]["message"]
    assert _state(stack, book) == before


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"name": "../escape.png", "content_type": "image/png", "size": 10}, 422, "invalid_asset_name"),
        ({"name": "images/../../x.png", "content_type": "image/png", "size": 10}, 422, "invalid_asset_name"),
        ({"name": "/etc/passwd", "content_type": "image/png", "size": 10}, 422, "invalid_asset_name"),
        ({"name": "https://a.test/x.png", "content_type": "image/png", "size": 1}, 422, "invalid_asset_name"),
        ({"name": "a.svg", "content_type": "image/svg+xml", "size": 10}, 422, "svg_refused"),
        ({"name": "a.bmp", "content_type": "image/bmp", "size": 10}, 422, "unsupported_type"),
        ({"name": "a.png", "content_type": "image/png", "size": 0}, 400, "invalid_size"),
        ({"name": "a.png", "content_type": "image/png", "size": TOO_LARGE}, 413, "asset_too_large"),
    ],
)  # fmt: skip
def test_a_bad_upload_request_is_refused_before_any_url_is_minted(
    stack: Stack, body: dict[str, Any], status: int, code: str
) -> None:
    book = stack.create_book()
    reply = stack.http("POST", f"/books/{book}/assets", body=body)
    assert (reply.status, reply.body["error"]["code"]) == (status, code), reply.body


def test_the_count_and_the_bytes_of_a_books_assets_have_limits(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(assets, "MAX_ASSETS", 2)
    monkeypatch.setattr(assets, "MAX_BOOK_ASSET_BYTES", len(PNG) * 2 + 10)
    book = stack.create_book()
    assert add_asset(stack, book, "a.png", "image/png", PNG).status == 200
    # Asked for while the book had room for it.
    early = stack.http(
        "POST", f"/books/{book}/assets", body={"name": "c.png", "content_type": "image/png", "size": len(PNG)}
    )
    assert early.status == 201, early.body
    assert add_asset(stack, book, "b.png", "image/png", PNG).status == 200
    before = _state(stack, book)
    over = stack.http(
        "POST", f"/books/{book}/assets", body={"name": "c.png", "content_type": "image/png", "size": 5}
    )
    assert (over.status, over.body["error"]["code"], over.body["error"]["limit"]) == (
        413,
        "too_many_assets",
        2,
    )
    # A replacement counts instead of what it replaces, so it is not over the count; 11 bytes more is
    # over the bytes.
    bigger = stack.http(
        "POST",
        f"/books/{book}/assets",
        body={"name": "b.png", "content_type": "image/png", "size": len(PNG) + 11},
    )
    assert (bigger.status, bigger.body["error"]["code"]) == (413, "assets_too_large")
    # And the same limits hold at adoption, for a ticket asked for before the book filled up.
    stack.objects.put_bytes(upload_key(book, early.body["upload_id"]), PNG, "image/png")
    late = stack.http("PUT", f"/books/{book}/assets/c.png", body={"upload_id": early.body["upload_id"]})
    assert (late.status, late.body["error"]["code"]) == (413, "too_many_assets")
    assert _state(stack, book) == before


@pytest.mark.parametrize(
    ("declared", "sent"),
    [(841, picture("PNG", 96, 60, noise=True)), (len(PNG) + 1, PNG)],
    ids=["larger than declared", "smaller than declared"],
)
def test_an_upload_of_another_size_than_declared_is_refused_naming_both_and_nothing_is_adopted(
    stack: Stack, declared: int, sent: bytes
) -> None:
    """Given a ticket for `declared` bytes and a real PUT of other bytes to its URL (with their own
    Content-Length, which moto takes as S3 would not), the adoption is a 422 naming both sizes, writes
    nothing, and leaves the upload to the bucket's lifecycle rule for books/uploads/."""
    import requests

    book = stack.create_book()
    ticket = stack.http(
        "POST", f"/books/{book}/assets", body={"name": "a.png", "content_type": "image/png", "size": declared}
    )
    assert ticket.status == 201, ticket.body
    headers = {**ticket.body["headers"], "Content-Length": str(len(sent))}
    put = requests.put(ticket.body["upload_url"], data=sent, headers=headers, timeout=10)
    assert put.status_code == 200, put.text  # the store took it: the adoption is what must not
    before = _state(stack, book)
    with recording(stack.store.client, stack.objects.client) as calls:
        reply = stack.http("PUT", f"/books/{book}/assets/a.png", body={"upload_id": ticket.body["upload_id"]})
    assert reply.status == 422, reply.body
    error = reply.body["error"]
    assert error["code"] == "upload_size_mismatch", error
    assert (error["declared_bytes"], error["uploaded_bytes"]) == (declared, len(sent))
    assert f"{declared:,}" in error["message"] and f"{len(sent):,}" in error["message"]
    assert calls.writes() == [] and calls.count("s3") == {"HeadObject": 1}  # not even its bytes are read
    assert _state(stack, book) == before
    assert stack.objects.keys("books/uploads/") == [upload_key(book, ticket.body["upload_id"])]


def test_an_upload_answers_with_a_presigned_put_for_its_type_and_length(stack: Stack) -> None:
    book = stack.create_book()
    ticket = stack.http(
        "POST",
        f"/books/{book}/assets",
        body={"name": "images/a.png", "content_type": "image/png", "size": 99},
    )
    assert ticket.status == 201 and ticket.body["method"] == "PUT"
    assert ticket.body["headers"] == {"Content-Type": "image/png", "Content-Length": "99"}
    url = ticket.body["upload_url"]
    assert upload_key(book, ticket.body["upload_id"]) in url and "X-Amz-Expires=600" in url
    assert "content-length%3Bcontent-type%3Bhost" in url  # the signature covers both headers


def test_a_replaced_or_deleted_image_is_retired_a_lease_later_and_never_sooner(stack: Stack) -> None:
    book = stack.create_book()
    first = add_asset(stack, book, "images/a.png", "image/png", PNG).body
    first_object = stack.store.books.read_book(book).assets[0].object_id  # type: ignore[union-attr]
    replaced = add_asset(stack, book, "images/a.png", "image/jpeg", JPEG, declared="image/jpeg")
    assert replaced.status == 422  # the name says .png, the bytes are JPEG
    renamed = add_asset(stack, book, "images/a.jpg", "image/jpeg", JPEG)
    assert renamed.body["revision"] == first["revision"] + 1
    assert (
        add_asset(stack, book, "images/a.png", "image/png", picture("PNG", 10, 10)).status == 200
    )  # a replacement
    keys = set(stack.objects.keys(assets_prefix(book)))
    assert asset_key(book, first_object) in keys and len(keys) == 3
    stack.gc()
    assert asset_key(book, first_object) in set(
        stack.objects.keys(assets_prefix(book))
    )  # a build may read it
    stack.clock.advance(stack.exports.settings.lease_seconds + 1)
    stack.gc()
    left = set(stack.objects.keys(assets_prefix(book)))
    assert asset_key(book, first_object) not in left and len(left) == 2
    deleted = stack.http("DELETE", f"/books/{book}/assets/images/a.jpg")
    assert deleted.status == 204
    assert [a["name"] for a in stack.http("GET", f"/books/{book}").body["assets"]] == ["images/a.png"]
    stack.clock.advance(stack.exports.settings.lease_seconds + 1)
    stack.gc()
    assert len(stack.objects.keys(assets_prefix(book))) == 1
    assert stack.http("DELETE", f"/books/{book}/assets/images%2Fa.jpg").status == 404  # gone; %2F works too


def test_the_cover_cannot_be_deleted_and_must_name_an_asset(stack: Stack) -> None:
    book = stack.create_book()
    missing = stack.http("PATCH", f"/books/{book}", body={"metadata": {"cover": "images/c.png"}})
    assert (missing.status, missing.body["error"]["code"]) == (422, "unknown_cover")
    add_asset(stack, book, "images/c.png", "image/png", PNG)
    assert stack.http("PATCH", f"/books/{book}", body={"metadata": {"cover": "images/c.png"}}).status == 200
    refused = stack.http("DELETE", f"/books/{book}/assets/images/c.png")
    assert (refused.status, refused.body["error"]["code"]) == (409, "asset_is_cover")
    assert stack.http("PATCH", f"/books/{book}", body={"metadata": {"cover": None}}).status == 200
    assert stack.http("DELETE", f"/books/{book}/assets/images/c.png").status == 204


def test_a_deleted_books_images_go_with_it(stack: Stack) -> None:
    book = stack.create_book()
    add_asset(stack, book, "images/a.png", "image/png", PNG)
    add_asset(stack, book, "images/b.jpg", "image/jpeg", JPEG)
    assert len(stack.objects.keys(assets_prefix(book))) == 2
    assert stack.http("DELETE", f"/books/{book}").status == 204
    stack.gc()
    assert stack.objects.keys(assets_prefix(book)) == []
    assert stack.store.books.due_markers(Queue.PURGE, 1e12, 10) == []


def test_an_adoption_that_dies_before_it_publishes_leaves_its_bytes_to_the_gc(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = stack.create_book()
    ticket = stack.http(
        "POST", f"/books/{book}/assets", body={"name": "a.png", "content_type": "image/png", "size": len(PNG)}
    )
    stack.objects.put_bytes(upload_key(book, ticket.body["upload_id"]), PNG, "image/png")

    def dies(*args: Any, **kwargs: Any) -> None:
        raise SystemExit("the function was stopped")

    monkeypatch.setattr(type(stack.store.books), "publish_change", dies)
    with pytest.raises(SystemExit):
        stack.http("PUT", f"/books/{book}/assets/a.png", body={"upload_id": ticket.body["upload_id"]})
    monkeypatch.undo()
    assert len(stack.objects.keys(assets_prefix(book))) == 1  # copied, never named
    stack.clock.advance(301)
    stack.gc()
    assert stack.objects.keys(assets_prefix(book)) == []
    assert stack.http("GET", f"/books/{book}").body["assets"] == []


def test_asset_dimensions_are_read_from_each_type(stack: Stack) -> None:
    book = stack.create_book()
    for kind, name in (("PNG", "a.png"), ("JPEG", "a.jpg"), ("GIF", "a.gif"), ("WEBP", "a.webp")):
        data = picture(kind, 123, 45)
        content_type = "image/" + {"JPEG": "jpeg"}.get(kind, kind.lower())
        assert add_asset(stack, book, name, content_type, data).status == 200, kind
    got = {a["name"]: (a["width"], a["height"]) for a in stack.http("GET", f"/books/{book}").body["assets"]}
    assert got == dict.fromkeys(("a.png", "a.jpg", "a.gif", "a.webp"), (123, 45))


def test_an_adoption_sent_again_after_its_answer_was_lost_is_answered_as_the_first(stack: Stack) -> None:
    """The caller's PUT went through but its answer was lost, so it sends it again: by then the upload is
    gone (adopted, then removed), and the retry must still get the book, not upload_not_found, nor a
    second revision."""
    book = stack.create_book()
    ticket = stack.http(
        "POST", f"/books/{book}/assets", body={"name": "a.png", "content_type": "image/png", "size": len(PNG)}
    )
    stack.objects.put_bytes(upload_key(book, ticket.body["upload_id"]), PNG, "image/png")
    first = stack.http("PUT", f"/books/{book}/assets/a.png", body={"upload_id": ticket.body["upload_id"]})
    assert stack.objects.keys("books/uploads/") == []
    again = stack.http("PUT", f"/books/{book}/assets/a.png", body={"upload_id": ticket.body["upload_id"]})
    assert first.status == again.status == 200
    assert (
        again.body["revision"] == first.body["revision"] == 2 and again.body["assets"] == first.body["assets"]
    )
    # Another upload id, never uploaded, is still refused; and an id of a form the API never issues for an
    # asset (it names no declared size) is not looked up at all.
    other = stack.http("PUT", f"/books/{book}/assets/a.png", body={"upload_id": "0123456789abcdef01234567s9"})
    assert (other.status, other.body["error"]["code"]) == (422, "upload_not_found")
    bare = stack.http("PUT", f"/books/{book}/assets/a.png", body={"upload_id": "0123456789abcdef01234567"})
    assert (bare.status, bare.body["error"]["code"]) == (400, "invalid_upload_id")


def test_an_adoption_makes_exactly_these_aws_calls(stack: Stack) -> None:
    """One read of the book, the upload's head and its first bytes (a small image's tail is among them),
    the stage marker, the copy, the one write that publishes, the upload's removal, and the chapters the
    answer (the book at its new revision) lists."""
    book = stack.create_book()
    ticket = stack.http(
        "POST", f"/books/{book}/assets", body={"name": "a.png", "content_type": "image/png", "size": len(PNG)}
    )
    stack.objects.put_bytes(upload_key(book, ticket.body["upload_id"]), PNG, "image/png")
    with recording(stack.store.client, stack.objects.client) as calls:
        reply = stack.http("PUT", f"/books/{book}/assets/a.png", body={"upload_id": ticket.body["upload_id"]})
    assert reply.status == 200
    # GetItem: the book, and the caller's live item for the answer's RateLimit-* fields.
    assert calls.count("dynamodb") == {"GetItem": 2, "PutItem": 1, "TransactWriteItems": 1, "Query": 1}
    assert calls.count("s3") == {"HeadObject": 1, "GetObject": 1, "CopyObject": 1, "DeleteObject": 1}


def test_a_png_that_mentions_svg_in_its_text_is_still_a_png(stack: Stack) -> None:
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "drawn from <svg> source")
    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, format="PNG", pnginfo=info)
    assert b"<svg" in out.getvalue()[:1024]
    book = stack.create_book()
    assert add_asset(stack, book, "drawn.png", "image/png", out.getvalue()).status == 200
