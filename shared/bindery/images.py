"""What an uploaded image is, read from its bytes alone: never from its name or the type it was declared.

Bindery takes PNG, JPEG, GIF and WebP. Each is recognised by its signature, checked whole by its ending
(a truncated upload has none), and measured by `imagesize` from its header. SVG is refused: it is a
document that can carry script, not a picture. A declared size past the pixel limit is refused before any
renderer could be asked to decode it (an image bomb is a small file that claims a huge canvas).
"""

from __future__ import annotations

import io
import json
import re
import struct
from dataclasses import dataclass, field
from typing import Any

from bindery import errors

TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
EXTENSIONS = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
              "webp": "image/webp"}  # fmt: skip
MAX_SIDE = 16_384
NOTES_KEPT = 50  # how many missing images, and how many warnings, an export keeps and a poll shows
MAX_PIXELS = 50_000_000
# How much of the start and of the end of an upload a check reads. A JPEG's size is in its frame header,
# which comes after its EXIF block; EXIF is at most 64 KiB, so the frame is inside the first 128 KiB.
HEAD_BYTES = 128 * 1024
TAIL_BYTES = 16


@dataclass(frozen=True)
class Picture:
    content_type: str
    width: int
    height: int


@dataclass(frozen=True)
class Asset:
    """One of a book's images, as the revision being built has it."""

    name: str
    object_id: str
    content_type: str
    width: int
    height: int
    size_bytes: int

    @property
    def file_name(self) -> str:
        """Its name inside an export: unique (the object id), with the extension of its real type."""
        return f"{self.object_id}.{TYPES[self.content_type]}"


def refused(message: str, code: str) -> errors.Unprocessable:
    return errors.Unprocessable(message, code=code, accepted=sorted(TYPES))


def sniff(head: bytes) -> str | None:
    """The content type the first bytes announce, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _whole(content_type: str, head: bytes, tail: bytes, size: int) -> bool:
    """Whether the file ends as its type says a whole one does."""
    if content_type == "image/png":
        return tail.endswith(b"IEND\xaeB`\x82")
    if content_type == "image/jpeg":
        return tail.rstrip(b"\x00").endswith(b"\xff\xd9")
    if content_type == "image/gif":
        return tail.endswith(b"\x3b")
    (riff_size,) = struct.unpack("<I", head[4:8])
    return riff_size + 8 == size


def examine(name: str, declared: str | None, head: bytes, tail: bytes, size: int) -> Picture:
    """The picture these bytes are, or a 422 naming what is wrong: not an image, not the type the name or
    the declaration says, cut short, or too large a canvas."""
    found = sniff(head)
    if found is None:
        # Only bytes no raster signature claims are looked at as SVG: a PNG may carry "<svg" in a text chunk.
        if b"<svg" in head[:1024].lower() or head.lstrip()[:5].lower() in (b"<?xml", b"<svg"):
            raise refused(f"{name}: SVG is not accepted (it can carry script); send PNG, JPEG, GIF or WebP",
                          "svg_refused")  # fmt: skip
        raise refused(f"{name}: the bytes are not a PNG, JPEG, GIF or WebP image", "not_an_image")
    if declared is not None and declared != found:
        raise refused(f"{name}: declared {declared}, but the bytes are {found}", "type_mismatch")
    extension = name.rsplit(".", 1)[-1].lower() if "." in name.rsplit("/", 1)[-1] else None
    if extension is not None and EXTENSIONS.get(extension) != found:
        raise refused(f"{name}: the name says .{extension}, but the bytes are {found}", "type_mismatch")
    if not _whole(found, head, tail, size):
        raise refused(f"{name}: the {TYPES[found].upper()} is cut short (its ending is missing)", "truncated")
    import imagesize  # only an upload being adopted needs it

    width, height = imagesize.get(io.BytesIO(head))
    if width <= 0 or height <= 0:
        raise refused(f"{name}: its dimensions cannot be read from its header", "unreadable_dimensions")
    if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
        raise refused(
            f"{name}: {width}x{height} is larger than the most an image may be ({MAX_SIDE:,} pixels a side, "
            f"{MAX_PIXELS:,} in all)",
            "image_too_large",
        )
    return Picture(found, width, height)


# An asset's name is a relative path of plain segments, as a manuscript writes it: images/coast.png.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}(?:/[A-Za-z0-9_][A-Za-z0-9._-]{0,99}){0,3}")
MAX_NAME = 200


def asset_name(value: object) -> str:
    """The name, or a 422 that says what a name may be. No `..`, no leading `/`, no scheme: a name can only
    ever be a path inside the book."""
    if not isinstance(value, str) or len(value) > MAX_NAME or not _NAME.fullmatch(value):
        raise errors.Unprocessable(
            f"an asset name is a relative path of 1 to 4 segments, each of letters, digits, '.', '_' and '-' "
            f"and not starting with '.' or '-', at most {MAX_NAME} characters in all (like images/coast.png)",
            code="invalid_asset_name",
        )
    return value


def stored(assets: tuple[Asset, ...]) -> str | None:
    if not assets:
        return None
    rows = [[a.name, a.object_id, a.content_type, a.width, a.height, a.size_bytes] for a in assets]
    return json.dumps(rows, separators=(",", ":"))


def from_stored(text: str | None) -> tuple[Asset, ...]:
    return tuple(Asset(*row) for row in json.loads(text)) if text else ()


@dataclass
class Notes:
    """A build's account of its images: the ones the manuscript names that the revision has no asset for,
    and warnings (an image without alt text); the first NOTES_KEPT of each, and how many there were."""

    missing: list[dict[str, Any]] = field(default_factory=list)
    missing_total: int = 0
    warnings: list[dict[str, Any]] = field(default_factory=list)
    warnings_total: int = 0

    def miss(self, note: dict[str, Any]) -> None:
        self.missing_total += 1
        if len(self.missing) < NOTES_KEPT:
            self.missing.append(note)

    def warn(self, note: dict[str, Any]) -> None:
        self.warnings_total += 1
        if len(self.warnings) < NOTES_KEPT:
            self.warnings.append(note)
