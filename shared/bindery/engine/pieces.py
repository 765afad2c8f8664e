"""A piece of a book as Typst compiled it, read before the join: its pages, its object count, the size of
its pages and the headings its own outline points at (`bindery.engine.join` writes the book from these)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pikepdf


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
        return Piece(
            path,
            len(pdf.pages),
            marks,
            size=int(pdf.trailer.Size),
            page_objects=[int(page.objgen[0]) for page in pdf.pages],
            page_size=(float(box[2]) - float(box[0]), float(box[3]) - float(box[1])),
            shown=["/StructParents" in page.obj for page in pdf.pages],
        )


def _outline(node: pikepdf.Object | None, level: int = 1) -> Iterator[tuple[int, pikepdf.Object]]:
    item = node.get("/First") if node is not None else None
    while item is not None:
        yield level, item
        yield from _outline(item, level + 1)
        item = item.get("/Next")
