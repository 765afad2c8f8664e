"""Where each piece's objects go among the joined PDF's object numbers, and a piece's written objects kept
for the next join (`bindery.engine.join` writes them; `bindery.engine.pdf` keeps them in the book's cache).

A re-export after a one-chapter edit sets one run again, yet the join would write every object of the book
again, renumbered: two thirds of the re-export's time. It need not, if what it writes for a run that did not
change is the same bytes build after build; then they are a piece like any other, kept and copied. So no
number a run's objects are written with may depend on another piece:

- The join's own objects (catalog, page tree, tree root, ParentTree, Document, the folio's two streams) have
  fixed numbers, below FIRST, and the objects it makes from the whole book (the page tree's kids, the
  outline, the blank versos) are numbered after every piece.
- Each body run has a *span* of numbers, in page order, from FIRST: its own objects renumbered, then a slot
  for each page's folio form (the folio's sheet writes its form there), then what the join adds for it (its
  ParentTree's arrays, its object streams). A span is rounded up with room to spare, so a run that grew by
  a page moves no later run. The contents, which change when a chapter's page moves, then the title page
  and the cover, which change with every revision, and the folio sheets come after the runs.
- Marked-content keys (a page's /StructParents) are spans too, rounded, runs first: a key is a number into
  the ParentTree, which need not follow page order.
- The joined objects of a piece go into object streams of their own, numbered in its span, and the
  cross-reference entries it made are kept relative to where its bytes start.

A written piece is kept under a key over the piece's PDF (its SHA-256), its span, its keys, and everything
else it was written with (its ID prefix, its folios' forms, the join's version): the same key is the same
bytes. It holds the bytes, the cross-reference entries, and its part of the structure tree (its Div, its
ParentTree entries, its IDs, its roles and classes), which the join adds as though it had written them.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from bindery.engine.joined_file import PER_STREAM, JoinedFile, Written
from bindery.engine.pieces import Piece

if TYPE_CHECKING:
    from collections.abc import Callable

# Bump on any change to what the join writes for a piece (it is in every kept piece's key).
JOIN_VERSION = "join-4"
FIRST = 16  # the join's own objects are numbered below this; the pieces' spans start here
GRAIN, KEY_GRAIN = 1024, 256  # spans of numbers and of keys are rounded up to these, with an eighth spare


class Kept(Protocol):
    """Where written pieces are kept between builds (the book's cache of built pieces)."""

    def find(self, key: str) -> bytes | None: ...

    def keep(self, key: str, data: bytes) -> None: ...


@dataclass(frozen=True)
class Span:
    """A piece's numbers in the joined file: its object n is `base + n`; a form for its page i (a folio laid
    over it) is `base + size + i`; what the join adds for it is numbered from `extra` below `end`. Its
    marked-content keys move by `keys`."""

    base: int
    size: int
    pages: int
    end: int
    keys: int

    @property
    def extra(self) -> int:
        return self.base + self.size + self.pages


def _rounded(need: int, grain: int) -> int:
    return -(-(need + need // 8) // grain) * grain


def spans(pieces: list[Piece], order: list[int], first: int = FIRST, keys: int = 0) -> dict[int, Span]:
    """The span of each of `pieces`, taken in `order`, from object number `first` and key `keys`."""
    out: dict[int, Span] = {}
    for n in order:
        piece = pieces[n]
        # What the join adds: an array for each ParentTree entry (at most one a key), object streams.
        adds = piece.keys + piece.pages + (piece.size + piece.keys + piece.pages) // PER_STREAM + 2
        width = _rounded(piece.size + piece.pages + adds, GRAIN)
        out[n] = Span(first - 1, piece.size, piece.pages, first - 1 + width, keys)
        first += width
        keys += _rounded(piece.keys, KEY_GRAIN) if piece.keys else 0
    return out


@dataclass
class Part:
    """A piece's part of the book's structure tree: its Div, its ParentTree entries (key, number), its
    element IDs, and the roles and classes its tree root maps."""

    kids: list[int] = field(default_factory=list)
    nums: list[tuple[int, int]] = field(default_factory=list)
    ids: list[tuple[str, int]] = field(default_factory=list)
    roles: list[tuple[bytes, bytes]] = field(default_factory=list)
    classes: list[tuple[bytes, bytes]] = field(default_factory=list)


def key_of(piece: Piece, span: Span, prefix: str, forms: dict[int, int]) -> str:
    """A written piece's key: the piece's PDF (its SHA-256) and everything the join wrote it with."""
    said = [
        JOIN_VERSION,
        piece.digest,
        span.base,
        span.size,
        span.pages,
        span.end,
        span.keys,
        prefix,
        sorted(forms.items()),
    ]
    return "joined:" + hashlib.sha256(json.dumps(said).encode()).hexdigest()


_SIZES = struct.Struct("<II")


def _little(values: array[int]) -> bytes:
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


def pack(written: Written, part: Part) -> bytes:
    """`written` and `part` as one kept piece: a head (JSON), the entries as arrays, then the bytes."""
    head = json.dumps(
        {
            "kids": part.kids,
            "nums": part.nums,
            "ids": part.ids,
            "roles": [(k.decode("latin-1"), v.decode("latin-1")) for k, v in part.roles],
            "classes": [(k.decode("latin-1"), v.decode("latin-1")) for k, v in part.classes],
        }
    ).encode()
    columns = list(zip(*written.entries, strict=True)) or [(), (), (), ()]
    numbers, kinds, wheres, indexes = columns
    tables = (
        _little(array("I", numbers))
        + bytes(kinds)
        + _little(array("I", wheres))
        + _little(array("H", indexes))
    )
    return _SIZES.pack(len(head), len(written.entries)) + head + tables + written.data


def unpack(data: bytes) -> tuple[Written, Part]:
    """A kept piece read back; ValueError if it is not one (the caller then writes the piece afresh)."""
    try:
        size, count = _SIZES.unpack_from(data)
        at = _SIZES.size
        head = json.loads(data[at : at + size])
        at += size
        columns = []
        for code, width in (("I", 4), ("B", 1), ("I", 4), ("H", 2)):
            column = array(code, data[at : at + count * width])
            if sys.byteorder == "big":
                column.byteswap()
            columns.append(column)
            at += count * width
        if at > len(data):
            raise ValueError("cut short")
        part = Part(
            kids=[int(k) for k in head["kids"]],
            nums=[(int(k), int(v)) for k, v in head["nums"]],
            ids=[(str(k), int(v)) for k, v in head["ids"]],
            roles=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in head["roles"]],
            classes=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in head["classes"]],
        )
    except (struct.error, ValueError, KeyError, TypeError, UnicodeError) as exc:
        raise ValueError(f"not a written piece: {exc}") from exc
    entries = list(zip(*columns, strict=True))
    return Written(data[at:], entries), part


def apart(
    book: JoinedFile,
    kept: Kept | None,
    piece: Piece,
    span: Span,
    prefix: str,
    forms: dict[int, int],
    state: Tree,
    write: Callable[[], Part],
) -> bool:
    """Write one piece apart, in its span: copied from `kept` when an earlier join wrote it with all the
    same, else written afresh (and kept). Its part of the structure tree is added to `state`. Whether it
    was copied."""
    key = key_of(piece, span, prefix, forms) if kept is not None else ""
    found = kept.find(key) if kept is not None else None
    if found is not None:
        try:
            written, part = unpack(found)
        except ValueError:
            pass  # kept whole but not what this code writes: written afresh
        else:
            book.place(written)
            state.add(part)
            return True
    book.apart(span.extra, span.end)
    part = write()
    written = book.written()
    state.add(part)
    if kept is not None:
        kept.keep(key, pack(written, part))
    return False


@dataclass
class Tree:
    """The book's structure tree as the pieces are written: the Document's children, the ParentTree's
    entries, the IDs and the role map."""

    kids: list[int] = field(default_factory=list)  # each piece's Div
    nums: list[tuple[int, int]] = field(default_factory=list)
    ids: list[tuple[str, int]] = field(default_factory=list)
    roles: dict[bytes, bytes] = field(default_factory=dict)
    classes: dict[bytes, bytes] = field(default_factory=dict)

    def add(self, part: Part) -> None:
        self.kids += part.kids
        self.nums += part.nums
        self.ids += part.ids
        for role, standard in part.roles:
            self.roles.setdefault(role, standard)
        for name, attributes in part.classes:
            self.classes.setdefault(name, attributes)
