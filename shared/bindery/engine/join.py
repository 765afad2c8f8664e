"""Pieces of one tagged PDF, compiled apart, joined into one document a piece at a time.

A book is typeset in pieces so that Typst's memory stays one piece's (see `bindery.engine.pdf`), and the
join must not undo that. Copying every piece into one pikepdf document would hold every object of the
book at once (about 50 MB of memory per MB of manuscript, most of it structure elements), so the join
writes the file itself: it opens one piece with pikepdf, writes the objects the book needs from it,
renumbered past the pieces before it, and closes it before opening the next. Its memory is one piece's
objects plus an entry per object of the cross-reference, whatever the book's length.

What a tagged book needs from joining that a concatenation of pages would get wrong:

- **One structure tree.** Each piece's tree is rooted in a Document element; in the book each becomes a
  Div (a grouping with no meaning of its own) under the book's one Document, in page order, so a screen
  reader meets the book in reading order, and no element inside a piece needs rewriting.
- **Marked-content keys.** A page's /StructParents and an annotation's /StructParent are keys into the
  ParentTree, and each piece numbers them from 0; a later piece's keys move past the ones already taken.
- **Element IDs.** Typst names notes "Note 1", "Note 2" in every piece; a later piece's IDs get a prefix.
- **What no piece can know:** the page tree, the outline (bookmarks) across all of them, the page labels
  (roman front matter, arabic body), and the contents' links, set as placeholders
  (`GOTO` + a number) because the pages they point at are in other pieces.
- **The body's folios.** The body's runs are set without them, so that a run is the same wherever it falls
  in the book and a later build reuses it when an earlier chapter grew a page (`bindery.engine.pdf`). For
  each run a sheet of folios, a page for each of the run's, is set apart (one sheet for the whole body held
  every page of the book in one compile: 1.4 GB for the 50 MB book); the join makes each of its pages a
  form and lays it over its page, after the page's own content. A folio is a pagination artifact, as Typst
  marks it, so the structure tree is untouched.

Objects are written into compressed object streams (as pikepdf's `generate` would), with a
cross-reference stream: the joined file is no larger than Typst's own output would be. The writing of the
file is `bindery.engine.joined_file`; what a piece is, read before the join, is `bindery.engine.pieces`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import unquote

import pikepdf
from pikepdf import Array, Dictionary, Name

from bindery.engine.joined_file import JoinedFile, real, unparse, write_reachable
from bindery.engine.navigation import GOTO, HERE, Entry, destination, write_destinations, write_outline
from bindery.engine.pieces import Piece
from bindery.engine.segments import FIRST, Kept, Part, Span, Tree, apart, spans

NPAGES = "{http://ns.adobe.com/xap/1.0/t/pg/}NPages"  # XMP's page count
# The join's own objects, numbered below FIRST: the catalog, the page tree, the structure tree's root, its
# ParentTree and its Document element, and the two streams a folio adds around a page's own content.
CATALOG, PAGES, TREE, PARENT_TREE, DOCUMENT = 1, 2, 3, 4, 5
STAMP = (6, 7)
# What the join carries from a piece's structure tree root; anything else would be lost, so it refuses it.
CARRIED = {"/Type", "/K", "/ParentTree", "/ParentTreeNextKey", "/RoleMap", "/ClassMap", "/IDTree"}


@dataclass(frozen=True)
class Folios:
    """The body's folios: a sheet for each of the body's pieces, a page for each of its pages (blank but for
    its folio), and the index of the body's first piece among the pieces joined."""

    sheets: list[Piece]
    body: int


@dataclass(frozen=True)
class Joined:
    """What the join wrote: the book's pages, and of its body runs, folio sheets and contents, how many it
    copied as an earlier join wrote them and how many it wrote afresh."""

    pages: int
    copied: int
    written: int


