"""Every test book through every format, checked by the validators real readers trust."""

from __future__ import annotations

import html.parser
import importlib
import io
import re
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from bindery.engine import FORMATS, Source, Text, renderer_for
from bindery.manuscript import cut_text
from bindery.normalising import normalise
from bindery.spools import RollingSpool
from tests.books import BOOKS, SAMPLES
from tests.docx_checks import document_text
from tests.validators import (
    Word,
    ace,
    epubcheck,
    manuscript_text,
    pdftotext,
    placed_words,
    text_characters,
)

BUILDABLE = [name for name in BOOKS if name != "empty"]


def _build(book: str, fmt: str, tmp_path: Path, manuscript: str | None = None, **options: str) -> Path:
    sections = cut_text(BOOKS[book] if manuscript is None else manuscript)
    titles = tuple(s.title for s, _ in sections)
    source = Source("abcdef0123456789abcd", f"The {book} book", 3, titles, 1.8e9, options=options)
    out = io.BytesIO()
    report = renderer_for(fmt).render(
        source, [Text(n, s.title, text) for n, (s, text) in enumerate(sections, start=1)], out
    )
    assert report.skipped == []
    path = tmp_path / f"{book}.{FORMATS[fmt].extension}"
    path.write_bytes(out.getvalue())
    return path


class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if (
                name in ("src", "href")
                and value
                and value.startswith(("http:", "https:", "//"))
                and tag != "a"
            ):
                raise AssertionError(f"external fetch: <{tag} {name}={value}>")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


@pytest.mark.slow(6)
@pytest.mark.parametrize("book", BUILDABLE)
def test_epub_passes_epubcheck_with_no_errors_or_warnings(book: str, tmp_path: Path) -> None:
    path = _build(book, "epub", tmp_path)
    report = epubcheck(path)
    assert "0 fatals / 0 errors / 0 warnings" in report, report[-2000:]
    with zipfile.ZipFile(path) as z:
        assert z.namelist()[0] == "mimetype" and z.getinfo("mimetype").compress_type == zipfile.ZIP_STORED
        text = " ".join(z.read(n).decode() for n in z.namelist() if n.endswith(".xhtml"))
        opf = z.read("OEBPS/content.opf").decode()
    for sample in SAMPLES[book]:
        assert sample in text
    assert (
        "<dc:title>" in opf and "dcterms:modified" in opf and "urn:uuid:" in opf and 'properties="nav"' in opf
    )


# Ace opens every content document in Chromium: the 1,200-chapter book takes it over ten minutes, and its
# pages are the others' template. (The illustrated and Arabic books: tests/unit/test_illustrated.py.)
ACE_BOOKS = [name for name in BUILDABLE if name != "many"]


@pytest.mark.slow(5)
@pytest.mark.parametrize("book", ACE_BOOKS)
def test_epub_has_no_accessibility_violations_by_ace(book: str, tmp_path: Path) -> None:
    violations, report = ace(_build(book, "epub", tmp_path), tmp_path / "ace")
    assert violations == [], violations
    assert report["a11y-metadata"]["empty"] == []  # type: ignore[index]


def test_pdf_text_stays_inside_the_page(tmp_path: Path) -> None:
    """No word is cut off at a page edge: every word's box lies inside the page's margins (15 mm outside,
    20 mm inside: 42.5 pt at the least; a little slack is left for glyph overhang). The rest of the PDF's
    checks: tests/unit/test_pdf.py."""
    path = _build("features", "pdf", tmp_path)
    layout = pdftotext(path, "-bbox")
    page = re.search(r'<page width="([\d.]+)" height="([\d.]+)"', layout)
    assert page is not None
    width, height = float(page.group(1)), float(page.group(2))
    words = re.findall(r'xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)"', layout)
    assert len(words) > 100
    inset = 40.0
    for x0, y0, x1, y1 in ((float(v) for v in w) for w in words):
        assert inset <= x0 and x1 <= width - inset, (x0, x1, width)
        assert y0 >= 0 and y1 <= height


# Lines no layout expects: runs that offer no line break, of characters narrow and wide (Latin, a
# ligature, Arabic, Hebrew, CJK punctuation and small kana, which do not break, emoji, the three-em dash,
# no-break spaces that join what they stand between, spaces that may not break, before `!` or after `(`
# or `“`), alone and nested past Markdown's limit, in lists with the widest numbers, in links, inline
# code, code blocks, headings, tables, emphasis and notes. Each line is drawn as (its kind, a depth, the
# piece its run repeats, how many times), which a failure shows.
_LINES: dict[str, Callable[[int, str], str]] = {
    "run": lambda _, r: r,
    "quoted": lambda depth, r: ">" * depth + " " + r,
    "listed": lambda depth, r: "- " * depth + r,
    "numbered": lambda depth, r: "123456789. " * depth + r,
    "link": lambda _, r: f"See https://example.org/{r} now.",
    "inline code": lambda _, r: f"Call `{r}` now.",
    "code block": lambda _, r: f"```\n{r}\n```",
    "heading": lambda _, r: f"## {r}",
    "table": lambda _, r: f"| a | {r} |\n|---|---|\n| {r} | b |",
    "emphasis": lambda _, r: f"*{r}*{r}",
    "note": lambda _, r: f"A note[^1].\n\n[^1]: {r}",
}
_PIECE = st.text(alphabet=">xW/-.ﬁßعש。ぁ📚⸻中\u00a0 !(“", min_size=1, max_size=3)
_LINE = st.tuples(st.sampled_from(sorted(_LINES)), st.integers(1, 40), _PIECE, st.integers(1, 1200))
_TITLE = st.one_of(st.just("Hostile"), _PIECE.map(lambda piece: piece * 100))


