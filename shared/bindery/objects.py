"""The bucket: chapter text under each book's prefix, artifacts under a prefix of their own.

books/<book>/<cut>.md                    one revision's manuscript, normalised (a build's `workdir`);
                                         its chapters are byte ranges of it
books/<book>/assets/<object>             one image asset's bytes, as adopted (a new upload, a new object)
books/uploads/<book>/<upload>            a presigned upload, until a replacement or an asset adopts it
artifacts/<book>/<export>/<claim>        one attempt's artifact; the claim token fences attempts apart
books/pieces/<book>/<format>/head        a book's cache of built pieces for a format: its index
books/pieces/<book>/<format>/<pack>      built pieces, end to end (`bindery.piece_cache`)
"""

from __future__ import annotations

import base64
import re
import threading
import unicodedata
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import Any

from bindery.config import Settings
from bindery.faults import StorageError, object_or_none, translate_faults
from bindery.writers import ArtifactWriter

ARTIFACT_PREFIX = "artifacts/"
# A prefix of its own, as uploads have: the GC walks every book's cache in one listing; and under books/, so
# IAM still names two prefixes. A book's pieces are found only under its own id (`bindery.piece_cache`).
PIECES_PREFIX = "books/pieces/"
BOOK_PREFIX = "books/"
# Under the book prefix, so every byte of a book is under books/ (and IAM names two prefixes, no more).
UPLOAD_PREFIX = "books/uploads/"
READ_CHUNK = 1024 * 1024
# A body read forward reads through a gap this small; past a larger one, a ranged GET is cheaper.
SKIP_BYTES = 4 * READ_CHUNK
MARKDOWN = "text/markdown; charset=utf-8"


def cut_key(book_id: str, cut: str) -> str:
    return f"{BOOK_PREFIX}{book_id}/{cut}.md"


def asset_key(book_id: str, object_id: str) -> str:
    return f"{BOOK_PREFIX}{book_id}/assets/{object_id}"


def assets_prefix(book_id: str) -> str:
    return f"{BOOK_PREFIX}{book_id}/assets/"


def pieces_prefix(book_id: str) -> str:
    """A book's cache of built pieces, every format's: a build reads and writes only its own book's."""
    return f"{PIECES_PREFIX}{book_id}/"


def upload_key(book_id: str, upload_id: str) -> str:
    return f"{UPLOAD_PREFIX}{book_id}/{upload_id}"


def artifact_key(book_id: str, export_id: str, claim: str) -> str:
    return f"{ARTIFACT_PREFIX}{book_id}/{export_id}/{claim}"


def attachment(filename: str) -> str:
    """RFC 6266's Content-Disposition for a download saved as `filename`: an ASCII `filename` that every
    client reads (the name's letters without their accents, "Küste" as "Kuste"; any other character "_"),
    and, when that lost anything, the name itself as `filename*=UTF-8''<percent-encoded>` (RFC 8187),
    which clients that know it prefer. Every byte of the header is ASCII, as an HTTP header must be."""
    plain = unicodedata.normalize("NFKD", filename).encode("ascii", "ignore").decode("ascii")
    fallback = "".join(c if c.isprintable() and c not in '"\\' else "_" for c in plain)
    stem, dot, extension = fallback.rpartition(".")
    if dot:
        # What the folding dropped leaves its separators behind ("Scripts-世界" -> "Scripts-"): they go too.
        stem = re.sub(r"-{2,}", "-", stem).strip("-._ ")
        # Nothing of the name survived (a title all CJK): a neutral stem.
        fallback = f"{stem or 'download'}.{extension}"
    disposition = f'attachment; filename="{fallback}"'
    if fallback != filename:
        disposition += f"; filename*=UTF-8''{urllib.parse.quote(filename, safe='')}"
    return disposition


