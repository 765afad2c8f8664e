"""The typeset PDF, checked the way a printer and a screen reader would: qpdf, pdffonts, pdfinfo, pdftotext
(text, and where each word sits), and the document's own outline, page labels and structure tree read with
pikepdf."""

from __future__ import annotations

import io
import itertools
import os
import re
import time
from pathlib import Path

import pikepdf
import pytest

from bindery.engine import Source, Text, renderer_for
from bindery.engine.compiler import TimeLimit
from bindery.engine.pdf import RENDERER
from bindery.manuscript import cut_text
from bindery.metadata import Metadata
from tests.books import BOOKS, SAMPLES
from tests.validators import (
    Word,
    manuscript_text,
    pdffonts,
    pdfinfo,
    pdftotext,
    placed_words,
    qpdf_check,
    structure_problems,
    text_characters,
)

BUILDABLE = [name for name in BOOKS if name != "empty"]
BIDI_CONTROLS = dict.fromkeys(map(ord, "\u200e\u200f\u202a\u202b\u202c\u202d\u202e"))


def _build(
    manuscript: str, tmp_path: Path, name: str = "book", title: str | None = None, **options: object
) -> Path:
    language = str(options.pop("language", "en"))
    sections = cut_text(manuscript)
    source = Source(
        "abcdef0123456789abcd",
        title or f"The {name} book",
        3,
        tuple(s.title for s, _ in sections),
        1.8e9,
        metadata=Metadata(authors=("Ann Author",), language=language),
        options={"page_size": "a5", "toc_depth": 1, **options},
    )
    out = io.BytesIO()
    report = renderer_for("pdf").render(
        source, [Text(n, s.title, text) for n, (s, text) in enumerate(sections, start=1)], out
    )
    assert report.skipped == []
    path = tmp_path / f"{name}.pdf"
    path.write_bytes(out.getvalue())
    return path


def _pages(path: Path) -> list[str]:
    return pdftotext(path).split("\f")[:-1]


def _labels(path: Path) -> list[str]:
    with pikepdf.open(path) as pdf:
        return [page.label for page in pdf.pages]


def _chapters(book: str) -> list[str]:
    return [s.title for s, _ in cut_text(BOOKS[book])]


@pytest.mark.slow(3)
@pytest.mark.parametrize("book", BUILDABLE)
def test_every_book_is_a_valid_tagged_pdf_with_every_font_embedded(book: str, tmp_path: Path) -> None:
    path = _build(BOOKS[book], tmp_path, book)
    check = qpdf_check(path)
    assert check.returncode == 0, check.stdout + check.stderr
    fonts = pdffonts(path)
    assert fonts and all(font["emb"] == "yes" for font in fonts), fonts
    info = pdfinfo(path)
    assert (info["Tagged"], info["Title"]) == ("yes", f"The {book} book")
    assert info["Page size"].startswith("419.528 x 595.276")  # A5, the default
    text = pdftotext(path)
    for sample in [*SAMPLES[book], *_chapters(book)]:
        assert sample in text, sample
    assert structure_problems(path) == []
    with pikepdf.open(path) as pdf:
        assert str(pdf.Root.Lang) == "en"
        assert pdf.open_metadata()["pdfuaid:part"] == "1"  # PDF/UA-1 is claimed
        assert int(pdf.open_metadata()["{http://ns.adobe.com/xap/1.0/t/pg/}NPages"]) == len(pdf.pages)


def _contents(pages: list[str], labels: list[str]) -> list[tuple[str, str]]:
    """(title, page number) for each line of the contents, from the pages with roman labels."""
    lines = "\n".join(p for p, label in zip(pages, labels, strict=True) if re.fullmatch(r"[ivxl]+", label))
    return [
        (m.group(1).translate(BIDI_CONTROLS).strip(), m.group(2))
        for m in re.finditer(r"^(.+?)\s*(?:\. ?){3,}\s*(\d+)$", lines, re.M)
    ]


@pytest.mark.slow(4)
@pytest.mark.parametrize("book", ["features", "scripts", "many"])
def test_the_contents_gives_the_page_each_chapter_opens_on(book: str, tmp_path: Path) -> None:
    path = _build(BOOKS[book], tmp_path, book)
    pages, labels = _pages(path), _labels(path)
    listed = _contents(pages, labels)
    assert [title for title, _ in listed] == _chapters(book)
    for title, number in listed:
        opening = pages[labels.index(number)]  # the page whose label is the number the contents gives
        assert opening.translate(BIDI_CONTROLS).lstrip().startswith(title), (title, number)
        assert int(number) % 2 == 1  # a chapter opens on a recto
    # Each line of the contents is a link to its chapter's page (the contents could not know it), by a name
    # the book's catalog gives its page.
    with pikepdf.open(path) as pdf:
        assert _placeholders(pdf) == []
        index = {page.objgen: n for n, page in enumerate(pdf.pages)}
        names = pikepdf.NameTree(pdf.Root.Names.Dests)
        linked = [
            index[names[str(annot.A.D)][0].objgen]
            for n, label in enumerate(labels)
            if re.fullmatch(r"[ivxl]+", label)
            for annot in pdf.pages[n].obj.get("/Annots", [])
        ]
    assert linked == [labels.index(number) for _, number in listed]