def _manuscript(title: str, lines: list[tuple[str, int, str, int]]) -> str:
    body = "\n\n".join(_LINES[kind](depth, piece * times) for kind, depth, piece, times in lines)
    return f"# {title}\n\n{body}\n"


def _read(fmt: str, path: Path) -> str:
    """The text a reader of the format finds: the markdown itself, the HTML's or the EPUB's documents'
    text, the docx's body and notes, or what pdftotext reads (-raw: as set, or it drops a hyphen that ends
    a line)."""
    if fmt == "markdown":
        return path.read_text()
    if fmt == "pdf":
        return pdftotext(path, "-raw")
    if fmt == "docx":
        return document_text(path)
    if fmt == "epub":
        with zipfile.ZipFile(path) as z:
            documents = [z.read(n).decode() for n in z.namelist() if n.endswith(".xhtml")]
    else:
        documents = [path.read_text()]
    parser = _Text()
    for document in documents:
        parser.feed(document)
    return " ".join(parser.parts)


@pytest.mark.slow(20)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TITLE, st.lists(_LINE, min_size=1, max_size=4))
def test_every_format_keeps_every_character_of_a_manuscript(
    title: str, lines: list[tuple[str, int, str, int]]
) -> None:
    note(f"title {title[:6]!r} x {len(title)}, lines {lines!r}")  # (this Hypothesis prints no arguments)
    manuscript = _manuscript(title, lines)
    expected = text_characters(manuscript_text(manuscript))
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in FORMATS:
            # (typography sets quotes and dashes as other characters: tests/unit/test_typography.py)
            path = _build("hostile", fmt, Path(tmp), manuscript, typography="off")
            assert expected - text_characters(_read(fmt, path)) == {}, fmt
            if fmt == "markdown":
                assert path.read_bytes() == normalise(manuscript.encode())
            if fmt == "pdf":  # and nothing is set past the text block, let alone the page's edge
                assert [w for w in placed_words(path) if not _in_margins(w)] == []


# A5's margins are 15 mm outside and 20 mm inside: 42.5 pt at the least. Typst hangs the punctuation that
# ends a line into the margin (an ideographic full stop by its whole em), so a word may reach 12 pt into it.
HANGING = 12.0


def _in_margins(word: Word) -> bool:
    inset = 42.5 - HANGING
    return word.x0 >= inset and word.x1 <= word.width - inset and word.y0 >= 0 and word.y1 <= word.height


@pytest.mark.parametrize("book", BUILDABLE)
def test_html_is_one_standalone_page_with_contents_and_print_css(book: str, tmp_path: Path) -> None:
    page = _build(book, "html", tmp_path).read_text()
    parser = _Text()
    parser.feed(page)
    text = " ".join(parser.parts)
    for sample in SAMPLES[book]:
        assert sample in text
    assert "nav" in parser.tags and "@media print" in page and "<link" not in page and "<script" not in page


@pytest.mark.parametrize("fmt", ["html"])
def test_a_spool_past_its_in_memory_size_rolls_over_to_disk_and_writes_the_same_bytes(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_memory = _build("features", fmt, tmp_path).read_bytes()
    monkeypatch.setattr(importlib.import_module(FORMATS[fmt].module), "SPOOL_IN_MEMORY", 1024)
    rolled: list[bool] = []  # for each spool closed, whether it had gone on to disk
    real = RollingSpool.close

    def close(spool: RollingSpool) -> None:
        rolled.append(spool._disk is not None)
        real(spool)

    monkeypatch.setattr(RollingSpool, "close", close)
    assert _build("features", fmt, tmp_path).read_bytes() == in_memory
    assert rolled == [True]


def test_html_keeps_every_markdown_feature(tmp_path: Path) -> None:
    page = _build("features", "html", tmp_path).read_text()
    for fragment in (
        "<em>emphasis</em>",
        "<strong>strong</strong>",
        "<s>struck</s>",
        "<code>code</code>",
        '<a href="https://example.org/page?a=1&amp;b=2">link</a>',
        "<ol>",
        "<blockquote>",
        '<code class="language-python">',
        "<table>",
        'class="footnotes"',
        'id="fn-ch1-1"',
        'id="fn-ch2-1"',
        "Raw &lt;b&gt;html&lt;/b&gt;",
    ):
        assert fragment in page, fragment
    # Headings below a chapter's own carry ids, so a table of contents to toc_depth 2 or 3 can reach them.
    assert re.search(r'<h2 id="ch\d+-h\d+">A second level</h2>', page)
    assert re.search(r'<h3 id="ch\d+-h\d+">A third level</h3>', page)


@pytest.mark.parametrize("book", BUILDABLE)
def test_markdown_is_the_manuscript_normalised(book: str, tmp_path: Path) -> None:
    out = _build(book, "markdown", tmp_path).read_bytes()
    assert out == normalise(BOOKS[book].encode())
    assert out.endswith(b"\n") and not out.endswith(b"\n\n") and b"\r" not in out
    out = out.decode()
    for sample in SAMPLES[book]:
        assert sample in out


def test_every_format_is_registered_with_its_own_module() -> None:
    assert sorted(FORMATS) == ["docx", "epub", "html", "markdown", "pdf"]
    assert {FORMATS[f].extension for f in FORMATS} == {"docx", "epub", "html", "md", "pdf"}
