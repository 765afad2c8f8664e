"""Pieces of one tagged PDF, compiled apart, joined into one document with pikepdf (libqpdf).

A book is typeset in pieces so that Typst's memory stays that of one piece (see `bindery.engine.pdf`).
Joining tagged pieces is more than putting their pages one after another:

- **The structure tree.** Each piece has its own StructTreeRoot. Its top-level elements become children
  of the first piece's root, in page order, so a screen reader meets the book in reading order.
- **Marked-content keys.** A page's /StructParents and an annotation's /StructParent are keys into the
  root's ParentTree, and each piece numbers them from 0; a later piece's keys are moved past the ones
  already taken, in the pages and in the tree alike, so no key means two things.
- **Element IDs.** Typst names notes "Note 1", "Note 2" in every piece; a piece's IDs get its own prefix,
  in the elements and in the IDTree alike.
- **Foreign objects.** qpdf copies each object of a piece once, however many times it is reached (a
  page, then the elements that point at it), and copies stream data only when the joined file is written,
  so the join holds the pieces' object tables in memory, not their bytes.

What the pieces cannot know is filled in here: the outline (bookmarks) across all of them, the page
labels (roman front matter, arabic body), and the contents' links, which the front matter writes as
placeholders (`GOTO` + a number) because the pages they point at are in other pieces.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pikepdf
from pikepdf import Array, Dictionary, Name

NPAGES = "{http://ns.adobe.com/xap/1.0/t/pg/}NPages"  # XMP's page count
GOTO = "https://bindery.invalid/goto/"  # a contents link the join points at a page: GOTO + target number


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


def read_piece(path: Path) -> Piece:
    """A compiled piece's page count and the headings in its outline."""
    with pikepdf.open(path) as pdf:
        index: dict[Any, int] = {page.objgen: n for n, page in enumerate(pdf.pages)}
        marks = [
            Mark(level, str(item.Title), index[item.Dest[0].objgen], float(item.Dest[3]))
            for level, item in _outline(pdf.Root.get("/Outlines"))
            if "/Dest" in item
        ]
        return Piece(path, len(pdf.pages), marks)


def _outline(node: pikepdf.Object | None, level: int = 1) -> Iterator[tuple[int, pikepdf.Object]]:
    item = node.get("/First") if node is not None else None
    while item is not None:
        yield level, item
        yield from _outline(item, level + 1)
        item = item.get("/Next")


@dataclass(frozen=True)
class Entry:
    """An outline entry of the joined book: a title, the page it opens (in the joined book), children."""

    title: str
    page: int
    top: float
    children: tuple[Entry, ...] = ()


def join(
    pieces: list[Piece],
    out: Path,
    *,
    outline: list[Entry],
    labels: list[tuple[int, Dictionary]],
    targets: dict[int, tuple[int, float]],
    contents: range,
) -> int:
    """Write `pieces` as one PDF at `out`; return its page count. The first piece's catalog (language,
    title, XMP, viewer preferences) is the book's; every piece was compiled with the same document
    settings. `targets` maps a GOTO number to (page, top); the links are on the pages in `contents`."""
    opened = [pikepdf.open(piece.path) for piece in pieces]
    try:
        book = opened[0]
        root = _structure_root(book)
        kids = _as_array(root.get("/K"))
        # Typst roots each piece's tree in one Document element: the book has one, holding every piece's.
        document = kids[0] if len(kids) == 1 and kids[0].get("/S") == Name.Document else None
        parent, kids = (document, _as_array(document.get("/K"))) if document is not None else (root, kids)
        nums = list(_numbers(root.ParentTree))
        next_key = int(root.get("/ParentTreeNextKey", len(nums)))
        ids = list(_names(root["/IDTree"])) if "/IDTree" in root else []
        if pieces[0].blank_after:
            book.add_blank_page(page_size=_size(book.pages[-1]))
        for n, (piece, pdf) in enumerate(zip(pieces[1:], opened[1:], strict=True), start=1):
            next_key = _adopt(book, root, parent, pdf, kids, nums, ids, next_key, prefix=f"p{n} ")
            if piece.blank_after:
                book.add_blank_page(page_size=_size(book.pages[-1]))
        parent.K = kids
        nums.sort(key=lambda pair: pair[0])
        root.ParentTree = book.make_indirect(Dictionary(Nums=Array(_flat(nums))))
        root.ParentTreeNextKey = next_key
        if ids:
            ids.sort(key=lambda pair: pair[0])
            root.IDTree = book.make_indirect(Dictionary(Names=Array(_flat(ids))))
        book.Root.PageLabels = Dictionary(Nums=Array([x for start, label in labels for x in (start, label)]))
        _point_contents(book, targets, contents)
        _write_outline(book, outline)
        with book.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False) as xmp:
            xmp[NPAGES] = str(len(book.pages))  # each piece counted only its own
        book.save(out, object_stream_mode=pikepdf.ObjectStreamMode.generate, compress_streams=True)
        return len(book.pages)
    finally:
        for pdf in opened:
            pdf.close()


def _structure_root(pdf: pikepdf.Pdf) -> pikepdf.Object:
    root: pikepdf.Object = pdf.Root.StructTreeRoot
    return root