def test_the_outline_has_one_entry_per_chapter_pointing_at_its_opening(tmp_path: Path) -> None:
    path = _build(BOOKS["features"], tmp_path, "features", toc_depth=2)
    pages = _pages(path)
    with pikepdf.open(path) as pdf, pdf.open_outline() as outline:
        index = {page.objgen: n for n, page in enumerate(pdf.pages)}
        entries = [(item.title, index[item.destination[0].objgen], item.children) for item in outline.root]
        assert [title for title, _, _ in entries] == _chapters("features")
        for title, page, _ in entries:
            assert pages[page].lstrip().startswith(title)
        first = entries[0][2]
        assert [c.title for c in first] == ["A second level"]  # ## under its chapter, ### under its ##
        assert [c.title for c in first[0].children] == ["A third level"]
        assert "A second level" in pages[index[first[0].destination[0].objgen]]


def test_front_matter_is_numbered_in_roman_and_the_body_from_one_after_blank_versos(tmp_path: Path) -> None:
    path = _build(BOOKS["many"], tmp_path, "many")
    pages, labels = _pages(path), _labels(path)
    assert labels[:3] == ["i", "ii", "iii"] and "The many book" in pages[0] and "Ann Author" in pages[0]
    assert "Contents" in pages[2]
    body = labels.index("1")
    assert labels[body : body + 4] == ["1", "2", "3", "4"] and body % 2 == 0  # page 1 is a recto
    assert pages[body].lstrip().startswith("Chapter 1") and pages[body].rstrip().endswith("1")
    assert pages[body + 1].strip() == ""  # the verso a one-page chapter leaves is blank: no head, no folio
    assert pages[body + 2].lstrip().startswith("Chapter 2")
    assert len(pages) == body + 2 * 1200 - 1


def test_running_heads_name_the_book_on_versos_and_the_chapter_on_rectos(tmp_path: Path) -> None:
    words = " ".join(f"sentence{n} with some ordinary words in it." for n in range(900))
    path = _build(f"# The Long Chapter\n\n{words}\n\n# Next\n\nShort.\n", tmp_path, "long")
    pages, labels = _pages(path), _labels(path)
    opening = labels.index("1")
    assert pages[opening].lstrip().startswith("The Long Chapter")  # no running head on an opening
    assert pages[opening + 1].lstrip().startswith("The long book")  # a verso: the book
    assert pages[opening + 2].lstrip().startswith("The Long Chapter\n")  # a recto: the chapter
    assert pages[opening + 1].rstrip().endswith("2") and pages[opening + 2].rstrip().endswith("3")
    # Margins mirror for binding: the inside one (20 mm, 56.7 pt) is a recto's left and a verso's right.
    recto, verso = _words(path, opening + 2), _words(path, opening + 1)
    assert abs(min(w[0] for w in recto) - 56.69) < 1 and abs(min(w[0] for w in verso) - 42.52) < 1
    assert abs(max(w[2] for w in verso) - (419.53 - 56.69)) < 4  # the verso's text ends at its inside


def _placeholders(pdf: pikepdf.Pdf) -> list[str]:
    """Every link in the book still pointing at a contents placeholder the join should have replaced."""
    from bindery.engine.join import GOTO

    return [
        str(annot.A.URI)
        for page in pdf.pages
        for annot in page.obj.get("/Annots", [])
        if "/A" in annot and str(annot.A.get("/URI", "")).startswith(GOTO)
    ]


def _uris(pdf: pikepdf.Pdf) -> list[str]:
    return [
        str(annot.A.URI)
        for page in pdf.pages
        for annot in page.obj.get("/Annots", [])
        if "/A" in annot and "/URI" in annot.A
    ]


