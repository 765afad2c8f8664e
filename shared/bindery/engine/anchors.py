"""The book's anchors: every heading of every level, in the order the book holds them, each with the id
pandoc gives it (`bindery.engine.headings`) and the chapter it is in.

They are found as the book is cut (`bindery.manuscript.cut`, which reads every heading's lines once), kept
in the cut's chapter list (`bindery.chapter_lists`), and read by each build before its first chapter,
so that a chapter renders against the whole book: a heading's id is the one it has in the book (the third
"Introduction" is `introduction-2` wherever it is set), and a link to a heading lands, in a chapter already
written or one still to come. A renderer given none (`None`: a test's, say) gives each chapter's headings
ids of their own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from bindery.engine.headings import Identifiers

# Bump on any change to what the anchors hold or how an id is made: a list's anchors of another version are
# read as none, and the build finds them again.
VERSION = 7

# A footnote's citation, and its definition (at a line's start, as markdown-it's footnote plugin reads one).
_CITED = re.compile(r"\[\^([^\]\s]+)\]")
_DEFINED = re.compile(r"^ {0,3}\[\^([^\]\s]+)\]:", re.MULTILINE)
NUMBERED = ("fig", "tbl")  # the kinds of target numbered (`bindery.engine.crossrefs`)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")  # an address that leaves the book (RFC 3986's scheme)


@dataclass(frozen=True)
class Anchor:
    chapter: int  # the ordinal of the chapter it is in
    level: int  # 1 to 6, as written (a chapter's own title is 1)
    id: str
    title: str  # its words, as its id is made of them
    written: str = ""  # its content as written (a link's label names it so: pandoc's implicit references)


@dataclass
class Anchors:
    """The book's headings as they come, each given its id as it is added."""

    anchors: list[Anchor] = field(default_factory=list)
    # Every link reference definition of the book, by its normalised label: the first of each, as a parse
    # of the whole book has them ({"href": ..., "title": ...}, as markdown-it keeps them).
    definitions: dict[str, dict[str, str]] = field(default_factory=dict)
    # Every footnote definition of the book, by its label: the first of each, its chapter and its lines as
    # written, for a chapter that cites a note another chapter defines (pandoc reads the book whole).
    notes: dict[str, tuple[int, str]] = field(default_factory=dict)
    _note_at: dict[str, int] = field(default_factory=dict, repr=False)  # (the cut's: where each starts)
    # Every figure and table with a numbered id (`fig-`, `tbl-`: `bindery.engine.crossrefs`), in the order
    # the book holds them: (chapter, id). The first of an id is the one numbered.
    targets: list[tuple[int, str]] = field(default_factory=list)
    _numbers: dict[str, tuple[Any, ...]] | None = field(default=None, repr=False)  # (`numbers`, made once)
    # Each chapter's targets (asked once a chapter: a build reads each target once, not once a chapter).
    _targets_of: dict[int, list[str]] = field(default_factory=dict, repr=False)
    _ids: Identifiers = field(default_factory=Identifiers, repr=False)
    _by_id: dict[str, Anchor] = field(default_factory=dict, repr=False)
    _by_chapter: dict[int, list[Anchor]] = field(default_factory=dict, repr=False)
    _references: dict[str, dict[str, str]] | None = field(
        default=None, repr=False
    )  # (`references`, made once)

    def add(self, chapter: int, level: int, explicit: str | None, title: str, written: str = "") -> Anchor:
        anchor = Anchor(chapter, level, self._ids.claim(explicit, title), title, written)
        self._keep(anchor)
        return anchor

    def _keep(self, anchor: Anchor) -> None:
        self.anchors.append(anchor)
        self._by_id.setdefault(anchor.id, anchor)  # an explicit id given twice: the first lands
        self._by_chapter.setdefault(anchor.chapter, []).append(anchor)

    def define(self, definitions: dict[str, dict[str, str]]) -> None:
        """Definitions a read of the cut found; a label defined before keeps its first."""
        for label, target in definitions.items():
            self.definitions.setdefault(label, {"href": target["href"], "title": target["title"]})

    def note(self, chapter: int, label: str, position: int, written: str) -> None:
        """A footnote definition the cut read at `position` of the manuscript: the book's first of its
        label, or the same one read again, further (a window read at its bound may end inside it)."""
        if self._note_at.setdefault(label, position) == position:
            self.notes[label] = (chapter, written)

    def target(self, chapter: int, target_id: str) -> None:
        """A figure or a table the cut found with a numbered id, or a span with an id."""
        if target_id not in self._ids.used:  # (an id a heading has, or a target before, is theirs)
            self._ids.used.add(target_id)
            self.targets.append((chapter, target_id))
            self._targets_of.setdefault(chapter, []).append(target_id)
            self._by_id[target_id] = Anchor(chapter, 0, target_id, "")

    def numbers(self, target_id: str) -> tuple[Any, ...] | None:
        """What a numbered target is numbered: a figure or table (its number in the book, its chapter's
        number, its number in its chapter); a section, a heading with a `sec-` id (its chapter's number and
        its place under each heading above it: 2, 1 for the first ### under the second ## of the second
        chapter); None for any other id."""
        if self._numbers is None:
            self._numbers = self._numbered()
        return self._numbers.get(target_id)

    def own(self, chapter: int) -> list[Any]:
        """What a chapter is given of the book: its headings' ids, and its targets' and sections' numbers."""
        return [[a.id for a in self.of_chapter(chapter)], self.numbered_in(chapter)]

    def numbered_in(self, chapter: int) -> list[Any]:
        """The numbers a chapter's own targets and sections are given (a chapter's piece depends on them)."""
        own = [a.id for a in self.of_chapter(chapter)] + self._targets_of.get(chapter, [])
        numbered = ((i, self.numbers(i)) for i in own)
        return [[i, found] for i, found in numbered if found is not None]

    def _numbered(self) -> dict[str, tuple[Any, ...]]:
        made: dict[str, tuple[Any, ...]] = {}
        chapters: dict[int, int] = {}  # a chapter's number: it is titled (it opens with its heading)
        for ordinal in sorted(self._by_chapter):
            if self._by_chapter[ordinal][0].level == 1:
                chapters[ordinal] = len(chapters) + 1
        in_book: dict[str, int] = {}
        in_chapter: dict[tuple[int, str], int] = {}
        for chapter, target_id in self.targets:
            kind = target_id.split("-", 1)[0]
            if kind not in NUMBERED:
                continue  # a span's id: a target, not numbered
            in_book[kind] = in_book.get(kind, 0) + 1
            in_chapter[chapter, kind] = in_chapter.get((chapter, kind), 0) + 1
            made[target_id] = (in_book[kind], chapters.get(chapter, 0), in_chapter[chapter, kind])
        for chapter, headings in self._by_chapter.items():
            counts: list[int] = []  # the place of the last heading at each level below the chapter's
            for anchor in headings:
                if anchor.level == 1 and anchor is headings[0]:
                    continue
                depth = max(anchor.level, 2) - 2
                counts = counts[: depth + 1] + [0] * (depth + 1 - len(counts))
                counts[depth] += 1
                if anchor.id.startswith("sec-"):
                    made.setdefault(anchor.id, (chapters.get(chapter, 0), *counts))
            if headings and headings[0].level == 1 and headings[0].id.startswith("sec-"):
                made.setdefault(headings[0].id, (chapters.get(chapter, 0),))
        return made

    def find(self, anchor_id: str) -> Anchor | None:
        return self._by_id.get(anchor_id)

    def references(self) -> dict[str, dict[str, str]]:
        """What a link's label may name in this book: its definitions, and (pandoc's implicit header
        references) each heading's words, naming the first heading of those words, where no definition has
        that label. Made once a build."""
        made = self._references
        if made is None:
            from markdown_it.common.utils import normalizeReference  # (a build's: markdown-it is loaded)

            made = dict(self.definitions)
            for anchor in self.anchors:
                # As pandoc matches a label with a heading, by its inlines: `[Extension: \`foo\`]` names
                # the heading written so, and `[Extension: foo]` does not.
                if label := normalizeReference(anchor.written or anchor.title):
                    made.setdefault(label, {"href": f"#{anchor.id}", "title": ""})
            self._references = made
        return made

    def of_chapter(self, chapter: int) -> list[Anchor]:
        """The chapter's headings, in order."""
        return self._by_chapter.get(chapter, [])

    def rows(self) -> dict[str, Any]:
        """The anchors as the cut's chapter list keeps them (`bindery.chapter_lists`)."""
        headings = [[a.chapter, a.level, a.id, a.title, a.written] for a in self.anchors]
        definitions = {label: [d["href"], d["title"]] for label, d in self.definitions.items()}
        notes = {label: [chapter, written] for label, (chapter, written) in self.notes.items()}
        targets = [[chapter, target_id] for chapter, target_id in self.targets]
        return {
            "version": VERSION, "headings": headings, "definitions": definitions, "notes": notes,
            "targets": targets,
        }  # fmt: skip

    @classmethod
    def from_rows(cls, said: Any, chapters: int) -> Anchors | None:
        """The anchors `rows` gave, or None for what is not (another version's, or not of the book's
        `chapters`)."""
        try:
            if said.get("version") != VERSION:
                return None
            made = cls.of(
                Anchor(int(c), int(lv), str(i), str(t), str(w)) for c, lv, i, t, w in said["headings"]
            )
            made.definitions = {
                str(k): {"href": str(h), "title": str(t)} for k, (h, t) in said["definitions"].items()
            }
            made.notes = {str(k): (int(c), str(w)) for k, (c, w) in said["notes"].items()}
            for chapter, target_id in said["targets"]:
                made.target(int(chapter), str(target_id))
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        return made if all(1 <= a.chapter <= chapters for a in made.anchors) else None

    @classmethod
    def of(cls, anchors: Iterable[Anchor]) -> Anchors:
        made = cls()
        for anchor in anchors:
            made._keep(anchor)
        return made


