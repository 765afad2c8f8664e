"""What an uploaded image is, read from its bytes alone: never from its name or the type it was declared.

Bindery takes PNG, JPEG, GIF and WebP. Each is recognised by its signature, checked whole by its ending
(a truncated upload has none), and measured by `imagesize` from its header. SVG is refused: it is a
document that can carry script, not a picture. A declared size past the pixel limit is refused before any
renderer could be asked to decode it (an image bomb is a small file that claims a huge canvas).

A GIF, an extended WebP and an animated PNG (APNG) hold images of their own sizes under the size their
header declares: a decoder allocates for each what it says, whatever the header says. So each is walked to
its end, once, and every frame checked against the header: one that disagrees is refused, as
`image_dimensions_disagree`.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Callable, Iterable
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


def examine(
    name: str, declared: str | None, head: bytes, tail: bytes, size: int, whole: Callable[[], Iterable[bytes]]
) -> Picture:
    """The picture these bytes are, or a 422 naming what is wrong: not an image, not the type the name or
    the declaration says, cut short, too large a canvas, or a frame that disagrees with it.

    `head` and `tail` are the object's first and last bytes; `whole` gives all `size` of them from the
    first, a chunk at a time, and is asked only of a GIF, an extended WebP or an APNG, whose frames are
    walked (and of a PNG whose chunks before its first image data run past the head)."""
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
    # Every frame inside a canvas within the limits is within them too: the walks check frames against it.
    # A simple WebP's header is its bitstream's own: only an extended one (VP8X) can disagree with it.
    try:
        if found == "image/png":
            # Walked in its head first: read whole only when it is an APNG (an acTL chunk before its first
            # IDAT) or its head ends before that can be told. A file within the head is the head.
            if len(head) >= size:
                _walk_png(name, width, height, memoryview(head)[:size], whole=True)
            elif not _walk_png(name, width, height, memoryview(head)):
                _walk_png(name, width, height, memoryview(_first_bytes(whole(), size)), whole=True)
        elif found == "image/gif":
            _walk_gif(name, width, height, _first_bytes(whole(), size))
        elif found == "image/webp" and head[12:16] == b"VP8X":
            _walk_webp(name, width, height, memoryview(_first_bytes(whole(), size)))
    except (IndexError, struct.error):  # a field or a block past the last byte
        raise refused(f"{name}: the {TYPES[found].upper()} is cut short (its blocks run past its end)",
                      "truncated") from None  # fmt: skip
    return Picture(found, width, height)


def _first_bytes(chunks: Iterable[bytes], size: int) -> bytes:
    """The object's first `size` bytes (a GIF or WebP is walked whole: at most MAX_ASSET_BYTES of them), and
    no more, however many the chunks would give."""
    held: list[bytes] = []
    for chunk in chunks:
        held.append(chunk[:size])
        size -= len(held[-1])
        if size <= 0:
            break
    return b"".join(held)


def _disagrees(name: str, message: str) -> errors.Unprocessable:
    return refused(f"{name}: {message}; the header and the image it holds must agree",
                   "image_dimensions_disagree")  # fmt: skip


def _unreadable(name: str, message: str) -> errors.Unprocessable:
    return refused(f"{name}: {message}", "unreadable_dimensions")


_PNG_CHUNK = struct.Struct(">I4s")  # a PNG chunk's header: its data's length and its type
_FRAME_CONTROL = struct.Struct(">IIII")  # an fcTL's width, height, x offset and y offset, after its sequence


def _walk_png(name: str, width: int, height: int, data: memoryview, *, whole: bool = False) -> bool:
    """Every chunk of a PNG whose canvas (IHDR) is `width` x `height`, by its length alone: each frame an
    APNG's frame control (fcTL) declares lies inside the canvas, as a decoder allocates what it says.

    A PNG with no acTL before its first IDAT is no animation (an APNG decoder reads frames only after an
    acTL, which must come before the image data), so its walk ends there. Each step is one chunk header:
    the walk is linear in the chunks, never reading their data. With `whole`, `data` is the file. Without,
    it is the head, and the walk says whether it could tell (False: an acTL, or a head that ends before the
    first IDAT, needs the whole file)."""
    at, end = 8, len(data)  # past the signature
    animated, frames = False, 0
    while at + 8 <= end:
        length, kind = _PNG_CHUNK.unpack_from(data, at)
        if kind == b"IEND":
            return True
        if kind == b"acTL":
            animated = True
        elif kind == b"IDAT" and not animated:
            return True
        elif kind == b"fcTL":
            if at + 8 + length > end and not whole:
                break  # the chunk runs past the head
            frames += 1
            if length < 26:
                raise _unreadable(
                    name, f"the PNG's frame control {frames} is too short to say its place and size"
                )
            w, h, x, y = _FRAME_CONTROL.unpack_from(data, at + 12)
            if x + w > width or y + h > height:
                raise _disagrees(name, f"the PNG's canvas is {width}x{height}, but its frame {frames} is "
                                       f"{w}x{h} at ({x}, {y}), past the canvas's edge")  # fmt: skip
        at += 12 + length  # its length, type, data and CRC
    if whole:
        raise IndexError  # no IEND where the chunks' lengths lead: a chunk runs past the file's end
    return False


def _walk_gif(name: str, width: int, height: int, data: bytes) -> None:
    """Every image descriptor of a GIF, each inside the logical screen (`width` x `height`): a frame past
    the screen's edge is what a decoder allocates for. Extensions and image data are passed over sub-block
    by sub-block, never decoded: the walk is linear in the file, and touches each block's length alone."""
    at = 13  # past the signature, the version and the logical screen descriptor
    if data[10] & 0x80:
        at += 3 << ((data[10] & 0x07) + 1)  # the global colour table: 2^(n+1) colours of 3 bytes
    frames = 0
    while (block := data[at]) != 0x3B:  # up to the trailer
        if block == 0x21:  # an extension: its label, then its sub-blocks
            at += 2
        elif block == 0x2C:  # an image descriptor, then its local colour table and its LZW data
            left, top, w, h, packed = struct.unpack_from("<HHHHB", data, at + 1)
            frames += 1
            if left + w > width or top + h > height:
                raise _disagrees(name, f"the GIF's screen is {width}x{height}, but its frame {frames} is "
                                       f"{w}x{h} at ({left}, {top}), past the screen's edge")  # fmt: skip
            at += 10 + (3 << ((packed & 0x07) + 1) if packed & 0x80 else 0) + 1  # and the LZW code size
        else:
            raise _unreadable(
                name, f"the GIF has a block of no kind it defines (0x{block:02x}) at byte {at:,}"
            )
        while length := data[at]:  # sub-blocks, up to the empty one
            at += length + 1
        at += 1
    if frames == 0:
        raise _unreadable(name, "the GIF holds no image")