def join(
    pieces: list[Piece],
    out: Path,
    *,
    outline: list[Entry],
    labels: list[tuple[int, Dictionary]],
    targets: dict[int, tuple[int, float]],
    contents: int,
    folios: Folios | None = None,
    kept: Kept | None = None,
) -> Joined:
    """Write `pieces` as one PDF at `out`; return its page count. The first piece's catalog (language,
    title, XMP, viewer preferences) is the book's; every piece was compiled with the same document
    settings. `targets` maps a GOTO link's number to the (page, top) it goes to; the links are in
    `pieces[contents]`. `folios`, if given, are laid over the body's pages. A body run, a folio sheet or
    the contents written by an earlier join is taken from `kept`, and one written afresh is kept there."""
    copied = 0
    body = range(folios.body, len(pieces)) if folios else range(0)
    sheets = folios.sheets if folios else []
    # Numbers: the runs' spans in page order, the contents', the other pieces', the sheets'; keys likewise.
    span = spans(
        pieces, [*body, contents, *(n for n in range(len(pieces)) if n not in body and n != contents)]
    )
    after = max((s.end for s in span.values()), default=FIRST)
    sheet_span = spans(sheets, list(range(len(sheets))), after + 1)
    tail = max((s.end for s in sheet_span.values()), default=after)
    with out.open("w+b") as file:
        book = JoinedFile(file, tail)
        numbers: list[int] = []  # every page of the book, as object numbers in the joined file
        starts: list[int] = []  # where each piece's first page is among them
        for n, piece in enumerate(pieces):
            starts.append(len(numbers))
            numbers += [span[n].base + number for number in piece.page_objects]
            if piece.blank_after:
                # A blank verso after the piece's last page: nothing on it, so nothing to tag.
                numbers.append(book.number())
                width, height = (real(side) for side in piece.page_size)
                box = b"[ 0 0 %s %s ]" % (width, height)
                book.put(
                    numbers[-1],
                    b"<< /Type /Page /Parent %d 0 R /MediaBox %s /Resources << >> >>" % (PAGES, box),
                )
        state = Tree()
        # The form over a run's page i is numbered in the run's span (see Span), where its page finds it.
        forms: dict[int, dict[int, int]] = {n: {} for n in range(len(pieces))}
        for k, sheet in enumerate(sheets):
            run = span[body.start + k]
            forms[body.start + k] = {i: run.base + run.size + i for i, on in enumerate(sheet.shown) if on}
            write = partial(_write_folios, book, sheet, sheet_span[k].base, forms[body.start + k])
            copied += apart(book, kept, sheet, sheet_span[k], "", forms[body.start + k], state, write)
        if folios is not None:
            for number, data in zip(STAMP, (_BEFORE, _AFTER), strict=True):
                book.put_stream(number, b"<< /Length %d >>" % len(data), data)
        first: dict[str, bytes] = {}
        for n, piece in enumerate(pieces):
            prefix = "" if n == 0 else f"p{n} "
            links = targets if n == contents else {}
            write = partial(_write_piece, book, piece, span[n], n, prefix, first, numbers, links, forms[n])
            keep = kept if n in body or n == contents else None  # the contents' links go by name
            copied += apart(book, keep, piece, span[n], prefix, forms[n], state, write)
        kids = b" ".join(b"%d 0 R" % n for n in numbers)
        book.put(PAGES, b"<< /Type /Pages /Count %d /Kids [ %s ] >>" % (len(numbers), kids))
        # The book's Document element holds each piece's elements in a Div; the tree root holds it.
        pieces_held = b" ".join(b"%d 0 R" % n for n in state.kids)
        book.put(DOCUMENT, b"<< /Type /StructElem /S /Document /P %d 0 R /K [ %s ] >>" % (TREE, pieces_held))
        nums = b" ".join(b"%d %d 0 R" % kv for kv in sorted(state.nums))
        book.put(PARENT_TREE, b"<< /Nums [ %s ] >>" % nums)
        role_map = b" ".join(k + b" " + v for k, v in state.roles.items())
        class_map = b" ".join(k + b" " + v for k, v in state.classes.items())
        id_tree = b""
        if state.ids:
            names = b" ".join(
                pikepdf.String(name).unparse() + b" %d 0 R" % n for name, n in sorted(state.ids)
            )
            id_number = book.number()
            book.put(id_number, b"<< /Names [ %s ] >>" % names)
            id_tree = b" /IDTree %d 0 R" % id_number
        keys = max((span[n].keys + piece.keys for n, piece in enumerate(pieces)), default=0)
        book.put(
            TREE,
            b"<< /Type /StructTreeRoot /K [ %d 0 R ] /ParentTree %d 0 R /ParentTreeNextKey %d"
            b" /RoleMap << %s >>%s%s >>"
            % (
                DOCUMENT,
                PARENT_TREE,
                keys,
                role_map,
                id_tree,
                b" /ClassMap << %s >>" % class_map if class_map else b"",
            ),
        )
        outlines = write_outline(book, outline, numbers)
        headings = {
            name: (starts[n] + page, top)
            for n, piece in enumerate(pieces)
            for name, page, top in piece.destinations
        }
        named = write_destinations(book, targets, headings, numbers) if targets or headings else 0
        names = b" /Names << /Dests %d 0 R >>" % named if named else b""
        page_labels = b" ".join(b"%d %s" % (start, label.unparse()) for start, label in labels)
        book.put(
            CATALOG,
            b"<< /Type /Catalog /Pages %d 0 R /StructTreeRoot %d 0 R /Outlines %d 0 R"
            b" /PageLabels << /Nums [ %s ] >> /PageMode /UseOutlines%s %s >>"
            % (PAGES, TREE, outlines, page_labels, names, first.get("catalog", b"")),
        )
        book.finish(CATALOG, int(first["info"]) if "info" in first else None, first.get("ids"))
    return Joined(len(numbers), copied, len(body) + len(sheets) + 1 - copied)


