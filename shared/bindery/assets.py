"""A book's image assets: uploaded through a presigned PUT, adopted only once their bytes are checked, and
part of the book's revision from then on.

    POST /books/{id}/assets {name, content_type, size}   -> a presigned PUT for the bytes
    PUT  /books/{id}/assets/{name} {upload_id}            -> the bytes checked, the asset adopted
    DELETE /books/{id}/assets/{name}                      -> the asset let go

An asset's bytes are a new object at every adoption, never overwritten, so a build that read a revision
reads that revision's images to the end. The object is behind a retire marker from before it is copied in
until the change that names it is published (the cut's own pattern), and an object a change lets go is
marked for removal a lease later: nothing leaks, and nothing a build may still read goes early.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import replace
from typing import Any

from bindery import errors, images
from bindery.clock import Clock, iso
from bindery.images import Asset
from bindery.objects import Objects, asset_key, upload_key
from bindery.observability import logger
from bindery.revisions import STAGE_GRACE_SECONDS, Revisions
from bindery.storage import Book, BookRows, StorageError

MAX_ASSETS = 500
MAX_ASSET_BYTES = 20 * 1024 * 1024
MAX_BOOK_ASSET_BYTES = 500 * 1024 * 1024
ASSET_URL_SECONDS = 600


class BookAssets:
    """A book's images: the upload ticket, the adoption, the letting go. Each change is a revision of the
    book, published as the library's are (`Revisions`)."""

    def __init__(self, book_rows: BookRows, objects: Objects, clock: Clock, revisions: Revisions):
        self.book_rows, self.objects, self.clock, self.revisions = book_rows, objects, clock, revisions

    def create_asset_upload(
        self, caller: str, book_id: str, name: Any, content_type: Any, size: Any
    ) -> dict[str, Any]:
        name = images.asset_name(name)
        content_type = _declared_type(content_type)
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise errors.BadRequest(
                "size must be the upload's length in bytes, 1 or more", code="invalid_size"
            )
        book = self.revisions.owned(caller, book_id)
        _within_limits(book, name, size)
        upload_id = _upload_id(size)
        key = upload_key(book_id, upload_id)
        headers = {"Content-Type": content_type, "Content-Length": str(size)}
        return {
            "upload_id": upload_id,
            "name": name,
            "upload_url": self.objects.presign_put(key, content_type, size, ASSET_URL_SECONDS),
            "method": "PUT",
            "headers": headers,
            "expires_at": iso(self.clock() + ASSET_URL_SECONDS),
            "max_bytes": MAX_ASSET_BYTES,
        }

    def adopt_asset(self, caller: str, book_id: str, name: str, upload_id: Any, if_match: str | None) -> Book:
        """Check the uploaded bytes and make them the book's asset `name` (a new one, or a replacement), in
        a new revision. Every refusal comes before anything is written."""
        name = images.asset_name(name)
        declared_size = _declared_size(upload_id)
        if declared_size is None:
            raise errors.BadRequest("upload_id is not one this API issued", code="invalid_upload_id")
        book = self.revisions.owned(caller, book_id)
        adopted = book.asset(name)
        if adopted is not None and adopted.object_id == upload_id:
            # This very upload is the asset already: a retry whose first try went through, its answer lost
            # (the upload itself is gone by now). The answer is the one the first try would have had.
            return book
        source = upload_key(book_id, upload_id)
        found = self.objects.head(source)
        if found is None:
            raise errors.Unprocessable("nothing was uploaded under this upload_id", code="upload_not_found")
        size, declared = found
        if size != declared_size:
            # S3 refuses a PUT of another length than its URL was signed for, but moto does not, and the
            # limits were checked against the declared size: the adoption takes only what was declared.
            # Nothing is written; the upload is left to the bucket's rule for books/uploads/ (2 days).
            raise errors.Unprocessable(
                f"{name}: {size:,} bytes were uploaded, but the upload was declared as {declared_size:,} "
                "bytes; ask for a new upload with its true size",
                code="upload_size_mismatch",
                declared_bytes=declared_size,
                uploaded_bytes=size,
            )
        _within_limits(book, name, size)
        head = self.objects.read_range(source, 0, images.HEAD_BYTES - 1)
        tail = (
            head[-images.TAIL_BYTES :]
            if size <= len(head)
            else self.objects.read_range(source, -images.TAIL_BYTES, 0)
        )
        # A GIF's frames, an extended WebP's chunks and an APNG's are walked to the end: one more GET, of
        # `size` bytes at most (MAX_ASSET_BYTES, checked above), unless the head already holds every byte.
        whole = (lambda: [head]) if size <= len(head) else (lambda: self.objects.chunks(source))
        picture = images.examine(name, declared, head, tail, size, whole)
        # The asset's object is named by its upload: one upload is one object, however often it is adopted.
        asset = Asset(name, upload_id, picture.content_type, picture.width, picture.height, size)
        now = self.clock()
        self.book_rows.stage_asset(book_id, asset.object_id, now + STAGE_GRACE_SECONDS)
        self.objects.copy(source, asset_key(book_id, asset.object_id), picture.content_type)

        def change(current: Book) -> tuple[Book, str | None] | None:
            old = current.asset(name)
            if old is not None and old.object_id == upload_id:
                return None  # a concurrent try of this same adoption won: nothing left to change
            _within_limits(current, name, size)
            kept = tuple(a for a in current.assets if a.name != name)
            return replace(current, assets=(*kept, asset)), old.object_id if old else None

        published = self.revisions.publish_change(
            caller, book_id, if_match, change, staged=asset.object_id, read=book
        )
        try:
            self.objects.delete([source])
        except StorageError:  # the bucket's lifecycle rule for books/uploads/ removes it
            logger.warning("adopted upload not deleted", extra={"book_id": book_id}, exc_info=True)
        logger.info("asset adopted", extra={"book_id": book_id, "asset": name, "bytes": size})
        return published

    def delete_asset(self, caller: str, book_id: str, name: str, if_match: str | None) -> Book:
        name = images.asset_name(name)

        def change(current: Book) -> tuple[Book, str | None]:
            old = current.asset(name)
            if old is None:
                raise errors.NotFound(f"the book has no asset named {name}", code="asset_not_found")
            if current.metadata.cover == name:
                raise errors.Conflict(
                    f"{name} is the book's cover; set metadata.cover to another image (or null) first",
                    code="asset_is_cover",
                )
            return replace(current, assets=tuple(a for a in current.assets if a.name != name)), old.object_id

        return self.revisions.publish_change(caller, book_id, if_match, change)