class Links:
    """What a chapter, as it renders, asks of the book's anchors: its own headings' ids in order, where an
    internal link (`#id`) goes, as the format writes it (`href`: html `#id`, epub the chapter's page and the
    id), and what a link's label names (`labels`: the book's definitions and headings, wherever they are).
    A link to an id no heading of the book has is left as its text, and listed (`unlanded`). Each id and
    label it asks for is `asked`, so that the chapter's built piece is keyed by what they name."""

    def __init__(
        self,
        anchors: Anchors,
        chapter: int,
        href: Callable[[Anchor], str],
        *,
        by_chapter: bool = False,
        pages: bool = False,
    ) -> None:
        self.anchors, self.chapter, self.href, self.by_chapter = anchors, chapter, href, by_chapter
        self.pages = pages  # a numbered reference says its target's page too (the pdf's: `page_refs`)
        self._own = iter(anchors.of_chapter(chapter))
        self.asked: set[str] = set()
        self._captioned: set[str] = set()  # the chapter's figures and tables set with their numbers
        self.labels = Labels(anchors.references(), self.asked)

    def with_notes(self, markdown: str) -> str:
        """The chapter's text, with the definition of each note it cites and another chapter defines after
        it (markdown-it reads a chapter alone; pandoc, the whole book). Each label it cites and does not
        define is `asked` (as `^label`), found or not."""
        if "[^" not in markdown:
            return markdown
        cited = set(_CITED.findall(markdown)).difference(_DEFINED.findall(markdown))
        if not cited:
            return markdown
        found = []
        for label in sorted(cited):
            self.asked.add(f"^{label}")
            note = self.anchors.notes.get(label)
            if note is not None and note[0] != self.chapter:
                found.append(note[1])
        return "\n\n".join([markdown.rstrip("\n"), *found]) + "\n" if found else markdown

    def caption(self, target_id: str) -> str | None:
        """The number of a figure or table of this chapter, the first time it is asked (the one the book
        numbers, and whose id it has), or None: any other is set without an id or a number."""
        return self.number(target_id) if self.owns(target_id) else None

    def owns(self, target_id: str) -> bool:
        """Whether a target (a figure, a table, a span) with this id is the one the book's index holds: in
        this chapter, and the first asked for. Only it is set with the id; any other is set without one."""
        found = self.anchors.find(target_id)
        if found is None or found.level != 0 or found.chapter != self.chapter or target_id in self._captioned:
            return False
        self._captioned.add(target_id)
        return True

    def number(self, target_id: str) -> str | None:
        """A numbered target's number as the book shows it (`3`, or `2.3` numbered by chapter; a section's
        `2.1`), or None when the book has none of that id."""
        numbers = self.anchors.numbers(target_id)
        self.asked.add(f"@{target_id}")
        if numbers is None:
            return None
        if not target_id.startswith("sec-"):
            in_book, chapter, in_chapter = numbers
            return f"{chapter}.{in_chapter}" if self.by_chapter and chapter else str(in_book)
        return ".".join(str(n) for n in numbers)

    def next_id(self) -> str | None:
        """The id of the chapter's next heading, or None past the last the cut found (it cannot be)."""
        return next((a.id for a in self._own), None)

    def resolve(self, href: str) -> str | None:
        """Where a link goes, as the format writes it: an address outside the book, as it is; a heading of
        the book, as `target` says; None for one that lands nowhere: to an id no heading has, or to a file
        (`other.html`, `../notes.md`), which the book does not hold."""
        if href.startswith("#"):
            return self.target(href[1:])
        return href if _SCHEME.match(href) else None

    def target(self, anchor_id: str) -> str | None:
        """Where a link to `#anchor_id` goes, or None when no heading of the book has that id. The parser
        percent-encodes a link's address (`#café` is `#caf%C3%A9`); an id is read decoded, as pandoc's is."""
        anchor_id = unquote(anchor_id)
        self.asked.add(f"#{anchor_id}")
        found = self.anchors.find(anchor_id)
        return self.href(found) if found is not None else None