# The page's own content is wrapped in q ... Q, so no state it leaves set moves the folio; the folio's form
# is then drawn in the page's space (both are the same size). The sheet's content marks it an artifact.
FOLIO = "/BinderyFolio"
_BEFORE, _AFTER = b"q\n", b"\nQ %s Do\n" % FOLIO.encode()


def _write_folios(book: JoinedFile, sheet: Piece, base: int, forms: dict[int, int]) -> Part:
    """Each page of the sheet that holds a folio, written as a form (its content, its resources) numbered
    `forms[page]`. A sheet adds nothing to the structure tree: a folio is an artifact."""
    shared: dict[bytes, int] = {}  # the sheet's pages' resources, each written once (they are all alike)
    with pikepdf.open(sheet.path) as pdf:
        roots: deque[int] = deque()
        for index, page in enumerate(pdf.pages):
            if index not in forms:
                continue
            contents = page.obj.Contents
            parts = contents if isinstance(contents, Array) else [contents]
            # A folio's content is a few hundred bytes, which deflate would not shrink: kept as it is.
            data = b"\n".join(part.read_bytes() for part in parts)
            resources = unparse(page.obj.Resources, base, {}, roots)
            if resources not in shared:
                shared[resources] = book.number()
                book.put(shared[resources], resources)
            box = page.obj.MediaBox.unparse(resolved=True)
            book.put_stream(
                forms[index],
                b"<< /Subtype /Form /BBox %s /Resources %d 0 R /Length %d >>"
                % (box, shared[resources], len(data)),
                data,
            )
        write_reachable(book, pdf, roots, base, {}, set())
    return Part()


