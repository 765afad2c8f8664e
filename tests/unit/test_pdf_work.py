"""What the pdf's writer hands Typst grows linearly with the manuscript, for every family of hostile input
(tests/books/hostile.py): counted in the Typst source it writes, never timed, so that a test fails on the
shape and cannot flake. The seconds per MB each family costs live in `make bench`.

Typst's cost follows three counts of its source, each bounded here:

- A paragraph's elements times its characters: for every glyph it sets, Typst finds the element the glyph
  came from by walking the paragraph's elements from its first (typst-layout's `SpanMapper::span_at`).
- The characters of a paragraph it breaks by Knuth-Plass, which weighs each break of a line against the
  others: a long paragraph costs more than its length, the more so the more breaks its lines hold.
- A table's columns and rows: one of more columns than the page holds sets every cell as a run to
  measure, and the layout of a long one grows faster than its rows.
"""

from __future__ import annotations

import functools
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import pikepdf
import pytest

from bindery import errors
from bindery.engine import Source, Text, markup, paragraphs, pdf_tables, renderer_for, typeset
from bindery.engine.measures import columns_held
from bindery.engine.paragraphs import (
    DENSE_BREAKS,
    DENSE_FROM,
    GREEDY_FROM,
    MAX_INLINE_DEPTH,
    MAX_PARAGRAPH_ELEMENTS,
)
from bindery.engine.pdf_source import PAGE_SIZES
from bindery.engine.pdf_tables import MAX_TABLE_ROWS
from bindery.engine.typeset import MAX_QUOTE_BLOCKS, chapter_source
from bindery.manuscript import cut_text
from bindery.table_width import MAX_TABLE_COLUMNS, refuse_wide_table, refuse_wide_tables
from tests.books.hostile import FAMILIES, PROSE
from tests.validators import Word, pdfinfo, pdftotext, placed_words, qpdf_check, structure_problems

SIZE = 16_000  # bytes; each family is also written at eight times this
BLOCK = PAGE_SIZES["a5"].block

# Calls whose content is part of the paragraph around them, and those that begin flows of their own.
INLINE = {"", "emph", "strong", "strike", "link", "super", "continued", "greedy"}
STYLES = {"", "continued", "greedy"}  # set rules alone: no element of the paragraph
OF_THEIR_OWN = {"footnote"}  # an element of its paragraph, whose body is set apart (at the page's foot)
ELEMENTS = {"raw", "long", "linebreak", "box", "pdf.artifact", "footnote"}


@dataclass
class Paragraph:
    elements: int = 0
    characters: int = 0
    breaks: int = 0  # the characters a line may break at: spaces, and every one of a run marked `long`
    greedy: bool = False


@dataclass
class Work:
    """What a chapter's Typst source hands Typst, counted."""

    paragraphs: list[Paragraph] = field(default_factory=list)
    tables: list[tuple[int, int]] = field(default_factory=list)  # columns, rows
    quotes: list[int] = field(default_factory=list)  # the paragraphs each quote's own flow begins
    depth: int = 0  # the deepest nesting of content blocks

    @property
    def span_walk(self) -> int:
        """Typst's walk over a paragraph's elements for each glyph, in steps."""
        return sum(p.elements * p.characters for p in self.paragraphs)

    @property
    def characters(self) -> int:
        return sum(p.characters for p in self.paragraphs)

    @property
    def elements(self) -> int:
        return sum(p.elements for p in self.paragraphs)

    def long_by_knuth_plass(self) -> list[Paragraph]:
        """Paragraphs long enough, for the breaks they hold, to cost Knuth-Plass more than their length."""
        return [
            p
            for p in self.paragraphs
            if not p.greedy
            and (
                p.characters >= GREEDY_FROM
                or (p.characters >= DENSE_FROM and p.breaks >= DENSE_BREAKS * p.characters)
            )
        ]


_NAME = re.compile(r"[A-Za-z][\w.-]*")
_ESCAPE = re.compile(r"\\(u\{[0-9a-fA-F]+\}|.)")


def _string(source: str, i: int) -> tuple[str, int]:
    """The string literal whose opening quote is at `i`, decoded (an escape as one character), and where
    it ends."""
    j = i + 1
    while source[j] != '"':
        j += 2 if source[j] == "\\" else 1
    return _ESCAPE.sub("x", source[i + 1 : j]), j + 1