@translate_faults
class Objects:
    """S3 through one lazily built client. An S3 fault leaves it only as StorageError (`bindery.faults`)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._client: Any = None
        # A build's first S3 calls are made from two threads at once (bindery.threads): without the lock,
        # each made a client of its own, loading S3's service model twice (14 MiB and some 400 million
        # instructions of the worker's cold start).
        self._making = threading.Lock()

    @property
    def client(self) -> Any:
        if self._client is not None:
            return self._client
        with self._making:
            if self._client is not None:
                return self._client
            import boto3  # imported here: a handler that never touches S3 never pays for it
            from botocore.config import Config

            # SigV4, so a presigned URL carries its lifetime (X-Amz-Expires) rather than a wall-clock stamp.
            # No body's SHA-256 in the signature: botocore leaves it out of a streamed upload over https,
            # which carries its checksum (x-amz-checksum-sha256, signed, which S3 checks the bytes against),
            # but over plain http, the local stack's, it read and hashed each body again: 5 ms of a 0.1 s
            # re-export's 6 MB html. The checksum guards the bytes either way.
            config = Config(signature_version="s3v4", s3={"payload_signing_enabled": False})
            self._client = boto3.client("s3", region_name=self.settings.region, config=config)
        return self._client

    def put_bytes(self, key: str, body: bytes, content_type: str = MARKDOWN) -> None:
        self.client.put_object(Bucket=self.settings.bucket, Key=key, Body=body, ContentType=content_type)

    def write_lines(self, key: str, lines: Iterable[bytes], content_type: str = MARKDOWN) -> int:
        """Stream lines into `key`, a part at a time (joined a chunk at a time, not written line by line).
        Returns the size written."""
        writer = self.writer(key, content_type)
        try:
            chunk: list[bytes] = []
            held = 0
            for line in lines:
                chunk.append(line)
                held += len(line)
                if held >= READ_CHUNK:
                    writer.write(b"".join(chunk))
                    chunk, held = [], 0
            writer.write(b"".join(chunk))
            return writer.commit()
        except BaseException:
            writer.abort()
            raise

    def read_text(self, key: str) -> str:
        response = self.client.get_object(Bucket=self.settings.bucket, Key=key)
        return str(response["Body"].read().decode("utf-8"))

    def open(self, key: str) -> Any:
        """The object's body as a stream: one GET, read as the caller goes."""
        return self.client.get_object(Bucket=self.settings.bucket, Key=key)["Body"]

    def open_from(self, key: str, first: int) -> Any:
        """The object's body from byte `first` to its end, as a stream: one ranged GET."""
        return self.client.get_object(Bucket=self.settings.bucket, Key=key, Range=f"bytes={first}-")["Body"]

    def read_or_none(self, key: str) -> bytes | None:
        """A small object's bytes, or None when there is none."""
        found = object_or_none(lambda: self.client.get_object(Bucket=self.settings.bucket, Key=key))
        return None if found is None else bytes(found["Body"].read())

    def chunks(self, key: str) -> Iterator[bytes]:
        """The object's bytes, READ_CHUNK at a time, from one GET."""
        body = self.open(key)
        while chunk := body.read(READ_CHUNK):
            yield chunk

    def lines(self, key: str) -> Iterator[bytes]:
        """The object's lines, each with its ending, streamed in 1 MiB reads: memory stays at a chunk.

        Lines end where `bytes.splitlines` ends them (LF, CR, CRLF), as a whole-text split would: a chunk
        that ends inside a line, or between a CR and its LF, keeps that line back for the next read.

        A line kept back is kept as its pieces and joined once, when it ends: each byte is copied once,
        however many reads a line spans (joining what was held to each read copied a line of n reads n
        times over)."""
        body = self.open(key)
        held: list[bytes] = []  # the pieces of a line no read has ended yet
        while chunk := body.read(READ_CHUNK):
            if held and held[-1].endswith(b"\r"):
                # The held line ends at its CR unless this read begins with the CR's LF: CRLF is one ending.
                if chunk.startswith(b"\n"):
                    held.append(b"\n")
                    chunk = chunk[1:]
                yield b"".join(held)
                held = []
                if not chunk:
                    continue
            lines = chunk.splitlines(keepends=True)
            # A last line that does not end in LF may go on in the next read (a CR may be half a CRLF).
            open_line = lines.pop() if not lines[-1].endswith(b"\n") else None
            if lines and held:
                held.append(lines[0])
                lines[0] = b"".join(held)
                held = []
            yield from lines
            if open_line is not None:
                held.append(open_line)
        if held:
            yield b"".join(held)

    def size(self, key: str) -> int | None:
        found = object_or_none(lambda: self.client.head_object(Bucket=self.settings.bucket, Key=key))
        return None if found is None else int(found["ContentLength"])

    def head(self, key: str) -> tuple[int, str | None] | None:
        """(size, content type) of an object, or None when there is none."""
        found = object_or_none(lambda: self.client.head_object(Bucket=self.settings.bucket, Key=key))
        if found is None:
            return None
        return int(found["ContentLength"]), found.get("ContentType")

    def read_range(self, key: str, first: int, last: int) -> bytes:
        """Bytes first..last (inclusive, as HTTP Range counts them) of an object; a negative `first` counts
        from the end (-16 is the last 16 bytes)."""
        byte_range = f"bytes={first}" if first < 0 else f"bytes={first}-{last}"
        body: bytes = self.client.get_object(Bucket=self.settings.bucket, Key=key, Range=byte_range)[
            "Body"
        ].read()
        return body

    def presign_put(self, key: str, content_type: str, size: int, expires_in: int) -> str:
        """A presigned PUT for exactly this key, type and length: the signature covers the Content-Type and
        Content-Length headers, so S3 refuses a PUT that sends others."""
        return self._presigned("put_object", key, expires_in, ContentType=content_type, ContentLength=size)

    def copy(self, source: str, target: str, content_type: str | None = None) -> str | None:
        """A server-side copy: the bytes never pass through the function. (CopyObject takes up to 5 GB.)
        With `content_type`, the copy gets that type; otherwise it keeps the source's. Returns the copy's
        SHA-256 in hex, as S3 computed it over the bytes it wrote (one CopyObject: the whole object's)."""
        extra = {"MetadataDirective": "REPLACE", "ContentType": content_type} if content_type else {}
        copied = self.client.copy_object(
            Bucket=self.settings.bucket,
            Key=target,
            CopySource={"Bucket": self.settings.bucket, "Key": source},
            ChecksumAlgorithm="SHA256",
            **extra,
        )
        checksum = copied.get("CopyObjectResult", {}).get("ChecksumSHA256")
        return base64.b64decode(checksum).hex() if checksum else None

    def presign_upload(self, key: str, max_bytes: int, expires_in: int) -> dict[str, Any]:
        """A presigned POST for exactly this key. Its policy, which S3 enforces, bounds the size to 1 byte
        .. max_bytes (a presigned PUT took up to 5 GB)."""
        post: dict[str, Any] = self.client.generate_presigned_post(
            Bucket=self.settings.bucket,
            Key=key,
            Conditions=[["content-length-range", 1, max_bytes]],
            ExpiresIn=expires_in,
        )
        return post

    def writer(
        self, key: str, content_type: str, *, part_bytes: int | None = None, on_disk: bool = False
    ) -> ArtifactWriter:
        return ArtifactWriter(self.client, self.settings.bucket, key, content_type, part_bytes, on_disk)

    def delete(self, keys: Iterable[str]) -> None:
        """Remove keys. One call for the usual single key, one DeleteObjects for several.

        A key that is already gone counts as removed: S3 answers a delete of a missing key with success,
        which is what makes the GC's unlink safe to retry.
        """
        keys = sorted(keys)
        if not keys:
            return
        if len(keys) == 1:
            self.client.delete_object(Bucket=self.settings.bucket, Key=keys[0])
            return
        response = self.client.delete_objects(
            Bucket=self.settings.bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
        )
        errors = response.get("Errors") or []
        if errors:
            raise StorageError(f"S3 refused to delete {len(errors)} key(s): {errors[0].get('Code')}")

    def exists(self, key: str) -> bool:
        found = object_or_none(lambda: self.client.head_object(Bucket=self.settings.bucket, Key=key))
        return found is not None

    def list_page(
        self, prefix: str, start_after: str, limit: int
    ) -> tuple[list[tuple[str, int, float]], bool]:
        """Up to `limit` (key, size, last-modified epoch) after `start_after`, in key order; and whether
        there is more."""
        kwargs: dict[str, Any] = {"Bucket": self.settings.bucket, "Prefix": prefix, "MaxKeys": limit}
        if start_after:
            kwargs["StartAfter"] = start_after
        page = self.client.list_objects_v2(**kwargs)
        found = [
            (obj["Key"], int(obj["Size"]), obj["LastModified"].timestamp())
            for obj in page.get("Contents", [])
        ]
        return found, bool(page.get("IsTruncated"))

    def abort_stale_uploads(self, prefix: str, started_before: float) -> int:
        """Abort multipart uploads under `prefix` begun before `started_before`: no live attempt owns them.
        (The bucket's lifecycle rule does the same a day later; this does it on the GC's clock.)"""
        uploads = self.client.list_multipart_uploads(Bucket=self.settings.bucket, Prefix=prefix).get(
            "Uploads", []
        )
        stale = [u for u in uploads if u["Initiated"].timestamp() < started_before]
        for upload in stale:
            self.client.abort_multipart_upload(
                Bucket=self.settings.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
            )
        return len(stale)

    def keys(self, prefix: str) -> list[str]:
        found: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.settings.bucket, Prefix=prefix
        ):
            found.extend(obj["Key"] for obj in page.get("Contents", []))
        return found

    def presign_download(self, key: str, filename: str, content_type: str, expires_in: int) -> str:
        """A GET URL valid for `expires_in` seconds that downloads as `filename`. Never stored."""
        return self._presigned(
            "get_object",
            key,
            expires_in,
            ResponseContentDisposition=attachment(filename),
            ResponseContentType=content_type,
        )

    def _presigned(self, operation: str, key: str, expires_in: int, **params: Any) -> str:
        url = self.client.generate_presigned_url(
            operation, Params={"Bucket": self.settings.bucket, "Key": key, **params}, ExpiresIn=expires_in
        )
        return str(url)