def _write_piece(
    book: JoinedFile,
    piece: Piece,
    span: Span,
    n: int,
    prefix: str,
    first: dict[str, bytes],
    pages: list[int],
    targets: dict[int, tuple[int, float]],
    folios: dict[int, int],
) -> Part:
    """Write the objects of one piece the book needs, renumbered into its `span`; return its part of the
    structure tree. Objects only the piece needed (its catalog, page tree, outline, tree root) are left
    out. `folios` are the forms to lay over its pages, by page; its element IDs get `prefix`."""
    base, keys, part = span.base, span.keys, Part()
    with pikepdf.open(piece.path) as pdf:
        redirect: dict[int, int] = {}
        made: dict[int, pikepdf.Object] = {}

        def placeholder(number: int) -> pikepdf.Object:
            """An object of this piece that stands for `number` in the joined file: one for each number
            (every page's /Parent is the same one), since making an object costs more than referring to it."""
            if number not in made:
                made[number] = pdf.make_indirect(Dictionary())
                redirect[made[number].objgen[0]] = number
            return made[number]

        theirs = pdf.Root.StructTreeRoot
        kids = list(theirs.K) if isinstance(theirs.K, Array) else [theirs.K]
        if len(kids) != 1 or kids[0].get("/S") != Name.Document:
            raise ValueError(f"{piece.path.name}: its structure tree is not one Document element")
        # The piece's Document becomes a Div (a grouping with no meaning of its own) in the book's, so
        # none of its elements is touched: memory stays the piece's, whatever the book's length.
        division = kids[0]
        division.S = Name.Div
        division.P = placeholder(DOCUMENT)
        part.kids.append(base + division.objgen[0])
        skip: set[int] = set()
        roots: deque[int] = deque([division.objgen[0]])
        if n == 0:
            # what the book's catalog takes from the first piece
            values = [
                f"{key} ".encode() + unparse(pdf.Root[key], base, redirect, roots)
                for key in ("/Lang", "/MarkInfo", "/ViewerPreferences")
                if key in pdf.Root
            ]
            # The XMP, with the book's page count (the piece counted only its own). pikepdf writes the edit
            # as a new stream, numbered past the piece's objects, so it goes under the old one's number.
            metadata = int(pdf.Root.Metadata.objgen[0])
            with pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False) as xmp:
                xmp[NPAGES] = str(len(pages))
            data = pdf.Root.Metadata.read_raw_bytes()
            head = pdf.Root.Metadata.stream_dict
            head.Length = len(data)
            book.put_stream(base + metadata, unparse(head, base, redirect, roots), data)
            skip.add(metadata)
            values.append(b"/Metadata %d 0 R" % (base + metadata))
            first["catalog"] = b" ".join(values)
            if "/Info" in pdf.trailer:
                first["info"] = b"%d" % (base + pdf.trailer.Info.objgen[0])
            if "/ID" in pdf.trailer:
                first["ids"] = pdf.trailer.ID.unparse(resolved=True)
        # Keys and IDs move into the piece's span. (The pages are listed once: pikepdf finds a page by its
        # index by listing them all.)
        own = list(pdf.pages)
        for page in own:
            page.obj.Parent = placeholder(PAGES)
            if "/StructParents" in page.obj:
                page.obj.StructParents = int(page.obj.StructParents) + keys
            for annot in page.obj.get("/Annots", Array()):
                if "/StructParent" in annot:
                    annot.StructParent = int(annot.StructParent) + keys
        before, after = (placeholder(number) for number in STAMP) if folios else (None, None)
        for index, form in folios.items():
            laid = own[index].obj
            contents = laid.Contents
            parts = list(contents) if isinstance(contents, Array) else [contents]
            laid.Contents = Array([before, *parts, after])
            # The page's own resources, and the form among its XObjects (a page's resources may be shared
            # with others, so each page gets its own dictionary; the values are the same objects).
            resources = Dictionary(dict(laid.get("/Resources", Dictionary()).items()))
            xobjects = Dictionary(dict(resources.get("/XObject", Dictionary()).items()))
            xobjects[FOLIO] = placeholder(form)
            resources.XObject = xobjects
            laid.Resources = resources
        if "/IDTree" in theirs:
            for name, element in _names(theirs.IDTree):
                named = prefix + name
                element.ID = pikepdf.String(named)
                part.ids.append((named, base + element.objgen[0]))
                roots.append(element.objgen[0])
        # The contents' links and the text's links to headings, written as GOTO placeholders, now go to
        # their pages by name (the book's catalog names each: `bindery.engine.navigation`), so the piece is
        # the same when the run they point into is set again.
        for each in pdf.pages:
            for annot in each.obj.get("/Annots", Array()):
                action = annot.get("/A")
                # (Typst writes an address as UTF-8; ours are ASCII, a heading's id %-encoded.)
                uri = bytes(action.get("/URI", b"")).decode("utf-8", "replace") if action is not None else ""
                # Typst describes a link by its address (its /Contents, which a screen reader speaks): a
                # placeholder's is the name of the place it goes to.
                if uri.startswith((GOTO + "#", HERE)):
                    named = unquote(uri.partition("#")[2])  # a heading's id (Typst's label), or a target's
                    annot.A = Dictionary(S=Name.GoTo, D=pikepdf.String(named.encode()))
                    annot.Contents = pikepdf.String(named)
                elif targets and uri.startswith(GOTO):
                    to = pikepdf.String(destination(int(uri.removeprefix(GOTO))))
                    annot.A, annot.Contents = Dictionary(S=Name.GoTo, D=to), to
        roots.extend(int(each.objgen[0]) for each in pdf.pages)
        for key, value in _numbers(theirs.ParentTree):
            if value.is_indirect:
                roots.append(value.objgen[0])
                part.nums.append((key + keys, base + value.objgen[0]))
            else:
                number = book.number()
                queue: deque[int] = deque()
                book.put(number, unparse(value, base, redirect, queue))
                roots.extend(queue)
                part.nums.append((key + keys, number))
        if n == 0 and "/Info" in pdf.trailer:
            roots.append(pdf.trailer.Info.objgen[0])
        for role, standard in theirs.get("/RoleMap", Dictionary()).items():
            part.roles.append((role.encode(), standard.unparse(resolved=True)))
        for name, attributes in theirs.get("/ClassMap", Dictionary()).items():
            part.classes.append((name.encode(), unparse(attributes, base, redirect, roots)))
        unknown = set(theirs.keys()) - CARRIED
        if unknown:
            raise ValueError(f"{piece.path.name}: its tree root has {sorted(unknown)}, which the join drops")
        write_reachable(book, pdf, roots, base, redirect, skip)
    return part


def _numbers(tree: pikepdf.Object) -> Iterator[tuple[int, pikepdf.Object]]:
    """The (key, value) pairs of a number tree, leaves in order."""
    return ((int(key), value) for key, value in _leaves(tree, "/Nums"))


def _names(tree: pikepdf.Object) -> Iterator[tuple[str, pikepdf.Object]]:
    """The (name, value) pairs of a name tree."""
    return ((str(key), value) for key, value in _leaves(tree, "/Names"))


def _leaves(node: pikepdf.Object, kind: str) -> Iterator[tuple[pikepdf.Object, pikepdf.Object]]:
    pairs = list(node.get(kind, Array()))
    for i in range(0, len(pairs), 2):
        yield pairs[i], pairs[i + 1]
    for kid in node.get("/Kids", Array()):
        yield from _leaves(kid, kind)
