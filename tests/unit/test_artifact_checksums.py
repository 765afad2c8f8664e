"""Every artifact is stored with S3's SHA-256 of its bytes: what botocore sends for each format, and what
S3 (here moto) answers for it afterwards. (Issue 28, item 9: only the markdown copy answered with one.)"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bindery.objects import ARTIFACT_PREFIX
from bindery.writers import PART_BYTES
from tests.books.illustrated import picture
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import add_asset

# markdown is the cut, copied; "images" is a markdown export of a book with images, a zip rendered here.
FORMATS = ("html", "epub", "pdf", "docx", "markdown", "images", "bundle")


def _sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


@contextmanager
def _sent(stack: Stack) -> Iterator[list[Any]]:
    """The requests botocore sends, as it sends them (after signing): the headers are the wire's."""
    sent: list[Any] = []

    def keep(request: Any, **_: Any) -> None:
        sent.append(request)

    events = stack.objects.client.meta.events
    events.register("before-send.s3", keep)
    try:
        yield sent
    finally:
        events.unregister("before-send.s3", keep)


def _built(stack: Stack, fmt: str) -> tuple[str, str, list[Any]]:
    """An artifact of `fmt` built from a small book: its key, the export row's sha256 (hex), and the
    requests botocore sent while it was written."""
    book = stack.create_book("# One\n\nThe first.\n\n![a gate](gate.png)\n\n# Two\n\nThe second.\n")
    if fmt in ("images", "bundle"):
        assert add_asset(stack, book, "gate.png", "image/png", picture("PNG", 40, 30)).status == 200
    if fmt == "bundle":
        made = stack.http("POST", "/batches", body={"exports": [{"book_id": book, "format": "html"}]}).body
        [target] = made["targets"]
        assert stack.build(book, target["export_id"])["batchItemFailures"] == []
        book, export_id = made["id"], stack.http("GET", f"/batches/{made['id']}").body["bundle"]["id"]
    else:
        export_id = stack.submit(book, "markdown" if fmt == "images" else fmt).body["id"]
    with _sent(stack) as sent:
        assert stack.build(book, export_id)["batchItemFailures"] == []
    [row] = [e for e in stack.store.exports.all_exports() if e.id == export_id]
    assert row.path and row.sha256, row
    return row.path, row.sha256, sent


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_artifact_is_stored_with_the_sha256_of_its_bytes(stack: Stack, fmt: str) -> None:
    """Given a built artifact of each kind, HeadObject with ChecksumMode answers the SHA-256 of the bytes a
    download gets, which is also the export row's."""
    key, row_sha256, _ = _built(stack, fmt)
    bucket = stack.objects.settings.bucket
    data = stack.objects.client.get_object(Bucket=bucket, Key=key)["Body"].read()
    head = stack.objects.client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    assert head.get("ChecksumSHA256") == _sha256(data), head
    assert row_sha256 == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "markdown"])
def test_every_streamed_artifacts_put_names_sha256_and_carries_its_value(stack: Stack, fmt: str) -> None:
    """What botocore puts on the wire for each streamed artifact: one PutObject (none is multipart at this
    size) whose x-amz-checksum-sha256 is the SHA-256 of the stored bytes, and whose
    x-amz-sdk-checksum-algorithm names it (a store that reads the value only by that name, as moto does,
    kept none), with the body sent whole, not as aws-chunked with a trailer."""
    key, _, sent = _built(stack, fmt)
    puts = [r for r in sent if r.method == "PUT" and ARTIFACT_PREFIX in r.url]
    assert len(puts) == 1 and key in puts[0].url, [r.url for r in puts]
    headers = puts[0].headers
    data = stack.objects.client.get_object(Bucket=stack.objects.settings.bucket, Key=key)["Body"].read()
    assert headers.get("x-amz-checksum-sha256") == _sha256(data).encode()
    assert headers.get("x-amz-sdk-checksum-algorithm") == b"SHA256"
    assert "x-amz-trailer" not in {k.lower() for k in headers}
    assert int(headers["Content-Length"]) == len(data)


@pytest.mark.parametrize("on_disk", [False, True], ids=["in memory", "on disk"])
def test_a_multipart_artifact_carries_each_parts_sha256_and_s3s_composite_of_them(
    stack: Stack, on_disk: bool
) -> None:
    """Past one part an artifact is a multipart upload, and S3 has no whole-object SHA-256 for one: each
    UploadPart carries its part's SHA-256, and the object answers S3's composite, the SHA-256 of the parts'
    digests. (The export row's sha256 is the whole artifact's: the writer hashes every byte.) A part that
    waits on disk (a pack's) goes up the same bytes with the same checksums."""
    data = os.urandom(2 * PART_BYTES + 1234)
    writer = stack.objects.writer(f"{ARTIFACT_PREFIX}b/e/c", "application/zip", on_disk=on_disk)
    with _sent(stack) as sent:
        for at in range(0, len(data), 1_000_000):  # in pieces, as a renderer writes, across part bounds
            writer.write(data[at : at + 1_000_000])
        assert writer.commit() == len(data)
    stored = stack.objects.client.get_object(Bucket=stack.objects.settings.bucket, Key=writer.key)
    assert stored["Body"].read() == data
    parts = [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]
    uploaded = [r for r in sent if r.method == "PUT"]
    assert [r.headers.get("x-amz-checksum-sha256") for r in uploaded] == [_sha256(p).encode() for p in parts]
    assert writer.sha256 == hashlib.sha256(data).hexdigest()
    head = stack.objects.client.head_object(
        Bucket=stack.objects.settings.bucket, Key=writer.key, ChecksumMode="ENABLED"
    )
    composite = _sha256(b"".join(hashlib.sha256(p).digest() for p in parts))
    assert head["ChecksumSHA256"].split("-")[0] == composite, head