# An asset's upload id: a random token, then "s" and the size its ticket declared. The id names the upload's
# key and the presigned PUT is signed for that key alone, so the adoption reads the declared size from the
# id: no ticket is stored, and nothing the upload carries is trusted.
_UPLOAD_ID = re.compile(r"[0-9a-f]{24}s([1-9][0-9]{0,8})")


def _upload_id(size: int) -> str:
    return f"{secrets.token_hex(12)}s{size}"


def _declared_size(upload_id: Any) -> int | None:
    """The size an asset's upload id was issued for; None for anything this API did not issue."""
    found = _UPLOAD_ID.fullmatch(upload_id) if isinstance(upload_id, str) else None
    return int(found.group(1)) if found else None


def _declared_type(value: Any) -> str:
    if not isinstance(value, str):
        raise errors.BadRequest("content_type must be a string", code="invalid_field")
    value = value.split(";", 1)[0].strip().lower()
    if value == "image/svg+xml":
        raise images.refused(
            "SVG is not accepted (it can carry script); send PNG, JPEG, GIF or WebP", "svg_refused"
        )
    if value not in images.TYPES:
        raise images.refused(f"{value[:60]!r} is not an accepted image type", "unsupported_type")
    return value


def _within_limits(book: Book, name: str, size: int) -> None:
    """413 when the book would hold too many assets or too many bytes of them. A replacement counts
    instead of the asset it replaces."""
    if size > MAX_ASSET_BYTES:
        raise errors.PayloadTooLarge(
            f"{name} is {size:,} bytes; an asset may be at most {MAX_ASSET_BYTES:,}",
            code="asset_too_large",
            limit=MAX_ASSET_BYTES,
        )
    others = [a for a in book.assets if a.name != name]
    if len(others) + 1 > MAX_ASSETS:
        raise errors.PayloadTooLarge(
            f"the book has {len(others)} assets, the most a book may have is {MAX_ASSETS}",
            code="too_many_assets",
            limit=MAX_ASSETS,
        )
    total = sum(a.size_bytes for a in others) + size
    if total > MAX_BOOK_ASSET_BYTES:
        raise errors.PayloadTooLarge(
            f"the book's assets would be {total:,} bytes; the most they may be is {MAX_BOOK_ASSET_BYTES:,}",
            code="assets_too_large",
            limit=MAX_BOOK_ASSET_BYTES,
        )