def test_a_manuscript_link_that_looks_like_a_placeholder_is_left_as_the_author_wrote_it(
    tmp_path: Path,
) -> None:
    from bindery.engine.join import GOTO

    manuscript = (
        f"# Links\n\nA [scheme of ours]({GOTO}0), [another]({GOTO}index), and "
        "[the web](https://bindery.invalid/goto/index).\n"
    )
    path = _build(manuscript, tmp_path, "links")
    with pikepdf.open(path) as pdf:
        assert _uris(pdf) == ["https://bindery.invalid/goto/index"]  # only http, https and mailto link out
    text = pdftotext(path)
    assert "A scheme of ours, another, and the web." in " ".join(text.split())


def test_deep_emphasis_and_notes_cited_in_notes_are_set_as_text(tmp_path: Path) -> None:
    deep = "*" * 300 + "deep" + "*" * 300
    chained = "".join(f"[^{n}]: Note {n} cites the next[^{n + 1}].\n\n" for n in range(1, 150))
    path = _build(f"# Deep\n\n{deep}\n\nThe first[^1].\n\n{chained}[^150]: The last.\n", tmp_path, "deep")
    text = " ".join(pdftotext(path).split())
    # every note is set, each cited by the number it is set under
    assert "deep" in text and "Note 1 cites the next2." in text and "Note 149 cites the next150." in text
    assert "150The last." in text


def test_a_figure_with_spaces_beside_it_and_an_asset_without_an_extension_build(tmp_path: Path) -> None:
    from bindery.images import Asset
    from tests.books.illustrated import picture

    png = picture("PNG", 300, 200)
    asset = Asset("images/coast", "0" * 20, "image/png", 300, 200, len(png))  # a name without an extension
    source = Source(
        "abcdef0123456789abcd", "Figures", 1, ("Figures",), 1.8e9,
        assets=(asset,), read_asset=lambda a: iter([png]),
    )  # fmt: skip
    out = io.BytesIO()
    text = "# Figures\n\n![The coast at dusk](images/coast)&nbsp;\n\nAfter the figure.\n"
    report = renderer_for("pdf").render(source, [Text(1, "Figures", text)], out)
    assert report.skipped == []
    (tmp_path / "figures.pdf").write_bytes(out.getvalue())
    from tests.validators import pdfimages

    assert [row["width"] for row in pdfimages(tmp_path / "figures.pdf") if row["type"] == "image"] == ["300"]


def test_when_typst_refuses_pdf_ua_every_piece_is_set_again_without_the_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine.compiler import CompileError, Compiler

    compiled: list[tuple[str, tuple[str, ...]]] = []
    refused: list[bool] = []  # for each piece sent, whether its answer is a refusal
    send, receive = Compiler.send, Compiler.receive

    def sending(self: Compiler, source: Path, output: Path, **kwargs: object) -> None:
        standards = tuple(kwargs["standards"])  # type: ignore[call-overload]
        compiled.append((source.name, standards))
        refused.append(source.name == "contents.typ" and bool(standards))
        send(self, source, output, **kwargs)  # type: ignore[arg-type]

    def refusing(self: Compiler) -> list[str]:
        warnings = receive(self)
        if refused.pop(0):
            raise CompileError("PDF/UA-1 error: missing alt text")
        return warnings

    monkeypatch.setattr(Compiler, "send", sending)
    monkeypatch.setattr(Compiler, "receive", refusing)
    path = _build(BOOKS["many"], tmp_path, "many")
    runs = [standards for name, standards in compiled if name.startswith("run-")]
    count = len({name for name, _ in compiled if name.startswith("run-")})
    assert count > 10 and runs == [("ua-1",)] * count + [()] * count  # each run, then again without it
    # The title page and imprint, sent first, set again too; then the contents again, and the folios, a
    # sheet for each run, set last, for the join; without the claim, as everything since.
    assert compiled.count(("front.typ", ("ua-1",))) == compiled.count(("front.typ", ())) == 1
    last = compiled[compiled.index(("contents.typ", ())) + 1 :]
    assert last == [(f"folios-{n}.typ", ()) for n in range(count)]
    with pikepdf.open(path) as pdf:
        assert "pdfuaid:part" not in pdf.open_metadata()
    assert structure_problems(path) == [] and pdfinfo(path)["Tagged"] == "yes"


