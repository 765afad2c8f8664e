"""The joined PDF as it is written (`bindery.engine.join` decides what goes in it): objects into compressed
object streams, PER_STREAM at a time, as pikepdf's `generate` would; streams directly; and a
cross-reference stream at the end that records where each object went. Also how a piece's objects are
copied into it: unparsed by pikepdf, each reference renumbered past the pieces before."""

from __future__ import annotations

import re
import sys
import zlib
from array import array
from collections import deque
from dataclasses import dataclass
from typing import BinaryIO

import pikepdf

PER_STREAM = 200  # objects in each object stream

# A reference in qpdf's unparsed syntax, or a literal string to step over (qpdf escapes the parentheses
# inside one, so a title such as "Chapter 12 0 R" is never read as a reference).
_TOKENS = re.compile(rb"\((?:\\.|[^\\)])*\)|(?<![\d.])(\d+) (\d+) R(?=[\s/\]\[<>()]|$)", re.S)


@dataclass(frozen=True)
class Written:
    """A piece as the join wrote it: its bytes, and its cross-reference entries (number, kind, where,
    index), an offset's `where` taken from the bytes' start."""

    data: bytes
    entries: list[tuple[int, int, int, int]]


def real(value: float) -> bytes:
    """A number as the joined file writes a real: four decimals."""
    return f"{value:.4f}".encode()


class JoinedFile:
    """The joined PDF as it is written: objects go into object streams, streams directly, and the
    cross-reference stream records where each one went."""

    def __init__(self, out: BinaryIO, next_number: int):
        self.out = out
        self.next_number, self.end = next_number, sys.maxsize
        # Per object number, in arrays (a few bytes an object, not a Python object each): 0 free, 1 at an
        # offset, 2 inside an object stream; the offset or the object stream's number (4 bytes: a book's
        # file stays under 4 GiB, the 50 MiB bound's is about 50 MB); the place inside its object stream.
        self.kind = bytearray()
        self.where = array("I")
        self.index = array("H")
        self.pending: list[tuple[int, bytes]] = []
        # While a piece is written apart (`apart`): the file's own pending objects and numbers, set aside;
        # where the piece's bytes start; and the numbers it gave an entry.
        self._outside: tuple[list[tuple[int, bytes]], int, int] | None = None
        self._start = 0
        self._recorded: list[int] | None = None
        out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")

    def number(self) -> int:
        if self.next_number >= self.end:
            raise ValueError("a piece's objects overran the numbers set aside for it")
        self.next_number += 1
        return self.next_number - 1

    def apart(self, next_number: int, end: int) -> None:
        """From here, objects put are a piece's own, in object streams of its own, numbered from
        `next_number` below `end` (see bindery.engine.segments), until `written`."""
        self._outside = (self.pending, self.next_number, self.end)
        self.pending, self.next_number, self.end = [], next_number, end
        self._recorded, self._start = [], self.out.tell()

    def written(self) -> Written:
        """The piece begun by `apart`, whole: its bytes and its entries, read back from the file."""
        assert self._outside is not None and self._recorded is not None
        self._flush()
        self.pending, self.next_number, self.end = self._outside
        entries = [
            (n, self.kind[n], self.where[n] - self._start * (self.kind[n] == 1), self.index[n])
            for n in self._recorded
        ]
        self._outside, self._recorded = None, None
        end = self.out.tell()
        self.out.seek(self._start)
        data = self.out.read(end - self._start)
        self.out.seek(end)
        return Written(data, entries)

    def place(self, written: Written) -> None:
        """A piece written by an earlier join, copied in as it was."""
        at = self.out.tell()
        self.out.write(written.data)
        if written.entries:
            self._grow(max(entry[0] for entry in written.entries))
        kinds, wheres, indexes = self.kind, self.where, self.index
        for number, kind, where, index in written.entries:  # a hundred thousand for a long book: no call each
            kinds[number], wheres[number], indexes[number] = kind, where + at if kind == 1 else where, index

    def _grow(self, number: int) -> None:
        if number >= len(self.kind):
            grow = number + 1 - len(self.kind)
            self.kind.extend(bytes(grow))
            self.where.frombytes(bytes(grow * self.where.itemsize))
            self.index.frombytes(bytes(grow * self.index.itemsize))

    def _entry(self, number: int, kind: int, where: int, index: int) -> None:
        self._grow(number)
        if self._recorded is not None:
            self._recorded.append(number)
        self.kind[number], self.where[number], self.index[number] = kind, where, index

    def put(self, number: int, body: bytes) -> None:
        self.pending.append((number, body))
        if len(self.pending) >= PER_STREAM:
            self._flush()

    def put_stream(self, number: int, head: bytes, data: bytes) -> None:
        self._entry(number, 1, self.out.tell(), 0)
        self.out.write(b"%d 0 obj\n%s\nstream\n" % (number, head))
        self.out.write(data)
        self.out.write(b"\nendstream\nendobj\n")

    def _flush(self) -> None:
        if not self.pending:
            return
        stream = self.number()
        offsets, bodies, at = [], [], 0
        for n, (number, body) in enumerate(self.pending):
            self._entry(number, 2, stream, n)
            offsets.append(b"%d %d" % (number, at))
            bodies.append(body)
            at += len(body) + 1
        header = b" ".join(offsets) + b"\n"
        data = zlib.compress(header + b"\n".join(bodies) + b"\n", 6)
        head = b"<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode /Length %d >>" % (
            len(self.pending),
            len(header),
            len(data),
        )
        self.pending = []
        self.put_stream(stream, head, data)

    def finish(self, root: int, info: int | None, ids: bytes | None) -> None:
        self._flush()
        xref = self.number()
        self._entry(xref, 1, self.out.tell(), 0)
        self._entry(0, 0, 0, 65535)
        packer, chunks = zlib.compressobj(6), []
        for start in range(0, len(self.kind), 65536):  # compressed as it is made, 64 Ki rows at a time
            chunks.append(packer.compress(_rows(self.kind, self.where, self.index, start, start + 65536)))
        chunks.append(packer.flush())
        data = b"".join(chunks)
        trailer = (
            b"/Root %d 0 R" % root
            + (b" /Info %d 0 R" % info if info else b"")
            + (b" /ID " + ids if ids else b"")
        )
        head = b"<< /Type /XRef /Size %d /W [ 1 5 2 ] %s /Filter /FlateDecode /Length %d >>" % (
            len(self.kind),
            trailer,
            len(data),
        )
        at = self.out.tell()
        self.put_stream(xref, head, data)
        self.out.write(b"startxref\n%d\n%%%%EOF\n" % at)