def link_words(tokens: Sequence[Any], index: int) -> str:
    """The words of the link opened at `tokens[index]`: its tokens' text up to its close (links do not nest;
    read forward from it by index: an islice from the list's start walked every token before it, so a
    paragraph of links to nowhere cost the square of its length)."""
    out = []
    for at in range(index + 1, len(tokens)):
        token = tokens[at]
        if token.type == "link_close":
            break
        out.append(
            token.content
            if token.type in ("text", "code_inline", "math_inline", "math_display")
            else " "
            if "break" in token.type
            else ""
        )
    return "".join(out)


class Labels(dict[str, Any]):
    """A chapter's env["references"] for markdown-it: the book's labels (`Anchors.references`) before the
    chapter's own, which are among them (a label's first definition in the book is the one a whole parse
    keeps). Each label looked up is noted in `asked` (as `[label`), found or not."""

    def __init__(self, book: dict[str, dict[str, str]], asked: set[str]) -> None:
        super().__init__()
        self.book, self.asked = book, asked

    def __contains__(self, label: object) -> bool:
        return label in self.book or dict.__contains__(self, label)

    def get(self, label: str, default: Any = None) -> Any:
        self.asked.add(f"[{label}")
        found = self.book.get(label)
        return found if found is not None else dict.get(self, label, default)