def test_when_the_title_page_refuses_pdf_ua_every_run_is_set_once_without_the_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine.compiler import CompileError, Compiler

    compiled: list[tuple[str, tuple[str, ...]]] = []
    send, receive = Compiler.send, Compiler.receive

    def sending(self: Compiler, source: Path, output: Path, **kwargs: object) -> None:
        compiled.append((source.name, tuple(kwargs["standards"])))  # type: ignore[call-overload]
        send(self, source, output, **kwargs)  # type: ignore[arg-type]

    def refusing(self: Compiler) -> list[str]:
        warnings = receive(self)
        if compiled[-1] == ("front.typ", ("ua-1",)):
            raise CompileError("PDF/UA-1 error: missing alt text")
        return warnings

    monkeypatch.setattr(Compiler, "send", sending)
    monkeypatch.setattr(Compiler, "receive", refusing)
    path = _build(BOOKS["many"], tmp_path, "many")
    # The front is sent first and refused before the first run is sent: no run is set twice.
    assert compiled[:2] == [("front.typ", ("ua-1",)), ("front.typ", ())]
    runs = [standards for name, standards in compiled if name.startswith("run-")]
    assert len(runs) > 10 and set(runs) == {()}
    assert {standards for _, standards in compiled[1:]} == {()}
    with pikepdf.open(path) as pdf:
        assert "pdfuaid:part" not in pdf.open_metadata()


def _words(path: Path, page: int) -> list[tuple[float, float, float, float, str]]:
    layout = pdftotext(path, "-bbox", "-f", str(page + 1), "-l", str(page + 1))
    return [
        (float(a), float(b), float(c), float(d), w)
        for a, b, c, d, w in re.findall(
            r'xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>', layout
        )
    ]


def test_text_is_justified_and_hyphenated_in_the_books_language(tmp_path: Path) -> None:
    english = " ".join(["Extraordinarily considerate administrators understand responsibilities."] * 40)
    german = " ".join(["Die Donaudampfschifffahrtsgesellschaft beschäftigt Kapitänsanwärter."] * 40)
    for language, text, sample in (("en", english, "administrators"), ("de", german, "Kapitäns")):
        path = _build(f"# Words\n\n{text}\n", tmp_path, language, language=language)
        page = _labels(path).index("1")
        lines: dict[float, list[tuple[float, float, float, float, str]]] = {}
        for word in _words(path, page):
            lines.setdefault(round(word[1]), []).append(word)
        body = [ws for y, ws in sorted(lines.items()) if len(ws) > 2][1:-1]  # full lines of the paragraph
        assert len(body) > 10
        ends = [max(ws, key=lambda w: w[2]) for ws in body]
        hyphenated = [end[2] for end in ends if end[4].endswith(("-", "\xad"))]
        flush = [end[2] for end in ends if not end[4].endswith(("-", "\xad"))]
        assert hyphenated, [end[4] for end in ends]  # words are broken at line ends
        # Justified: every full line ends at one right edge (a hyphen or a stop hangs a little past it).
        edge = min(flush)
        assert sum(abs(end - edge) < 0.5 for end in flush) > len(flush) / 2, flush
        assert all(0 <= end - edge < 3 for end in flush + hyphenated), (flush, hyphenated)
        assert sample in pdftotext(path).replace("\xad\n", "")


def test_footnotes_sit_at_the_foot_of_the_page_that_cites_them(tmp_path: Path) -> None:
    path = _build(BOOKS["features"], tmp_path, "features")
    page = _labels(path).index("1")
    words = _words(path, page)
    height = 595.276
    cited = next(w for w in words if w[4].startswith("reference"))
    note = next(b for a, b in itertools.pairwise(words) if (a[4], b[4]) == ("first", "note."))
    assert note[1] > cited[1] and note[1] > 0.75 * height
    assert "The first note." in pdftotext(path, "-f", str(page + 1), "-l", str(page + 1))


def test_a_long_table_breaks_across_pages_with_its_header_repeated(tmp_path: Path) -> None:
    rows = "".join(f"| row {n} | value {n * 3} |\n" for n in range(150))
    path = _build(f"# Tables\n\n| Name | Amount |\n|---|--:|\n{rows}", tmp_path, "table")
    pages = _pages(path)
    holding = [p for p in pages if "row " in p]
    assert len(holding) >= 3
    assert all("Name" in p and "Amount" in p for p in holding)  # the header on every page of the table
    assert "row 0" in holding[0] and "row 149" in holding[-1]


def test_the_right_to_left_chapter_is_set_right_to_left_in_reading_order(tmp_path: Path) -> None:
    path = _build(BOOKS["scripts"], tmp_path, "scripts")
    pages, labels = _pages(path), _labels(path)
    arabic = next(n for n, p in enumerate(pages) if p.translate(BIDI_CONTROLS).lstrip().startswith("العربية"))
    assert "نص عربي قصير للتجربة" in pages[arabic].translate(BIDI_CONTROLS)  # logical order, word by word
    greek = next(n for n, p in enumerate(pages) if p.lstrip().startswith("Ελληνικά") and labels[n].isdigit())
    # -bbox gives a right-to-left word in visual order, reversed
    heading_ar = next(w for w in _words(path, arabic) if "العربية" in (w[4], w[4][::-1]))
    heading_el = next(w for w in _words(path, greek) if w[4] == "Ελληνικά")
    width = 419.528
    assert heading_ar[2] > width - 60 and heading_ar[0] > width / 2  # set from the right margin
    assert heading_el[0] < 70  # and a left-to-right chapter from the left


