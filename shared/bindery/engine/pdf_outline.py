"""Where a pdf book's chapters and headings were set, and what it says of them beside its pages: the outline
(bookmarks) of each listed chapter and its headings, from the headings each run's own outline points at, and
the page labels (the folios a reader shows: the front matter's roman, the body's arabic)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pikepdf import Dictionary, Name, String

from bindery.engine.navigation import Entry
from bindery.engine.pieces import Piece


@dataclass
class Opened:
    """A chapter as set: its page number (arabic) and top, and its ## and ### headings."""

    title: str
    number: int
    top: float
    headings: list[tuple[int, str, int, float]] = field(default_factory=list)  # level, title, number, top
    listed: bool = True  # the contents and the outline list it (its title is not `.unlisted`)


def opened_of(runs: list[Piece], titles: list[list[tuple[str, bool]]]) -> list[Opened]:
    """Each chapter as set, with its headings, at its page in the body (its first is 1), from the headings
    each run's own outline points at (`titles`: each run's chapters', and whether each is listed)."""
    opened: list[Opened] = []
    first = 1
    for run, named in zip(runs, titles, strict=True):
        chapters = iter(named)
        for mark in run.marks:
            if mark.level == 1:
                title, listed = next(chapters)
                opened.append(Opened(title, first + mark.page, mark.top, listed=listed))
            elif opened:  # every level reaches the outline; the contents keep toc_depth
                opened[-1].headings.append((mark.level, mark.title, first + mark.page, mark.top))
        first += run.pages + run.blank_after
    return opened


def outline(opened: list[Opened], before: int) -> list[Entry]:
    """The book's outline: each chapter, and its headings under it, at its page in the book (its body's
    page 1 the book's page `before` + 1)."""
    return [
        Entry(
            c.title,
            before + c.number - 1,
            c.top,
            nested([(lv, title, before + number - 1, top) for lv, title, number, top in c.headings]),
        )
        for c in opened
        if c.listed
    ]


def nested(headings: list[tuple[int, str, int, float]]) -> tuple[Entry, ...]:
    """A chapter's headings as its children, each under the last heading before it of a level above its
    own (or, with none, beside them): ### under ##, #### under ###, and so on to every level."""
    children: list[tuple[str, int, float, list[Any]]] = []
    above: list[tuple[int, list[Any]]] = []  # the headings it may stand under: (level, their children)
    for level, title, page, top in headings:
        while above and above[-1][0] >= level:
            above.pop()
        node: tuple[str, int, float, list[Any]] = (title, page, top, [])
        (above[-1][1] if above else children).append(node)
        above.append((level, node[3]))

    def entries(nodes: list[tuple[str, int, float, list[Any]]]) -> tuple[Entry, ...]:
        return tuple(Entry(title, page, top, entries(inner)) for title, page, top, inner in nodes)

    return entries(children)


def page_labels(cover: bool, body: int | None) -> list[tuple[int, Dictionary]]:
    """The book's page labels: the cover and its verso, if it has one; the front matter in roman numerals;
    the body, if there is one, in arabic from its page `body` (counting from 0)."""
    labels = [(0, Dictionary(P=String("Cover"))), (1, Dictionary(P=String("Inside cover")))] if cover else []
    labels.append((len(labels), Dictionary(S=Name.r)))
    if body is not None:
        labels.append((body, Dictionary(S=Name.D)))
    return labels
