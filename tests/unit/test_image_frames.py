"""Images are what they say: every frame of a GIF and of an APNG, and a WebP's real stream, agree with the
size the header declares, or the upload is refused at adoption with `image_dimensions_disagree`. The bytes
are built here: a GIF whose screen says 1x1 over an 11,000 x 11,000 frame (Typst would decode about
490 MiB of it), an APNG whose canvas says 1x1 over a frame as large, a WebP whose canvas says 1x1 over an
8,000 x 8,000 stream; and real animations, which are adopted."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator

import pytest
from PIL import Image, ImageDraw

from bindery import errors, images
from bindery.objects import assets_prefix
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import add_asset

# --- GIF -----------------------------------------------------------------------------------------------


def _sub_blocks(data: bytes) -> bytes:
    return (
        b"".join(bytes([len(p)]) + p for p in (data[i : i + 255] for i in range(0, len(data), 255))) + b"\0"
    )


def gif(
    screen: tuple[int, int],
    frames: list[tuple[int, int, int, int]],
    *,
    data: bytes | list[bytes] = b"\x4c\x01",
) -> bytes:
    """A GIF89a: a logical screen with no global colours, then for each frame (left, top, width, height) a
    graphic control extension, an image descriptor with a 2-colour local table, and its `data` (one for
    all, or one each) as LZW sub-blocks, never decoded here: only walked."""
    out = b"GIF89a" + struct.pack("<HHBBB", *screen, 0, 0, 0)
    out += b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"  # application extension: loop forever
    each = data if isinstance(data, list) else [data] * len(frames)
    for (left, top, width, height), pixels in zip(frames, each, strict=True):
        out += b"\x21\xf9\x04\x04\x0a\x00\x00\x00"  # graphic control extension: 100 ms
        out += b"\x2c" + struct.pack("<HHHHB", left, top, width, height, 0x80) + b"\0\0\0\xff\xff\xff"
        out += b"\x02" + _sub_blocks(pixels)
    return out + b"\x3b"


def _frames(kind: str) -> bytes:
    """A real three-frame animation, as Pillow writes one: later frames are the changed part only, each a
    smaller rectangle at an offset inside the 40 x 30 screen or canvas."""
    frames = []
    for i in range(3):
        frame = Image.new("RGB", (40, 30), (10, 10, 10))
        ImageDraw.Draw(frame).rectangle([5 + i * 5, 5, 12 + i * 5, 12], fill=(200, 50, 50))
        frames.append(frame)
    out = io.BytesIO()
    frames[0].save(out, format=kind, save_all=True, append_images=frames[1:], duration=100, loop=0)
    return out.getvalue()


# --- WebP ----------------------------------------------------------------------------------------------


def _chunk(fourcc: bytes, payload: bytes) -> bytes:
    return fourcc + struct.pack("<I", len(payload)) + payload + b"\0" * (len(payload) & 1)


def _vp8l(width: int, height: int) -> bytes:
    """A lossless bitstream's header: its signature and 14-bit sides, then filler never decoded here."""
    bits = (width - 1) | (height - 1) << 14
    return _chunk(b"VP8L", b"\x2f" + struct.pack("<I", bits) + b"\0" * 20)


def _vp8(width: int, height: int) -> bytes:
    """A lossy key frame's header: frame tag, start code, 14-bit sides; then filler."""
    return _chunk(b"VP8 ", b"\x30\x01\x00\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\0" * 20)


def _le24(value: int) -> bytes:
    return value.to_bytes(3, "little")