# A5's margins are 15 mm outside and 20 mm inside: a word may reach no nearer the edge than 42.5 pt (a
# little is left for a glyph's overhang).
INSET = 40.0


def _outside(word: Word) -> bool:
    inside = word.x0 >= INSET and word.x1 <= word.width - INSET and word.y0 >= 0 and word.y1 <= word.height
    return not inside


# Runs that offer no line break, each far wider than a line: the 5,000-deep quote (markdown-it
# nests twenty quotes, and the rest is 4,980 `>` of text), a word, a URL, inline code, a line of code,
# Arabic, emoji, the basmala as one character (the widest character the fonts set), a table's cells, a
# heading, the chapter's title, emphasis inside a run (the run goes on across elements), words joined by
# no-break spaces (one run), a run nested as deep as Markdown goes, and chains whose spaces may not break
# (Unicode allows no break before `!`, nor after `“`).
UNBROKEN = (
    "# " + "T" * 400 + "\n\n"
    + ">" * 5000 + "\n\n"
    + "x" * 3000 + "\n\n"
    + "See https://example.org/" + "a-b/c_d" * 200 + " for more.\n\n"
    + "Call `" + "z" * 1500 + "` now.\n\n"
    + "```python\ny = '" + "q" * 1500 + "'\n```\n\n"
    + "عربي" * 400 + "\n\n"
    + "📚" * 300 + "\n\n"
    + "\ufdfd" * 60 + "\n\n"
    + "| a | " + "c" * 500 + " |\n|---|---|\n| " + "d" * 500 + " | e |\n\n"
    + "## " + "h" * 400 + "\n\n"
    + "a*b*" * 400 + "\n\n"
    + "word\u00a0" * 300 + "\n\n"
    + ">" * 30 + " " + "- " * 30 + "k" * 800 + "\n\n"
    + "Spaces that may not break: " + "! " * 400 + "\n\n"
    + "“ " * 300 + "after an opening quote; between elements: " + "*a*!" * 300 + " " + "`a` !" * 300 + "\n"
)  # fmt: skip


def test_a_line_without_a_break_wraps_inside_the_text_block(tmp_path: Path) -> None:
    path = _build(UNBROKEN, tmp_path, "unbroken", title="B" * 400)
    words = placed_words(path)
    assert len(words) > 100
    assert [w for w in words if _outside(w)] == []
    text = pdftotext(path, "-raw")  # as set: pdftotext otherwise drops a hyphen that ends a line
    assert text.count(">") >= 4980
    # every character the manuscript's text holds, as often as it holds it
    assert text_characters(manuscript_text(UNBROKEN)) - text_characters(text) == {}
    with pikepdf.open(path) as pdf, pdf.open_outline() as outline:
        titles = [item.title for item in outline.root[0].children]
    assert titles == ["h" * 400]  # a heading's bookmark keeps its run whole


def test_nesting_leaves_the_text_at_least_half_the_text_block(tmp_path: Path) -> None:
    deep = "deep words " * 60
    manuscript = (
        "# Nesting\n\n" + ">" * 40 + " " + deep + "\n\n" + "123456789. " * 12 + deep + "\n\n"
        "> > > - - - 1. 1. > > > " + deep + "\n"
    )
    path = _build(manuscript, tmp_path, "nesting")
    words = placed_words(path)
    assert [w for w in words if _outside(w)] == []
    lines: dict[tuple[int, float], list[Word]] = {}
    for word in words:
        if word.text == "deep":
            lines.setdefault((word.page, round(word.y0)), []).append(word)
    spans = [max(w.x1 for w in ws) - min(w.x0 for w in ws) for ws in lines.values() if len(ws) > 3]
    assert len(spans) > 6
    block = 419.53 - 42.52 - 56.69
    assert min(spans) >= block / 2 - 15, spans  # a full line, less at most a word's room at its end