def _adopt(
    book: pikepdf.Pdf,
    root: pikepdf.Object,
    parent: pikepdf.Object,
    pdf: pikepdf.Pdf,
    kids: Array,
    nums: list[tuple[int, pikepdf.Object]],
    ids: list[tuple[str, pikepdf.Object]],
    base: int,
    prefix: str,
) -> int:
    """Append `pdf`'s pages to `book`, and graft its structure tree's elements onto `parent` (the book's
    Document element, or its root) in `root`'s tree; return the next free key."""
    theirs = _structure_root(pdf)
    their_kids = _as_array(theirs.get("/K"))
    if parent is not root and len(their_kids) == 1 and their_kids[0].get("/S") == Name.Document:
        their_kids = _as_array(their_kids[0].get("/K"))  # their Document's children join ours
    for kid in their_kids:
        if isinstance(kid, Dictionary) and "/P" in kid:
            del kid["/P"]  # it pointed at their root or Document, which is not copied
    their_nums = list(_numbers(theirs.ParentTree))
    their_ids = list(_names(theirs["/IDTree"])) if "/IDTree" in theirs else []
    for name, element in their_ids:
        element.ID = pikepdf.String(prefix + name)
    for page in pdf.pages:
        if "/StructParents" in page.obj:
            page.obj.StructParents = int(page.obj.StructParents) + base
        for annot in page.obj.get("/Annots", Array()):
            if "/StructParent" in annot:
                annot.StructParent = int(annot.StructParent) + base
    for page in pdf.pages:
        book.pages.append(page)
    # Copied after the pages, so their /Pg references land on the copies already made.
    copied = book.copy_foreign(pdf.make_indirect(their_kids))
    for kid in copied:
        kid.P = parent
        kids.append(kid)
    if their_nums:
        values = book.copy_foreign(pdf.make_indirect(Array([v for _, v in their_nums])))
        nums.extend((key + base, value) for (key, _), value in zip(their_nums, values, strict=True))
    if their_ids:
        elements = book.copy_foreign(pdf.make_indirect(Array([e for _, e in their_ids])))
        ids.extend((prefix + name, e) for (name, _), e in zip(their_ids, elements, strict=True))
    for map_name in ("/RoleMap", "/ClassMap"):
        if map_name in theirs:
            ours = root.get(map_name)
            if ours is None:
                root[map_name] = ours = Dictionary()
            for key, value in theirs[map_name].items():
                if key not in ours:
                    ours[key] = book.copy_foreign(value) if value.is_indirect else value
    return base + int(theirs.get("/ParentTreeNextKey", len(their_nums)))


def _as_array(kids: pikepdf.Object | None) -> Array:
    if kids is None:
        return Array()
    return Array(list(kids)) if isinstance(kids, Array) else Array([kids])


def _numbers(tree: pikepdf.Object) -> Iterator[tuple[int, pikepdf.Object]]:
    """The (key, value) pairs of a number tree, leaves in order."""
    if "/Nums" in tree:
        pairs = list(tree.Nums)
        for i in range(0, len(pairs), 2):
            yield int(pairs[i]), pairs[i + 1]
    for kid in tree.get("/Kids", Array()):
        yield from _numbers(kid)


def _names(tree: pikepdf.Object) -> Iterator[tuple[str, pikepdf.Object]]:
    """The (name, value) pairs of a name tree."""
    if "/Names" in tree:
        pairs = list(tree.Names)
        for i in range(0, len(pairs), 2):
            yield str(pairs[i]), pairs[i + 1]
    for kid in tree.get("/Kids", Array()):
        yield from _names(kid)


def _flat(pairs: list[tuple[int, pikepdf.Object]] | list[tuple[str, pikepdf.Object]]) -> list[object]:
    return [x for key, value in pairs for x in (key, value)]


def _size(page: pikepdf.Page) -> tuple[float, float]:
    box = page.mediabox
    return float(box[2]) - float(box[0]), float(box[3]) - float(box[1])


def _point_contents(book: pikepdf.Pdf, targets: dict[int, tuple[int, float]], contents: range) -> None:
    """Each contents link the front matter wrote as a GOTO placeholder now goes to its page."""
    for n in contents:
        for annot in book.pages[n].obj.get("/Annots", Array()):
            action = annot.get("/A")
            uri = str(action.get("/URI", "")) if action is not None else ""
            if uri.startswith(GOTO):
                number, top = targets[int(uri.removeprefix(GOTO))]
                to = Array([book.pages[number].obj, Name.XYZ, None, top, None])
                annot.A = Dictionary(S=Name.GoTo, D=to)


def _write_outline(book: pikepdf.Pdf, entries: list[Entry]) -> None:
    def item(entry: Entry) -> pikepdf.OutlineItem:
        made = pikepdf.OutlineItem(entry.title, entry.page, pikepdf.PageLocation.XYZ, top=entry.top)
        made.children.extend(item(child) for child in entry.children)
        return made

    with book.open_outline() as outline:
        outline.root.clear()
        outline.root.extend(item(entry) for entry in entries)