def _walk_webp(name: str, width: int, height: int, data: memoryview) -> None:
    """Every chunk of an extended WebP (VP8X), whose canvas is `width` x `height`. A still image's bitstream
    is the canvas's size (as libwebp's demuxer requires), and an animation's frame (ANMF) lies inside the
    canvas, its own bitstream the frame's size: a decoder allocates what a bitstream says. Each chunk is
    looked at through the view, never copied."""
    at, end = 12, len(data)  # past RIFF, its size (the object's less 8: `_whole` saw to that) and WEBP
    stills = frames = 0
    while at < end:
        fourcc, length = _CHUNK.unpack_from(data, at)
        at += 8
        if fourcc in _BITSTREAMS or fourcc == b"ANMF":
            if at + length > end:
                raise IndexError  # the chunk runs past the file's end
            if fourcc == b"ANMF":
                frames += 1
                _walk_frame(name, width, height, frames, data[at : at + length])
            else:
                stills += 1
                w, h = _bitstream_sides(name, fourcc, data[at : at + length])
                if (w, h) != (width, height):
                    raise _disagrees(name, f"the WebP's canvas is {width}x{height}, but its image is {w}x{h}")
        at += length + (length & 1)  # the odd chunk's pad byte too
    if at > end:
        raise IndexError  # the last chunk ran past the file's end
    if stills == frames == 0:
        raise _unreadable(name, "the WebP holds no image")


_CHUNK = struct.Struct("<4sI")  # a RIFF chunk's header: its FourCC and its length
_BITSTREAMS = (b"VP8 ", b"VP8L")


def _walk_frame(name: str, width: int, height: int, n: int, payload: memoryview) -> None:
    """One ANMF chunk's frame: its place and size, then its bitstream among the chunks inside it."""
    if len(payload) < 16:
        raise _unreadable(name, f"the WebP's frame {n} is too short to say its place and size")
    x, y, w, h = 2 * _le24(payload, 0), 2 * _le24(payload, 3), 1 + _le24(payload, 6), 1 + _le24(payload, 9)
    if x + w > width or y + h > height:
        raise _disagrees(name, f"the WebP's canvas is {width}x{height}, but its frame {n} is {w}x{h} at "
                               f"({x}, {y}), past the canvas's edge")  # fmt: skip
    at = 16
    while at + 8 <= len(payload):
        fourcc, length = _CHUNK.unpack_from(payload, at)
        if at + 8 + length > len(payload):
            break  # a chunk that overruns its frame: no bitstream lies whole inside the frame
        if fourcc in _BITSTREAMS:
            sides = _bitstream_sides(name, fourcc, payload[at + 8 : at + 8 + length])
            if sides != (w, h):
                raise _disagrees(
                    name, f"the WebP's frame {n} is {w}x{h}, but its image is {sides[0]}x{sides[1]}"
                )
            return
        at += 8 + length + (length & 1)
    raise _unreadable(name, f"the WebP's frame {n} holds no image")


def _bitstream_sides(name: str, fourcc: bytes, payload: memoryview) -> tuple[int, int]:
    """The width and height a VP8 or VP8L bitstream declares, from its first bytes."""
    if fourcc == b"VP8L" and len(payload) >= 5 and payload[0] == 0x2F:
        bits = int.from_bytes(
            payload[1:5], "little"
        )  # after the signature, 14 bits of width - 1, of height - 1
        return (bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1
    # A key frame (the tag's low bit clear), its start code, then 14 bits of width and of height.
    if fourcc == b"VP8 " and len(payload) >= 10 and not payload[0] & 1 and payload[3:6] == b"\x9d\x01\x2a":
        w, h = struct.unpack_from("<HH", payload, 6)
        if w & 0x3FFF and h & 0x3FFF:
            return w & 0x3FFF, h & 0x3FFF
    raise _unreadable(name, f"its {fourcc.decode().strip()} bitstream's dimensions cannot be read")


def _le24(data: memoryview, at: int) -> int:
    return int.from_bytes(data[at : at + 3], "little")


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