def test_text_is_marked_for_typst_to_measure_only_where_a_run_may_not_break_inside_its_measure() -> None:
    from bindery.engine.breaks import ZWSP, Run, fitted
    from bindery.engine.literals import literal

    def fit(text: str, run: Run | None = None) -> str:
        return fitted(text, 320, 10, literal, run=run)  # A5's measure, at the body's size

    prose = "It was (as ever) the “best” of times — and, said she, the worst. " * 20
    assert fit(prose) == "#" + literal(prose)  # it breaks at every word: set as it is
    assert fit("中文" * 300) == "#" + literal("中文" * 300)  # ideographs break between any two
    assert fit("x" * 20) == "#" + literal("x" * 20)  # a word that fits
    assert fit("x" * 40) == f"#long({literal('x' * 40)}, 320.00pt)"  # one that may not
    # No break before `!`, spaces or not: the chain, the word before included, is one run.
    bangs = "Ah" + " !" * 200
    assert fit(bangs + " ") == f"#long({literal(bangs)}, 320.00pt)#{literal(' ')}"
    # A run that goes on from the element before and may grow too wide is given a break where they meet;
    # after a space, before a letter, it has one.
    assert fit("bcdefgh", Run(width=300.0, last="a")) == "#" + literal(ZWSP + "bcdefgh")
    assert fit(" bcdefgh", Run(width=300.0, last="a")) == "#" + literal(" bcdefgh")


HOSTILE = (
    "# Hostile\n\n"
    '#read("/etc/passwd") #import "@preview/x:1.0.0": * #include "/etc/hosts"\n\n'
    "#let f(n) = if n > 0 { f(n - 1) } else { 0 }\n#f(100000) #while true {} $ x^2 $ @ref <label>\n\n"
    "]]]] [[[[ ` \\ \\\\ \" #{ panic() }\n\n" + "- " * 100_000 + "deep\n\nAfter the deep list.\n\n"
    + ">" * 100_000 + " quoted\n\nAfter the deep quote.\n\n# A long line\n\n"
    + " ".join(f"word{n}" for n in range(150_000)) + "\n"
)  # fmt: skip


@pytest.mark.slow(8)
def test_a_hostile_manuscript_is_set_as_the_text_it_is(tmp_path: Path) -> None:
    assert max(len(line) for line in HOSTILE.splitlines()) > 1_000_000
    path = _build(HOSTILE, tmp_path, "hostile", typography="off")  # (its literals, as typed)
    text = " ".join(pdftotext(path).replace("\xad\n", "").split())
    for sample in (
        '#read("/etc/passwd")',
        '#import "@preview/x:1.0.0"',
        "#let f(n) = if n > 0 { f(n - 1) } else { 0 }",
        "#while true {}",
        "$ x^2 $ @ref <label>",  # (Typst math; to pandoc, with its spaces, no formula)
        "#{ panic() }",
        "After the deep list.",  # what follows a list nested past every limit is still there
        "After the deep quote.",
        "quoted",
        "word0 word1",
        "word149999",  # the 1 MB line, all of it
    ):
        assert sample in text, sample
    assert "root:x:0:0" not in text  # nothing was read from the machine


def _appeared(before: set[int]) -> set[int]:
    """The typesetters started since `before` was taken, given up to 5 s to show (under a loaded test
    worker, one started a moment ago was once not yet listed)."""
    deadline = time.monotonic() + 5
    while not (new := set(_typesetters()) - before) and time.monotonic() < deadline:
        time.sleep(0.01)
    return new


