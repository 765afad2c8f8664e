"""The epub's zip, written forward into a seekable file: entries stored or deflated as zipfile writes them,
and one thing zipfile cannot do, an entry whose deflated bytes were made earlier (`Deflated`): a chapter's
page, reused from the cache of built pieces, is copied into the zip as it was kept, not compressed again.

What it writes is plain ZIP (APPNOTE 6.3.10, sections 4.3.7, 4.3.12 and 4.3.16): each entry's local header
carries its CRC-32 and sizes (no data descriptors), then a central directory and its end record. No ZIP64:
an epub past 4 GiB or 65,535 entries is refused (`TooLarge`), far past what a book's limits allow.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO

STORED, DEFLATED = 0, 8
# zipfile's own choices, so an entry reads as zipfile would have written it: deflate at zlib's default level
# into a raw stream; "version made by" 2.0 on Unix; "needed to extract" 1.0 stored, 2.0 deflated.
LEVEL = zlib.Z_DEFAULT_COMPRESSION
MADE_BY = (3 << 8) | 20
NEEDS = {STORED: 10, DEFLATED: 20}
LIMIT = 0xFFFFFFFF
LOCAL = struct.Struct("<4sHHHHHLLLHH")
CENTRAL = struct.Struct("<4sHHHHHHLLLHHHHHLL")
END = struct.Struct("<4sHHHHLLH")


class TooLarge(Exception):
    """The zip would need ZIP64."""


@dataclass(frozen=True)
class Deflated:
    """An entry's bytes deflated, with what its headers say of the bytes they came from."""

    data: bytes
    crc: int
    size: int

    @classmethod
    def of(cls, raw: bytes) -> Deflated:
        packer = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
        return cls(packer.compress(raw) + packer.flush(), zlib.crc32(raw), len(raw))

    def kept(self) -> bytes:
        """As a piece keeps it: CRC-32 and size, then the deflated bytes."""
        return struct.pack("<LL", self.crc, self.size) + self.data

    @classmethod
    def from_kept(cls, kept: bytes) -> Deflated:
        crc, size = struct.unpack_from("<LL", kept)
        return cls(kept[8:], crc, size)


@dataclass(frozen=True)
class _Entry:
    name: bytes
    method: int
    crc: int
    compressed: int
    size: int
    offset: int
    attr: int
    when: tuple[int, int]


class ZipWriter:
    """Entries written in the order they are added; `close` writes the central directory."""

    def __init__(self, out: IO[bytes], date_time: tuple[int, ...]):
        self._out = out
        year, month, day, hour, minute, second = date_time[:6]
        self._when = ((hour << 11) | (minute << 5) | (second // 2), ((year - 1980) << 9) | (month << 5) | day)
        self._entries: list[_Entry] = []

    def stored(self, name: str, data: bytes, *, attr: int = 0, dated: bool = True) -> None:
        self._header(name, STORED, zlib.crc32(data), len(data), len(data), attr, dated)
        self._out.write(data)

    def deflated(self, name: str, data: Deflated, *, attr: int = 0o600 << 16) -> None:
        self._header(name, DEFLATED, data.crc, len(data.data), data.size, attr, dated=True)
        self._out.write(data.data)

    def stream_stored(self, name: str, chunks: Iterable[bytes], *, attr: int = 0) -> None:
        """An entry stored as it is read (an image): its header is written first, then set right."""
        start = self._out.tell()
        self._header(name, STORED, 0, 0, 0, attr, dated=True)
        crc = size = 0
        for chunk in chunks:
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
            self._out.write(chunk)
        end = self._out.tell()
        self._entries.pop()
        self._out.seek(start)
        self._header(name, STORED, crc, size, size, attr, dated=True)
        self._out.seek(end)

    def close(self) -> None:
        directory = self._out.tell()
        for e in self._entries:
            record = CENTRAL.pack(
                b"PK\x01\x02", MADE_BY, NEEDS[e.method], 0, e.method, *e.when, e.crc, e.compressed, e.size,
                len(e.name), 0, 0, 0, 0, e.attr, e.offset,
            )  # fmt: skip
            self._out.write(record + e.name)
        size, count = self._out.tell() - directory, len(self._entries)
        if directory > LIMIT or count > 0xFFFF:
            raise TooLarge(f"{count} entries, {directory} bytes: past what a zip holds without ZIP64")
        self._out.write(END.pack(b"PK\x05\x06", 0, 0, count, count, size, directory, 0))

    def _header(
        self, name: str, method: int, crc: int, compressed: int, size: int, attr: int, dated: bool
    ) -> None:
        offset, encoded = self._out.tell(), name.encode("ascii")
        if offset + compressed > LIMIT or size > LIMIT:
            raise TooLarge(f"{name} ends past 4 GiB: past what a zip holds without ZIP64")
        when = self._when if dated else (0, (1 << 5) | 1)  # 1980-01-01 00:00, zipfile's default
        self._entries.append(_Entry(encoded, method, crc, compressed, size, offset, attr, when))
        self._out.write(
            LOCAL.pack(b"PK\x03\x04", NEEDS[method], 0, method, *when, crc, compressed, size, len(encoded), 0)
            + encoded
        )