def webp(canvas: tuple[int, int], *chunks: bytes, animated: bool = False) -> bytes:
    flags = 0x02 if animated else 0
    vp8x = _chunk(b"VP8X", bytes([flags]) + b"\0\0\0" + _le24(canvas[0] - 1) + _le24(canvas[1] - 1))
    body = b"WEBP" + vp8x + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def anmf(x: int, y: int, width: int, height: int, *inside: bytes) -> bytes:
    header = _le24(x // 2) + _le24(y // 2) + _le24(width - 1) + _le24(height - 1) + _le24(100) + b"\0"
    return _chunk(b"ANMF", header + b"".join(inside))


ANIM = _chunk(b"ANIM", b"\0\0\0\0\0\0")


# --- APNG ----------------------------------------------------------------------------------------------


def _png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """A PNG's chunks after its signature, each (type, data)."""
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack_from(">I", data, at)
        chunks.append((data[at + 4 : at + 8], data[at + 8 : at + 8 + length]))
        at += 12 + length
    return chunks


def _png(chunks: list[tuple[bytes, bytes]]) -> bytes:
    """The PNG of `chunks`, each with its length and its CRC written anew."""
    return b"\x89PNG\r\n\x1a\n" + b"".join(
        struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
        for kind, payload in chunks
    )


def _overrun(data: bytes, kind: bytes) -> bytes:
    """`data` with its last chunk of `kind` saying it is 900 bytes long: past the file's end."""
    at = data.rindex(kind) - 4
    return data[:at] + struct.pack(">I", 900) + data[at + 4 :]


def apng(
    canvas: tuple[int, int],
    frame: tuple[int, int, int, int] | None = None,
    *,
    filler: int = 0,
    filler_first: bool = False,
) -> bytes:
    """A two-frame APNG as Pillow writes it, on a `canvas`; its second frame control chunk (fcTL) then made
    to say `frame` (x, y, width, height), its CRC with it. `filler` bytes of a private ancillary chunk go
    before the second frame, or before everything but IHDR (`filler_first`: past the head's end before the
    acTL chunk and the first IDAT)."""
    frames = [Image.new("RGB", canvas, colour) for colour in ((10, 10, 10), (200, 50, 50))]
    out = io.BytesIO()
    frames[0].save(out, format="PNG", save_all=True, append_images=frames[1:], duration=100, loop=0)
    chunks, controls = _png_chunks(out.getvalue()), 0
    for n, (kind, payload) in enumerate(chunks):
        if kind == b"fcTL":
            controls += 1
            if controls == 2 and frame is not None:
                x, y, width, height = frame
                chunks[n] = (kind, payload[:4] + struct.pack(">IIII", width, height, x, y) + payload[20:])
    assert controls == 2
    if filler:
        at = 1 if filler_first else [kind for kind, _ in chunks].index(b"fdAT") - 1
        chunks.insert(at, (b"prVt", b"\0" * filler))
    return _png(chunks)


# A first frame of 1 x 1 whose data runs past the 128 KiB head an adoption reads first, then a second frame
# of 11,000 x 11,000 pixels: only a walk of the whole stream finds it.
HIDDEN = gif((1, 1), [(0, 0, 1, 1), (0, 0, 11_000, 11_000)], data=[b"\x4c" * 200_000, b"\x4c\x01"])

DISAGREEING = {
    "a GIF whose frame is larger than its screen": ("bomb.gif", gif((1, 1), [(0, 0, 11_000, 11_000)])),
    "a GIF whose frame lies past its screen's edge": ("edge.gif", gif((40, 30), [(30, 0, 20, 30)])),
    "a GIF whose large frame is past the first 128 KiB": ("hidden.gif", HIDDEN),
    "a WebP whose canvas is smaller than its lossless stream": ("bomb.webp", webp((1, 1), _vp8l(8000, 8000))),
    "a WebP whose canvas is smaller than its lossy stream": ("lossy.webp", webp((1, 1), _vp8(8000, 8000))),
    "an animated WebP whose frame is larger than its canvas": (
        "frame.webp",
        webp((100, 100), ANIM, anmf(0, 0, 8000, 8000, _vp8l(8000, 8000)), animated=True),
    ),
    "an animated WebP whose frame's stream is larger than the frame": (
        "inner.webp",
        webp((100, 100), ANIM, anmf(0, 0, 10, 10, _vp8l(8000, 8000)), animated=True),
    ),
    "an APNG whose frame is larger than its canvas": ("bomb.png", apng((1, 1), (0, 0, 11_000, 11_000))),
    "an APNG whose frame lies past its canvas's edge": ("edge.png", apng((40, 30), (30, 0, 20, 30))),
    "an APNG whose large frame is past the first 128 KiB": (
        "hidden.png",
        apng((1, 1), (0, 0, 11_000, 11_000), filler=200_000),
    ),
    "an APNG whose animation control is past the first 128 KiB": (
        "late.png",
        apng((1, 1), (0, 0, 11_000, 11_000), filler=200_000, filler_first=True),
    ),
    "an animated WebP whose frame lies past its canvas's edge": (
        "offset.webp",
        webp((100, 100), ANIM, anmf(96, 0, 10, 10, _vp8l(10, 10)), animated=True),
    ),
}


@pytest.mark.parametrize("case", sorted(DISAGREEING))
def test_an_image_whose_header_disagrees_with_its_stream_is_refused_at_adoption(
    stack: Stack, case: str
) -> None:
    name, data = DISAGREEING[case]
    content_type = images.EXTENSIONS[name.rsplit(".", 1)[1]]
    book = stack.create_book()

    reply = add_asset(stack, book, name, content_type, data)

    assert (reply.status, reply.body.get("error", {}).get("code")) == (422, "image_dimensions_disagree")
    assert name in reply.body["error"]["message"]
    assert stack.http("GET", f"/books/{book}").body["assets"] == []
    assert stack.objects.keys(assets_prefix(book)) == []


@pytest.mark.parametrize(
    ("name", "data", "size"),
    [
        ("anim.gif", _frames("GIF"), (40, 30)),
        ("anim.webp", _frames("WEBP"), (40, 30)),
        ("anim.png", _frames("PNG"), (40, 30)),  # an APNG: its frames the changed rectangles
        ("long.png", apng((40, 30), (10, 10, 30, 20), filler=200_000, filler_first=True), (40, 30)),
        ("offsets.gif", gif((40, 30), [(0, 0, 40, 30), (30, 20, 10, 10), (0, 0, 1, 1)]), (40, 30)),
        ("long.gif", gif((40, 30), [(0, 0, 40, 30)], data=b"\x4c" * 300_000), (40, 30)),
        ("still.webp", webp((64, 48), _chunk(b"ICCP", b"\0" * 9), _vp8l(64, 48)), (64, 48)),
        ("frames.webp", webp((100, 100), ANIM, anmf(0, 0, 100, 100, _vp8l(100, 100)),
                             anmf(90, 80, 10, 20, _chunk(b"ALPH", b"\0" * 3), _vp8(10, 20)), animated=True),
         (100, 100)),
    ],
)  # fmt: skip
def test_an_animation_whose_frames_fit_its_canvas_is_adopted(
    stack: Stack, name: str, data: bytes, size: tuple[int, int]
) -> None:
    book = stack.create_book()
    content_type = images.EXTENSIONS[name.rsplit(".", 1)[1]]

    reply = add_asset(stack, book, name, content_type, data)

    assert reply.status == 200, reply.body
    assert [(a["name"], a["width"], a["height"]) for a in reply.body["assets"]] == [(name, *size)]


# --- examine, on the bytes alone -------------------------------------------------------------------------


def _examine(name: str, data: bytes, read: Iterator[bytes] | None = None) -> images.Picture:
    head = data[: images.HEAD_BYTES]
    return images.examine(
        name, None, head, data[-images.TAIL_BYTES :], len(data), lambda: read or iter([data[:7], data[7:]])
    )


@pytest.mark.parametrize(
    ("name", "data", "code"),
    [
        ("none.gif", gif((40, 30), []), "unreadable_dimensions"),  # a screen and no image on it
        ("block.gif", gif((40, 30), [(0, 0, 4, 4)])[:-1] + b"\x99\x3b", "unreadable_dimensions"),
        ("cut.gif", gif((40, 30), [(0, 0, 4, 4)], data=b"\x4c" * 600)[:-300] + b"\x3b", "truncated"),
        ("empty.webp", webp((10, 10), _chunk(b"EXIF", b"\0\0")), "unreadable_dimensions"),
        ("long.webp", webp((10, 10), b"VP8L" + struct.pack("<I", 900) + _vp8l(10, 10)[8:]), "truncated"),
        ("unsigned.webp", webp((10, 10), _chunk(b"VP8L", b"\x00" * 25)), "unreadable_dimensions"),
        (  # a frame control chunk too short to say the frame's place and size
            "short.png",
            _png([(k, p[:20] if k == b"fcTL" else p) for k, p in _png_chunks(apng((4, 4)))]),
            "unreadable_dimensions",
        ),
        ("long.png", _overrun(apng((4, 4)), b"fdAT"), "truncated"),  # the last frame's data runs past IEND
    ],
)
def test_a_stream_that_cannot_be_walked_to_its_end_is_refused(name: str, data: bytes, code: str) -> None:
    with pytest.raises(errors.Unprocessable) as refused:
        _examine(name, data)
    assert refused.value.code == code
    assert name in str(refused.value)


def test_a_gif_walk_reads_no_more_than_the_size_the_upload_has() -> None:
    """A GIF whose sub-blocks never end: the walk stops at the object's size, as truncated, however much
    more a stream would give."""
    data = gif((1, 1), [(0, 0, 1, 1)], data=b"\x4c" * 600)
    pulled = 0

    def endless() -> Iterator[bytes]:
        nonlocal pulled
        yield data[:-2]  # up to the last sub-block, then sub-blocks for ever
        pulled += len(data) - 2
        while True:
            pulled += 256
            yield b"\xff" + b"\x4c" * 255

    with pytest.raises(errors.Unprocessable) as refused:
        _examine("endless.gif", data, endless())
    assert refused.value.code == "truncated"
    assert pulled <= len(data) + 256


def test_only_a_gif_an_extended_webp_or_an_apng_is_read_whole() -> None:
    """A PNG (whose chunks up to its first IDAT hold no acTL: no APNG decoder reads frames in it), a JPEG
    (even one whose bytes 12 to 16 happen to spell VP8X) and a simple WebP are measured from their head
    alone: no second read of the object."""
    from tests.books.illustrated import picture

    def unread() -> Iterator[bytes]:
        raise AssertionError("read whole")

    jpeg = picture("JPEG", 64, 48)
    noise = Image.frombytes("RGB", (64, 48), bytes(range(256)) * 36)
    large = io.BytesIO()
    noise.resize((640, 480)).save(large, format="PNG", compress_level=0)
    assert len(large.getvalue()) > 2 * images.HEAD_BYTES
    for name, data, size in (
        ("a.png", picture("PNG", 64, 48), (64, 48)),
        ("large.png", large.getvalue(), (640, 480)),  # its IDAT chunks run far past the head
        ("a.jpg", jpeg[:12] + b"VP8X" + jpeg[16:], (64, 48)),
        ("a.webp", picture("WEBP", 64, 48), (64, 48)),
    ):
        got = images.examine(
            name, None, data[: images.HEAD_BYTES], data[-images.TAIL_BYTES :], len(data), unread
        )
        assert (got.width, got.height) == size, name