def _typesetters() -> list[int]:
    """This process's typesetter children (not another test worker's, which may be compiling now)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
                parent = re.search(r"^PPid:\s+(\d+)", (entry / "status").read_text(), re.M)
            except OSError:
                continue
            if b"bindery/engine/compiler.py" in command and parent and int(parent[1]) == os.getpid():
                found.append(int(entry.name))
    return found


def test_a_compile_over_the_time_limit_is_killed_and_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _typesetters()
    monkeypatch.setattr(RENDERER, "time_limit", 0.05)  # shorter than any compile of the 1,200 chapters
    with pytest.raises(TimeLimit):
        _build(BOOKS["many"], tmp_path, "slow")
    assert _typesetters() == before  # the child was killed and reaped, not left running


def test_a_typesetter_past_its_memory_bound_sets_small_pieces_is_replaced_for_a_large_one_and_all_are_reaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine import compiler
    from bindery.engine.typefaces import font_dirs

    monkeypatch.setattr(compiler, "RESTART_BYTES", 0)  # every child is past it after its first answer
    for name in ("a", "b"):
        (tmp_path / f"{name}.typ").write_text(f"Piece {name}.")
    # A run's size: past SMALL_SOURCE_BYTES (a comment, which sets nothing, makes it up).
    (tmp_path / "c.typ").write_text("Piece c.\n// " + "x" * compiler.SMALL_SOURCE_BYTES + "\n")
    before = set(_typesetters())
    with compiler.Compiler(tmp_path, font_dirs()) as typesetter:
        typesetter.start()
        (first,) = _appeared(before)
        for name in ("a", "b"):  # the second, small, is set by the child past its bound
            typesetter.compile(tmp_path / f"{name}.typ", tmp_path / f"{name}.pdf", standards=[], seconds=60)
            assert set(_typesetters()) - before == {first}
        typesetter.compile(tmp_path / "c.typ", tmp_path / "c.pdf", standards=[], seconds=60)
        (second,) = _appeared(before | {first})  # a fresh child set it; the first was killed
        assert typesetter.peak_rss > 0
    assert set(_typesetters()) == before
    for pid in (first, second):
        with pytest.raises(ChildProcessError):  # reaped by close: no zombie is left behind
            os.waitpid(pid, os.WNOHANG)
    assert all((tmp_path / f"{name}.pdf").read_bytes().startswith(b"%PDF") for name in "abc")


def test_each_run_is_parsed_while_the_one_before_is_set_and_the_first_run_is_a_quarter_of_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine.compiler import Compiler
    from bindery.engine.pdf import FIRST_RUN_SHARE, RUN_CHAPTERS
    from bindery.engine.pdf_source import RunParser

    events: list[str] = []
    parsed, send, receive = RunParser.parsed, Compiler.send, Compiler.receive

    def parsing(self: RunParser, texts: list[Text]) -> object:
        events.append(f"parse {len(texts)}")
        return parsed(self, texts)

    def sending(self: Compiler, source: Path, output: Path, **kwargs: object) -> None:
        events.append(f"send {source.stem}")
        send(self, source, output, **kwargs)  # type: ignore[arg-type]

    def receiving(self: Compiler) -> list[str]:
        events.append("receive")
        return receive(self)

    monkeypatch.setattr(RunParser, "parsed", parsing)
    monkeypatch.setattr(Compiler, "send", sending)
    monkeypatch.setattr(Compiler, "receive", receiving)
    _build(BOOKS["many"], tmp_path, "many")  # 1,200 short chapters: runs of RUN_CHAPTERS
    runs = [e for e in events if e.startswith("parse")]
    sizes = [int(run.split()[1]) for run in runs]
    # The first run ends at a quarter of the chapters (or at an anchor past three quarters of that).
    assert len(sizes) > 10 and sizes[0] <= RUN_CHAPTERS // FIRST_RUN_SHARE
    assert all(RUN_CHAPTERS * 3 // 4 <= size <= RUN_CHAPTERS for size in sizes[1:-1]), sizes
    # The title page and imprint are sent first, set while the first run is parsed. Each run after the first
    # is parsed after the one before was sent and before its answer is awaited.
    assert events[0] == "send front"
    body = events[1 : events.index("send contents")]
    assert body[:3] == [runs[0], "receive", "send run-1"]
    for n in range(2, len(runs) + 1):
        at = body.index(f"send run-{n}")
        assert body[at - 3 : at] == [f"send run-{n - 1}", runs[n - 1], "receive"], body[at - 3 : at + 1]


def test_every_compile_is_given_only_the_builds_time_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine.compiler import Compiler

    given: list[float] = []
    original = Compiler.send  # every compile's request, the runs' sent ahead of their answer included

    def spy(self: Compiler, *args: object, **kwargs: object) -> None:
        given.append(float(kwargs["seconds"]))  # type: ignore[arg-type]
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Compiler, "send", spy)
    monkeypatch.setattr(RENDERER, "time_limit", 100.0)
    _build(BOOKS["many"], tmp_path, "many")
    # At least twelve runs (of a hundred chapters at most), then the front matter and the folios.
    assert len(given) >= 1200 // 100 + 2
    assert all(0 < later < earlier <= 100.0 for earlier, later in itertools.pairwise(given))


@pytest.mark.skipif(not os.path.exists("/etc/passwd"), reason="needs a file to not read")
def test_the_typesetter_reads_no_file_outside_its_build(tmp_path: Path) -> None:
    """Our own code could still be wrong: a chapter whose title names a file is set as that name."""
    path = _build('# /etc/passwd\n\n#image("/etc/passwd")\n', tmp_path, "files")
    assert "/etc/passwd" in pdftotext(path) and "root:" not in pdftotext(path)


def test_a_layer_without_the_fonts_is_refused_rather_than_set_without_arabic_or_cjk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine import typefaces

    # A wheel that lacks a file the design names, and one not installed at all.
    fonts = (
        *typefaces.FONT_PACKAGES,
        ("fontpkg_amiri", "files", ("Amiri-Regular.ttf", "Amiri-Gone.ttf")),
        ("bindery_no_such_fonts", "", ("Any.ttf",)),
    )
    monkeypatch.setattr(typefaces, "FONT_PACKAGES", fonts)
    with pytest.raises(FileNotFoundError) as refused:
        _build(BOOKS["scripts"], tmp_path, "scripts")
    assert str(refused.value).startswith(
        "the PDF's fonts are missing: fontpkg_amiri/files/Amiri-Gone.ttf, the package bindery_no_such_fonts "
    )


def test_the_fonts_are_found_where_pip_installed_their_wheels_and_a_japanese_book_is_set_in_its_face(
    tmp_path: Path,
) -> None:
    from bindery.engine.typefaces import FONT_PACKAGES, font_dirs

    dirs = font_dirs()
    assert len(dirs) == len(FONT_PACKAGES)
    for found, (package, folder, _) in zip(dirs, FONT_PACKAGES, strict=True):
        assert found.parts[-2:] == (package, folder) if folder else found.name == package
    assert all("site-packages" in d.parts for d in dirs)  # from the wheels, not from this tree
    path = _build(BOOKS["scripts"], tmp_path, "scripts", language="ja")
    names = {font["name"].split("+")[-1] for font in pdffonts(path)}
    assert any(n.startswith("NotoSansCJKjp-") for n in names), names
    assert not any(n.startswith("NotoSansCJKsc-") for n in names), names
    for family in ("Amiri-", "NotoEmoji-"):
        assert any(n.startswith(family) for n in names), (family, names)


def test_the_widest_characters_of_each_class_fit_the_bounds_breaks_counts_them_at() -> None:
    """`python -m tests.font_widths` found these the widest of their classes, over every code point; here
    each is set again in the pinned fonts, so a font that changed under the pins fails fast."""
    from bindery.engine import breaks
    from tests.font_widths import STYLES, _chunk

    def em(cp: int) -> float:
        return max(buckets[0][0] for buckets in _chunk((cp, cp + 1)))

    assert em(ord("W")) <= breaks._ASCII_EM
    assert em(0x052A) <= breaks._LOW_EM  # Cyrillic Supplement, bold
    assert em(0x0BCC) <= breaks._ANY_EM and em(0x7F) <= breaks._ANY_EM  # Tamil, on a dotted circle; DEL
    assert 3 * breaks._ANY_EM < em(0xFDFD) <= breaks._BASMALA_EM  # the basmala
    mono = [n for n, (family, _, _) in enumerate(STYLES) if family == "mono"]
    assert max(_chunk((ord("W"), ord("W") + 1))[n][0][0] for n in mono) <= breaks._MONO_EM


@pytest.mark.parametrize("label", ["\xad", "a\xadb", "*emphasised\xad*"])
def test_a_link_holding_a_soft_hyphen_builds_and_keeps_its_words(label: str, tmp_path: Path) -> None:
    # Typst 0.15 failed the chapter ("expected link ancestor in logical tree") when the soft hyphen ended
    # the paragraph's text, inside its link; found by test_well_formed.
    path = _build(f"# One\n\nSee [{label}](https://example.org/x)\n", tmp_path)
    words = pdftotext(path)
    assert "See" in words
    assert label.replace("\xad", "").strip("*") in words.replace("\xad", "")


def test_the_outline_reaches_every_level_and_the_contents_hold_no_invisible_character(tmp_path: Path) -> None:
    # The outline stopped at ### (pandoc's guide's #### headings were tagged but not in it), and each line
    # of the contents ended its title with a U+200E that a reader's copy and paste picked up.
    levels = "".join(f"{'#' * n} Level {n}\n\ntext\n\n" for n in range(2, 7))
    manuscript = f"# One\n\n{levels}## Again two\n\n#### Four under two\n\n# שלום\n\nטקסט\n"
    path = _build(manuscript, tmp_path, "deep", toc_depth=3)
    with pikepdf.open(path) as pdf, pdf.open_outline() as outline:
        one = outline.root[0]
        chain, item = [], one
        while item.children:
            item = item.children[0]
            chain.append(item.title)
        assert chain == [f"Level {n}" for n in range(2, 7)]
        assert [c.title for c in one.children] == ["Level 2", "Again two"]
        assert [c.title for c in one.children[1].children] == ["Four under two"]
    pages, labels = _pages(path), _labels(path)
    contents = "".join(p for p, label in zip(pages, labels, strict=True) if re.fullmatch(r"[ivxl]+", label))
    assert "Level 3" in contents and "Level 4" not in contents  # the contents keep toc_depth
    # (pdftotext marks an RTL run with U+202A-U+202C of its own; no mark is the book's.)
    assert "\u200e" not in contents and "\u200f" not in contents
    # The RTL title before its dots and number.
    assert re.search(r"שלום\s*(?:\. ?){3,}\s*3", contents.translate(BIDI_CONTROLS))
