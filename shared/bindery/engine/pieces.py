"""A piece of a book as Typst compiled it, read before the join: its pages, its object count, the size of
its pages and the headings its own outline points at (`bindery.engine.join` writes the book from these).

Reading a piece opens it with pikepdf (about 10 ms a piece); a piece taken from the book's cache comes with
what an earlier build read of it (`summary`), which holds its PDF's SHA-256: it stands for the piece only
while the PDF is those bytes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pikepdf
from pikepdf import Dictionary

from bindery.engine import Pieces
from bindery.engine.navigation import HERE


@dataclass(frozen=True)
class Mark:
    """A heading a piece's own outline points at: its level, title, page (in the piece) and height."""

    level: int
    title: str
    page: int
    top: float


@dataclass
class Piece:
    path: Path
    pages: int
    marks: list[Mark] = field(default_factory=list)
    blank_after: bool = False  # a blank verso follows, so the next piece opens on a recto
    size: int = 0  # the piece's highest object number, plus one
    page_objects: list[int] = field(default_factory=list)
    page_size: tuple[float, float] = (0.0, 0.0)
    # Whether each page holds the book's text (tagged content): a blank verso Typst left before a chapter's
    # opening holds none, and is given no folio.
    shown: list[bool] = field(default_factory=list)
    keys: int = 0  # the marked-content keys its pages and annotations use (its ParentTreeNextKey)
    # Its headings' named destinations (Typst names one by a heading's label, its id in the book): each
    # [name, page (in the piece), top].
    destinations: list[list[Any]] = field(default_factory=list)
    digest: str = ""  # its PDF's SHA-256

    def summary(self) -> bytes:
        """What was read of the piece, to keep beside it (its path and `blank_after` are the build's)."""
        said = asdict(self)
        del said["path"], said["blank_after"]
        return json.dumps(said).encode()


def from_summary(path: Path, data: bytes) -> Piece | None:
    """The piece at `path` as `data` (a `summary`) says, if that was read of these very bytes; else None."""
    try:
        said = json.loads(data)
        said["marks"] = [Mark(**mark) for mark in said["marks"]]
        said["page_size"] = tuple(said["page_size"])
        piece = Piece(path, **said)
    except (ValueError, TypeError, KeyError):
        return None
    return piece if piece.digest == _digest(path) else None


def _digest(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def read_piece(path: Path) -> Piece:
    """A compiled piece's pages, its object count, and the headings in its outline."""
    with pikepdf.open(path) as pdf:
        index: dict[Any, int] = {page.objgen: n for n, page in enumerate(pdf.pages)}
        marks = [
            Mark(level, str(item.Title), index[item.Dest[0].objgen], float(item.Dest[3]))
            for level, item in _outline(pdf.Root.get("/Outlines"))
            if "/Dest" in item
        ]
        box = pdf.pages[0].mediabox
        tree = pdf.Root.get("/StructTreeRoot")
        return Piece(
            path,
            len(pdf.pages),
            marks,
            size=int(pdf.trailer.Size),
            page_objects=[int(page.objgen[0]) for page in pdf.pages],
            page_size=(float(box[2]) - float(box[0]), float(box[3]) - float(box[1])),
            shown=["/StructParents" in page.obj for page in pdf.pages],
            keys=int(tree.get("/ParentTreeNextKey", 0)) if tree is not None else 0,
            destinations=[
                [bytes(name).decode(), index[target[0].objgen], float(target[3])]  # UTF-8, as Typst names
                for name, target in _named(pdf.Root.get("/Names", Dictionary()).get("/Dests"))
                if isinstance(target, pikepdf.Array) and target[0].objgen in index
            ]
            + list(_captioned(pdf)),
            digest=_digest(path),
        )


def _captioned(pdf: pikepdf.Pdf) -> Iterator[list[Any]]:
    """The numbered figures and tables, where their captions' links to themselves say (`HERE`)."""
    for n, page in enumerate(pdf.pages):
        for annot in page.get("/Annots", ()):
            uri = str(annot.get("/A", Dictionary()).get("/URI", ""))
            if uri.startswith(HERE):
                up, _, target_id = uri.removeprefix(HERE).partition("#")
                yield [unquote(target_id), n, float(annot.Rect[3]) + float(up)]


def _named(node: pikepdf.Object | None) -> Iterator[tuple[pikepdf.Object, pikepdf.Object]]:
    """A name tree's (name, value) pairs."""
    if node is None:
        return
    pairs = list(node.get("/Names", ()))
    yield from zip(pairs[::2], pairs[1::2], strict=True)
    for kid in node.get("/Kids", ()):
        yield from _named(kid)


def _outline(node: pikepdf.Object | None, level: int = 1) -> Iterator[tuple[int, pikepdf.Object]]:
    item = node.get("/First") if node is not None else None
    while item is not None:
        yield level, item
        yield from _outline(item, level + 1)
        item = item.get("/Next")


class Kept:
    """The book's cache of built pieces as the PDF's build uses it: by key alone (no PDF piece depends on an
    image's name), deflated. Typst deflates its streams but writes every other object as it is, and a
    tagged book's are most of it (its structure tree): a compiled run shrinks to a seventh, a written one to
    a twelfth, for 5 ms a MB; kept as they were, a 50 MB book's pieces were past its bound (3.7 times its
    pdf). With the cache off, it holds nothing."""

    def __init__(self, pieces: Pieces | None):
        self.pieces = pieces

    def find(self, key: str) -> bytes | None:
        return self.pieces.find(key, lambda names: key) if self.pieces is not None else None

    def keep(self, key: str, data: bytes) -> None:
        if self.pieces is not None:
            self.pieces.keep(key, key, (), data)