def _rows(kind: bytearray, where: array[int], index: array[int], start: int, end: int) -> bytes:
    """Cross-reference rows `start` to `end`, each 8 bytes (W [1 5 2]: kind; where, big-endian; index),
    laid column by column with slices, not a row at a time (a long book has a hundred thousand)."""
    kinds = kind[start:end]
    rows = bytearray(8 * len(kinds))
    rows[0::8] = kinds
    wheres, indexes = where[start:end], index[start:end]
    if sys.byteorder == "little":
        wheres.byteswap()
        indexes.byteswap()
    at, to = wheres.tobytes(), indexes.tobytes()
    for byte in range(4):  # the where's high byte (the 5th from the end) stays 0: a file under 4 GiB
        rows[2 + byte :: 8] = at[byte::4]
    for byte in range(2):
        rows[6 + byte :: 8] = to[byte::2]
    return bytes(rows)


def write_reachable(
    book: JoinedFile, pdf: pikepdf.Pdf, roots: deque[int], base: int, redirect: dict[int, int], skip: set[int]
) -> None:
    """Every object reachable from `roots` (following references, never a placeholder), renumbered."""
    seen = set(skip)
    while roots:
        number = roots.popleft()
        if number in seen or number in redirect:
            continue
        seen.add(number)
        obj = pdf.get_object(number, 0)
        if isinstance(obj, pikepdf.Stream):
            data = obj.read_raw_bytes()
            head = obj.stream_dict
            head.Length = len(data)
            book.put_stream(base + number, unparse(head, base, redirect, roots), data)
        else:
            book.put(base + number, unparse(obj, base, redirect, roots))


def unparse(obj: pikepdf.Object, base: int, redirect: dict[int, int], found: deque[int]) -> bytes:
    """`obj` in PDF syntax with every reference renumbered into the joined file (a placeholder's, to what
    it stands for); each piece object it refers to is added to `found`."""

    def renumber(match: re.Match[bytes]) -> bytes:
        if match.group(1) is None:
            return match.group(0)  # a string
        number = int(match.group(1))
        if number in redirect:
            return b"%d 0 R" % redirect[number]
        found.append(number)
        return b"%d 0 R" % (base + number)

    syntax = obj.unparse(resolved=True)
    # Most objects refer to none (a stream's head, a number array): no reference, nothing to scan for.
    return _TOKENS.sub(renumber, syntax) if b" R" in syntax else syntax
