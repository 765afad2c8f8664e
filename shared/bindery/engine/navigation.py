"""The joined book's navigation, written by the join (`bindery.engine.join`) from the whole book: the
outline (bookmarks), and the named destinations the contents' links go to.

The contents' links go to their pages by name, not to the pages' objects themselves: a page's object number
is its run's numbering, which an edit to the run changes, so a link that named it would make the contents a
new piece for the join to write afresh whenever a run was set again (about 0.12 s of the 1,200-chapter
book's re-export). By name, the contents are the same written piece while no page moved, and the join
copies them (`bindery.engine.segments`); the names are the one thing written afresh, as the outline is.

A link in the text to a heading of the book goes by name too: the heading's id, which Typst names a
destination by (its label), in whichever piece it was set. So a run that links to a heading in another run is
the same piece whatever that run's pages are.
"""

from __future__ import annotations

from dataclasses import dataclass

import pikepdf

from bindery.engine.joined_file import JoinedFile, real

# A link the join points at a destination: GOTO + a contents line's number, or GOTO + "#" + a heading's id.
# A scheme no manuscript link can have (typeset.py passes only http, https and mailto to Typst's links).
GOTO = "bindery-goto:"
# A numbered figure's or table's caption links to itself as HERE + how far above it the target's top is, in
# pt + "#" + its id: where the join finds the target (Typst names no destination but a heading's).
HERE = "bindery-here:"


@dataclass(frozen=True)
class Entry:
    """An outline entry of the joined book: a title, the page it opens (in the joined book), children."""

    title: str
    page: int
    top: float
    children: tuple[Entry, ...] = ()


def destination(number: int) -> bytes:
    """The name of the contents' link `number` (GOTO + number): its names sort as their numbers do, and
    none is a heading's id, which holds no space."""
    return b"contents %08d" % number


def write_destinations(
    book: JoinedFile,
    targets: dict[int, tuple[int, float]],
    headings: dict[str, tuple[int, float]],
    pages: list[int],
) -> int:
    """The book's named destinations as one name tree, each its (page, top): the contents' links', and
    each heading's, named by its id in UTF-8 (as Typst names it, and the join a link's); its number."""
    at = {destination(n).decode(): target for n, target in targets.items()} | headings
    named = b" ".join(
        name.unparse() + b" [ %d 0 R /XYZ null %s null ]" % (pages[page], real(top))
        for name, (page, top) in sorted(((pikepdf.String(n.encode()), t) for n, t in at.items()), key=_raw)
    )
    number = book.number()
    book.put(number, b"<< /Names [ %s ] >>" % named)
    return number


def _raw(named: tuple[pikepdf.String, object]) -> bytes:
    """A name tree's order: its names' bytes."""
    return bytes(named[0])


def write_outline(book: JoinedFile, entries: list[Entry], pages: list[int]) -> int:
    """The outline: one item an entry, nested, each opening its page at its heading; its root's number."""
    root = book.number()

    def items(parent: int, level: list[Entry]) -> tuple[int, int, int]:
        """Write `level` under `parent`; return its first and last item and how many items it holds."""
        numbers = [book.number() for _ in level]
        count = len(level)
        for i, (entry, number) in enumerate(zip(level, numbers, strict=True)):
            fields = [
                b"/Title " + pikepdf.String(entry.title).unparse(),
                b"/Parent %d 0 R" % parent,
                b"/Dest [ %d 0 R /XYZ null %s null ]" % (pages[entry.page], real(entry.top)),
            ]
            if i:
                fields.append(b"/Prev %d 0 R" % numbers[i - 1])
            if i + 1 < len(numbers):
                fields.append(b"/Next %d 0 R" % numbers[i + 1])
            if entry.children:
                head, tail, inner = items(number, list(entry.children))
                fields.append(b"/First %d 0 R /Last %d 0 R /Count -%d" % (head, tail, inner))
            book.put(number, b"<< %s >>" % b" ".join(fields))
        return (numbers[0], numbers[-1], count) if numbers else (0, 0, 0)

    head, tail, count = items(root, entries)
    links = b" /First %d 0 R /Last %d 0 R /Count %d" % (head, tail, count) if entries else b""
    book.put(root, b"<< /Type /Outlines%s >>" % links)
    return root