class _Scanner:
    """The Typst source bindery.engine.typeset writes, read for its work. It writes nothing else: literals
    (`#"…"`), calls with arguments it made, content blocks, and paragraph breaks."""

    def __init__(self, source: str):
        self.source, self.work = source, Work()
        self.greedy = 0  # `greedy` calls open around what is read
        self.begun = [0]  # the paragraphs each flow being read has begun, itself (not the flows inside)
        self.flows = 0  # the paragraphs the flow read last began
        self.paragraph = self._begin()

    def flow(self, i: int, depth: int) -> int:
        """Read content from `i` to the `]` that ends it (or the source's end); return where that is."""
        self.work.depth = max(self.work.depth, depth)
        s = self.source
        while i < len(s) and s[i] != "]":
            if s.startswith("\n\n", i):
                self._begin()
                i += 2
            elif s.startswith('#"', i):
                text, i = _string(s, i + 1)
                self._text(text)
            elif s[i] == "#":
                i = self._call(i + 1, depth)
            else:
                i += 1
        return i

    def _begin(self) -> Paragraph:
        self.begun[-1] += 1
        self.paragraph = Paragraph(greedy=self.greedy > 0)
        self.work.paragraphs.append(self.paragraph)
        return self.paragraph

    def _text(self, text: str, *, marked: bool = False) -> None:
        self.paragraph.elements += 1
        self.paragraph.characters += len(text)
        self.paragraph.breaks += len(text) if marked else text.count(" ")

    def _apart(self, i: int, depth: int) -> int:
        """A content block set apart from the paragraph around it (a note's body, a list's item, a table's
        cell): a flow of its own. Return where it ends, past its `]`."""
        around = self.paragraph
        self.begun.append(0)
        self._begin()
        i = self.flow(i, depth) + 1
        self.paragraph, self.flows = around, self.begun.pop()
        return i

    def _call(self, i: int, depth: int) -> int:
        s, begun = self.source, i
        name = m.group() if (m := _NAME.match(s, i)) else ""
        i += len(name)
        arguments: list[str] = []  # its literals
        cells = 0
        if i < len(s) and s[i] == "(":
            start = i
            i, cells = self._arguments(i + 1, depth, arguments)
            block = "block: true" in s[start:i] and name == "raw"
        else:
            block = False
        if name in INLINE:
            self.paragraph.elements += name not in STYLES  # the element that opens it
            self.paragraph.greedy |= name == "greedy"
            self.greedy += name == "greedy"
            while i < len(s) and s[i] == "[":
                i = self.flow(i + 1, depth + 1) + 1  # part of the paragraph around it
            self.greedy -= name == "greedy"
        elif name in ("raw", "long") and not block:
            self._text(arguments[-1] if name == "raw" else arguments[0], marked=name == "long")
        elif name in ELEMENTS:
            self.paragraph.elements += 1
            while i < len(s) and s[i] == "[":
                i = self._apart(i + 1, depth + 1)  # a note's body: set at the page's foot
        else:  # a block: it ends the paragraph, and its bodies are flows of their own
            if name == "book-table":  # its cells: content blocks, and strings (a cell of text alone)
                columns = int(s[begun : begun + 40].split("columns: ")[1].split(",")[0])
                self.work.tables.append((columns, (cells + len(arguments)) // columns))
                for text in arguments:
                    self._begin()
                    self._text(text)
            while i < len(s) and s[i] == "[":
                i = self._apart(i + 1, depth + 1)
                if name == "quote":
                    self.work.quotes.append(self.flows)
            self._begin()
        if i < len(s) and s[i] == "<":  # a label
            i = s.index(">", i) + 1
        return i

    def _arguments(self, i: int, depth: int, literals: list[str]) -> tuple[int, int]:
        """A call's arguments from `i`, past its `(`: their literals, and their content blocks read as flows
        of their own. Return where they end, past the `)`, and how many content blocks they hold."""
        s, level, blocks = self.source, 1, 0
        while level:
            if s[i] == '"':
                text, i = _string(s, i)
                literals.append(text)
                continue
            if s[i] == "[":
                i = self._apart(i + 1, depth + 1) - 1
                blocks += 1
            elif s[i] == "(":
                level += 1
            elif s[i] == ")":
                level -= 1
            i += 1
        return i, blocks


@functools.cache
def family_written(family: str, size: int) -> tuple[str, Work]:
    return written(FAMILIES[family](size))


def written(manuscript: str) -> tuple[str, Work]:
    """The Typst source the pdf's writer makes of every chapter of `manuscript`, and its work."""
    parse = markup.parser().parse
    # A family of one chapter is that chapter, whatever the cut refuses (a table wider than a book may hold
    # is refused before any build: written alone here, the pdf's writer still sets it in bands).
    one = manuscript.startswith("# T\n")
    chapters = [manuscript] if one else [text for _, text in cut_text(manuscript)]
    source = "".join(
        chapter_source(parse, text, f"ch{n}", BLOCK, None).source for n, text in enumerate(chapters, start=1)
    )
    scanner = _Scanner(source)
    end = scanner.flow(0, 0)
    assert end == len(source), f"unbalanced at {end}: {source[end - 80 : end + 80]!r}"
    return source, scanner.work


def test_the_scanner_counts_what_a_paragraph_holds() -> None:
    source, work = written("# T\n\nsome *words* and `code` [here](https://x.org)[^1]\n\n[^1]: A note.\n")
    first = work.paragraphs[0]
    # "some ", emph and its text, " and ", code, " ", link and its text, the note's mark
    assert (first.elements, first.characters) == (9, len("some words and code here")), source
    assert any(p.characters == len("A note.") for p in work.paragraphs)
    _, wide = written("# T\n\n" + "|a" * 40 + "|\n" + "|-" * 40 + "|\n" + "|b" * 40 + "|\n")
    assert wide.tables == [(18, 2), (18, 2), (4, 2)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_paragraph_makes_typst_walk_more_than_a_bounded_count_of_elements_a_glyph(family: str) -> None:
    # A paragraph of 16 KB of `a`` ` held some 6,400 elements: each of its glyphs walked thousands.
    for size in (SIZE, 8 * SIZE):
        _, work = family_written(family, size)
        assert work.span_walk <= (2 * MAX_PARAGRAPH_ELEMENTS + MAX_INLINE_DEPTH) * work.characters


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_long_or_dense_paragraph_is_handed_to_knuth_plass(family: str) -> None:
    # `a a a` nested in emphasis, a run of backslashes, `- - -` past the lists' depth, `*a_ ` over 128 KB:
    # one paragraph of all of it was justified by Knuth-Plass.
    for size in (SIZE, 8 * SIZE):
        assert family_written(family, size)[1].long_by_knuth_plass() == []


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_table_is_wider_than_the_page_holds_or_longer_than_the_bound(family: str) -> None:
    # A table of 16 KB of `|a` had 2,666 columns, each cell a run for Typst to measure 1.7 pt wide.
    held = columns_held(BLOCK.width_pt)
    for size in (SIZE, 8 * SIZE):
        tables = family_written(family, size)[1].tables
        assert all(columns <= held and rows <= MAX_TABLE_ROWS + 1 for columns, rows in tables)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_quote_holds_more_blocks_than_the_bound(family: str) -> None:
    # `> # a` over 16 KB was one quote of 2,666 headings, which cost Typst more a heading than several.
    for size in (SIZE, 8 * SIZE):
        quotes = family_written(family, size)[1].quotes
        assert all(begun <= 2 * MAX_QUOTE_BLOCKS + 2 for begun in quotes)  # a block, and the break after it


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_what_typst_is_handed_grows_linearly_with_the_manuscript(family: str) -> None:
    small, large = FAMILIES[family](SIZE), FAMILIES[family](8 * SIZE)
    (source, work), (source8, work8) = family_written(family, SIZE), family_written(family, 8 * SIZE)
    # Per byte of manuscript, at eight times the size: the source, its elements and Typst's walk over them
    # at most a quarter more (a bound and a remainder, not a growth). Emphasis nested past the depth was set
    # as a literal per word; backtick runs were one paragraph.
    ratios = {
        "source": (len(source8) / len(large)) / (len(source) / len(small)),
        "elements": (work8.elements / len(large)) / max(work.elements / len(small), 1e-9),
        "span walk": (work8.span_walk / len(large)) / max(work.span_walk / len(small), 1e-9),
    }
    assert all(ratio <= 1.25 for ratio in ratios.values()), ratios
    assert work8.depth <= 2 * MAX_INLINE_DEPTH + 64, work8.depth  # block nesting is bounded by the parser


def _built(manuscript: str, tmp_path: Path) -> Path:
    sections = cut_text(manuscript)
    source = Source("abcdef0123456789abcd", "Work", 3, tuple(s.title for s, _ in sections), 1.8e9)
    out = io.BytesIO()
    report = renderer_for("pdf").render(
        source, [Text(n, s.title, text) for n, (s, text) in enumerate(sections, start=1)], out
    )
    assert report.skipped == []
    path = tmp_path / "work.pdf"
    path.write_bytes(out.getvalue())
    return path


def _checked(path: Path) -> str:
    """The pdf's text, once it is shown to be valid, tagged, and to claim PDF/UA-1."""
    assert qpdf_check(path).returncode == 0
    assert structure_problems(path) == [] and pdfinfo(path)["Tagged"] == "yes"
    with pikepdf.open(path) as pdf:
        assert pdf.open_metadata()["pdfuaid:part"] == "1"
    return " ".join(pdftotext(path).replace("\xad\n", "").split())


def test_a_paragraph_cut_for_its_elements_keeps_its_words_emphasis_and_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a bound of 8 elements, a paragraph of 120 goes on as paragraphs of at most 16, each opening the
    # emphasis left open by the one before.
    monkeypatch.setattr(paragraphs, "MAX_PARAGRAPH_ELEMENTS", 8)
    words = " ".join(f"w{n} *e{n}* [l{n}](https://example.org/{n})" for n in range(30))
    shown = " ".join(f"w{n} e{n} l{n}" for n in range(30))
    manuscript = f"# Cut\n\n**Strong {words} end.**\n"
    source, work = written(manuscript)
    assert source.count("\n\n") >= 10 and max(p.elements for p in work.paragraphs) <= 16
    path = _built(manuscript, tmp_path)
    assert f"Strong {shown} end." in _checked(path)
    with pikepdf.open(path) as pdf:
        annotations = [a for page in pdf.pages for a in page.obj.get("/Annots", [])]
        uris = [str(a.A.URI) for a in annotations if "/A" in a and "/URI" in a.A]
    assert uris == [f"https://example.org/{n}" for n in range(30)]


def test_a_table_wider_than_the_page_is_set_in_bands_and_a_long_one_in_tables_of_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pdf_tables, "MAX_TABLE_ROWS", 4)
    columns = 40
    head = "".join(f"|h{c}z" for c in range(columns)) + "|\n" + "|-" * columns + "|\n"
    rows = "".join("".join(f"|r{r}c{c}z" for c in range(columns)) + "|\n" for r in range(10))
    manuscript = f"# Wide\n\n{head}{rows}"
    _, work = written(manuscript)
    held = columns_held(BLOCK.width_pt)
    assert [c for c, _ in work.tables] == [held] * 6 + [columns - 2 * held] * 3  # 3 bands of 3 tables
    assert all(rows <= 4 + 1 for _, rows in work.tables)
    # Every cell, and each band's header above each of its tables (a cell as narrow as the page leaves is
    # broken with zero-width spaces).
    text = re.sub(r"[\s\u200b]", "", _checked(_built(manuscript, tmp_path)))
    cells = re.findall(r"[hr][\dc]+z", text)
    assert sorted(c for c in cells if c[0] == "r") == sorted(
        f"r{r}c{c}z" for r in range(10) for c in range(columns)
    )
    assert all(cells.count(f"h{c}z") >= 3 for c in range(columns))


def test_a_paragraph_dense_with_breaks_is_still_justified(tmp_path: Path) -> None:
    manuscript = "# Dense\n\n" + "a " * 3000 + "\n"
    source, _ = written(manuscript)
    assert source.count("#greedy[") == 1
    path = _built(manuscript, tmp_path)
    assert _checked(path).count("a") >= 3000
    lines: dict[tuple[int, int], list[Word]] = {}
    for word in placed_words(path):
        lines.setdefault((word.page, round(word.y0)), []).append(word)
    full = [(page, max(w.x1 for w in ws)) for (page, _), ws in lines.items() if len(ws) > 20][:-1]
    assert len(full) > 20
    for page in {page for page, _ in full}:  # a recto's edge is not a verso's
        ends = [end for on, end in full if on == page]
        assert max(ends) - min(ends) < 1, ends  # every full line ends at the right edge


def _lines_checked(manuscript: str, *, batches: bool = False) -> None:
    lines = manuscript.encode().splitlines(keepends=True)
    if batches:  # as a manuscript's lines are checked for their characters
        for first in range(0, len(lines), 512):
            refuse_wide_tables(lines[first : first + 512], first + 1)
    else:
        for number, line in enumerate(lines, start=1):
            refuse_wide_table(line, number)


# The families of tables of more columns than the bound, each refused at its line (`table_width`).
REFUSED_WIDE = ("a table of many columns", "a simple table of many columns")


@pytest.mark.parametrize("batches", [False, True])
@pytest.mark.parametrize("size", [10_000, 100_000, 1_000_000])
def test_a_table_of_more_columns_than_the_bound_is_refused_at_its_delimiter_row(
    size: int, batches: bool
) -> None:
    # Set in bands, a table of thousands of one-character columns is linear in the pdf, but its cells cost
    # many times what as much prose does: the manuscript is refused before any build, naming the line.
    with pytest.raises(errors.Unprocessable) as refused:
        _lines_checked(FAMILIES["a table of many columns"](size), batches=batches)
    assert refused.value.code == "table_too_wide"
    assert refused.value.details == {"line": 4, "columns": max(1, size // 6), "limit": MAX_TABLE_COLUMNS}
    assert "line 4 " in refused.value.message


def test_every_other_family_and_a_table_of_the_bound_pass_the_width_check() -> None:
    for family, make in FAMILIES.items():
        if family not in REFUSED_WIDE:
            _lines_checked(make(SIZE))
            _lines_checked(make(SIZE), batches=True)
    _lines_checked(PROSE(SIZE))
    widest = MAX_TABLE_COLUMNS
    for row in (
        "|a" * widest + "|",
        "|:-" * widest + "|",
        "-|" * (widest - 1) + "-",
        "> - " + "| --- " * widest,
    ):
        _lines_checked(f"# T\n\n{row}\n")
    for row in ("|:-" * (widest + 1) + "|", "> 1. " + "| --- " * (widest + 1), "-|" * widest + "-"):
        with pytest.raises(errors.Unprocessable):
            _lines_checked(f"# T\n\n{row}\n")


def test_the_join_finds_each_page_of_a_piece_without_listing_them_all_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pikepdf finds a page by its index by listing every page: the join laid each page's folio over the
    # page it found so, and a run of 5,000 pages of headings spent most of its join there.
    pages = type(pikepdf.new().pages)
    found: list[int] = []
    by_index = pages.__getitem__

    def counted(self: object, index: int) -> object:
        found.append(index)
        return by_index(self, index)

    monkeypatch.setattr(pages, "__getitem__", counted)
    path = _built("# Long\n\n" + "Words and more words to fill a page.\n\n" * 1500, tmp_path)
    with pikepdf.open(path) as pdf:
        assert len(pdf.pages) > 40
    assert len(found) <= 8  # a piece's first page, read for its size, and these counted


def test_a_quote_of_more_blocks_than_the_bound_is_set_as_quotes_one_under_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(typeset, "MAX_QUOTE_BLOCKS", 3)
    manuscript = (
        "# Quoted\n\n" + "".join(f"> ## Heading {n}\n>\n> Paragraph {n}.\n>\n" for n in range(5)) + "\n"
    )
    source, work = written(manuscript)
    assert source.count("#quote(block: true)") == 4 and max(work.quotes) <= 2 * 3 + 2
    text = _checked(_built(manuscript, tmp_path))
    assert " ".join(f"Heading {n} Paragraph {n}." for n in range(5)) in text
