"""The docx, as the people who work on a book read it: every test book (and the illustrated, the Arabic
and the hostile one) is built once, then one LibreOffice converts them all to PDF (every chapter's
title in each PDF's text), pandoc reads each back (its AST of the document against its AST of the
manuscript: chapters, headings, notes, images, tables, lists), and python-docx opens each with the named
styles where they belong. The illustrated and Arabic books through the API (complete: false, missing
images): tests/unit/test_illustrated.py; a batch with a docx target: tests/unit/test_batches.py."""

from __future__ import annotations

import io
import json
import re
import unicodedata
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from bindery.engine import FORMATS, Report, Source, Text, renderer_for
from bindery.images import Asset
from bindery.manuscript import cut_text
from bindery.metadata import Metadata, merged
from tests.books import BOOKS, SAMPLES
from tests.books.illustrated import Illustrated, arabic, lighthouse
from tests.docx_checks import MANUSCRIPT_DIALECT, document_text, libreoffice_to_pdf, pandoc_ast, shape
from tests.unit.conftest import Stack
from tests.validators import manuscript_text, pdftotext, text_characters

HOSTILE = (
    "# Hostile <w:p>\n\n"
    '</w:t></w:r></w:p><w:p><w:r><w:t>injected</w:t></w:r></w:p> <?xml version="1.0"?> '
    "<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]> &e; &amp; &#x41; &lt;w:br/&gt;\n\n"
    "A ]]> and a \"quote\" and a 'tick'.\n\n"
    + "- " * 50_000 + "deep\n\nAfter the deep list.\n\n"
    + ">" * 50_000 + " quoted\n\nAfter the deep quote.\n\n"
    "A note[^x].\n\n[^x]: <w:footnote w:id=\"5\"/> in a note.\n\n"
    "[a link](javascript:alert(1)) and [another](https://example.org/?a=1&b=<2>)\n"
)  # fmt: skip


def _assets(spec: Illustrated) -> tuple[tuple[Asset, ...], dict[str, bytes]]:
    from PIL import Image

    assets, data = [], {}
    for n, (name, (content_type, body)) in enumerate(spec.assets.items()):
        width, height = Image.open(io.BytesIO(body)).size
        assets.append(Asset(name, f"obj{n:04d}", content_type, width, height, len(body)))
        data[name] = body
    return tuple(assets), data


def build(manuscript: str, title: str, path: Path, spec: Illustrated | None = None, **options: Any) -> Report:
    sections = cut_text(manuscript)
    metadata, assets, data = Metadata(), (), {}  # type: ignore[var-annotated]
    if spec is not None:
        metadata = merged(Metadata(), spec.metadata)
        if "images/cover.jpg" in spec.assets:
            metadata = replace(metadata, cover="images/cover.jpg")
        assets, data = _assets(spec)
    source = Source(
        "abcdef0123456789abcd", title, 3, tuple(s.title for s, _ in sections), 1.8e9,
        metadata=metadata, assets=assets, options=options, read_asset=lambda a: iter([data[a.name]]),
    )  # fmt: skip
    out = io.BytesIO()
    chapters = [Text(n, s.title, text) for n, (s, text) in enumerate(sections, start=1)]
    report = renderer_for("docx").render(source, chapters, out)
    path.write_bytes(out.getvalue())
    return report


BUILDABLE = [name for name in BOOKS if name != "empty"]
ALL = [*BUILDABLE, "illustrated", "arabic", "hostile"]


def _spec(book: str) -> tuple[str, str, Illustrated | None]:
    if book == "illustrated":
        spec = lighthouse()
        return spec.manuscript, spec.title, spec
    if book == "arabic":
        spec = arabic()
        return spec.manuscript, spec.title, spec
    if book == "hostile":
        return HOSTILE, "Hostile", None
    return BOOKS[book], f"The {book} book", None


Built = Callable[[str], tuple[Path, Report]]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """A book's docx and its report, built the first time a test of this process asks for it (the tests
    may run in different workers: each builds only the books it reads)."""
    folder = tmp_path_factory.mktemp("docx")
    made: dict[str, tuple[Path, Report]] = {}

    def get(book: str) -> tuple[Path, Report]:
        if book not in made:
            manuscript, title, spec = _spec(book)
            path = folder / f"{book}.docx"
            # Read back beside the manuscript as typed (tests/unit/test_typography.py sets its quotes).
            made[book] = path, build(manuscript, title, path, spec, typography="off")
        return made[book]

    return get


@pytest.mark.slow(20)
def test_libreoffice_converts_every_book_with_every_chapter_title_in_its_text(
    built: Built, tmp_path: Path
) -> None:
    """One LibreOffice, started once, converts every book (a start costs seconds; CI's time is short)."""
    run = libreoffice_to_pdf([built(book)[0] for book in ALL], tmp_path)
    assert run.returncode == 0 and "Error" not in run.stderr, run.stdout + run.stderr
    missing = []
    for book in ALL:
        manuscript, _, _ = _spec(book)
        pdf = tmp_path / f"{book}.pdf"
        assert pdf.exists(), (book, sorted(p.name for p in tmp_path.iterdir()))
        text = _folded(pdftotext(pdf))
        titles = [section.title for section, _ in cut_text(manuscript)]
        missing += [(book, t) for t in [*titles, *SAMPLES.get(book, [])] if _folded(t) not in text]
    assert missing == []


def _folded(text: str) -> str:
    """Text as pdftotext gives it back, and as it is compared: the bidi controls it adds left out, spaces
    as one, compatibility forms folded, and a lam-alef ligature's two letters in one order (pdftotext
    gives them in visual order)."""
    text = unicodedata.normalize("NFKC", re.sub("[\u200e\u200f\u202a-\u202e]", "", text))
    return re.sub("\u0644([\u0622\u0623\u0625\u0627])", "\\1\u0644", " ".join(text.split()))


def _expected(book: str) -> Any:
    """pandoc's reading of the manuscript, as the docx must show it: an image that is one of the book's
    assets is a picture; any other is text (a missing one) or a link (one elsewhere)."""
    manuscript, _, spec = _spec(book)
    want = shape(pandoc_ast(None, MANUSCRIPT_DIALECT, manuscript))
    assets = spec.assets if spec is not None else {}
    want.images = [(alt, src) for alt, src in want.images if src in assets]
    return want


@pytest.mark.slow(8)
def test_pandoc_reads_back_every_chapter_heading_note_image_table_and_list(built: Built) -> None:
    for book in ALL:
        if book == "hostile":  # (its literals: test_a_hostile_manuscript_stays_text)
            continue
        got = shape(pandoc_ast(built(book)[0], "docx"))
        want = _expected(book)
        assert (got.headings, got.notes, got.tables, got.list_depth) == (
            want.headings, want.notes, want.tables, want.list_depth,
        ), book  # fmt: skip
        # The pictures, each with its alt text (the cover first, described as the cover).
        _, title, spec = _spec(book)
        cover = [f"The cover of {title}"] if spec is not None and "images/cover.jpg" in spec.assets else []
        assert [alt for alt, _ in got.images] == cover + [alt for alt, _ in want.images], book


@pytest.mark.slow(4)
def test_python_docx_opens_every_book_with_the_named_styles_where_they_belong(built: Built) -> None:
    import docx

    for book in ALL:
        path = built(book)[0]
        document = docx.Document(str(path))
        styled = [(p.style.name if p.style is not None else "", p.text) for p in document.paragraphs]
        manuscript, title, _ = _spec(book)
        assert ("Title", title) in styled, book
        chapters = [s.title for s, _ in cut_text(manuscript)]
        assert [t for s, t in styled if s == "Heading 1"] == chapters, book
        by_style: dict[str, list[str]] = {}
        for style, text in styled:
            by_style.setdefault(style, []).append(text)
        # Every paragraph names a style: none is left Normal.
        assert "Normal" not in by_style, book
        with zipfile.ZipFile(path) as package:
            notes = package.read("word/footnotes.xml").decode()
        for note_text in re.findall(r"<w:footnote w:id=\"[1-9]\d*\">(.*?)</w:footnote>", notes):
            assert '<w:pStyle w:val="FootnoteText"/>' in note_text, book
        if book == "features":
            _features_styles(document, by_style, title)
        if book == "illustrated":
            assert by_style["Cover"] == [""] and styled[0][0] == "Cover"  # the cover is the first page
            assert by_style["Caption"] == ["The harbour"]
            props = document.core_properties
            assert props.author == "Ada Lovelace; Grace Hopper" and props.language == "en-GB"
            assert props.identifier == "urn:isbn:9780306406157"
            assert props.subject == "Lighthouses; Maritime history"
            assert props.comments == "A short illustrated history of a lighthouse and its keeper."


def _features_styles(document: Any, by_style: dict[str, list[str]], title: str) -> None:
    # After a heading the first paragraph, then body text; each kind of block in its own style.
    assert by_style["First Paragraph"][0].startswith("Text with emphasis")
    assert any(t.startswith("An unbroken word wider") for t in by_style["Body Text"])
    assert by_style["Heading 2"] == ["A second level", "Pandoc's dialect"]
    assert by_style["Heading 3"] == ["A third level"]
    assert by_style["Block Text"] == ["A block quote, with emphasis, over two lines."]
    assert by_style["Source Code"][0].startswith("def hello(name: str) -> str:")
    items = [
        "a list item",
        "another, with a nested list:",
        "first",
        "second",
        "☐ an open task",
        "☒ a done one",
    ]
    assert by_style["List Paragraph"] == items
    assert by_style["Definition Term"] == ["Term"] and by_style["Definition"] == [
        "Its definition, with emphasis."
    ]
    assert by_style["Warning"] == ["An aside: the light is not lit in daylight."]
    (table,) = document.tables
    assert table.style is not None and table.style.name == "Table"
    assert [c.text for c in table.rows[0].cells] == ["column", "other", "number"]
    assert table.rows[0]._tr.trPr.xml.count("tblHeader") == 1  # the header row repeats on each page
    assert document.styles["Heading 1"].paragraph_format.page_break_before is True
    assert document.core_properties.title == title and document.core_properties.language == "en"


def _document(path: Path, part: str = "word/document.xml") -> str:
    with zipfile.ZipFile(path) as package:
        return package.read(part).decode()


def test_the_pictures_are_the_assets_at_their_size_shrunk_to_the_text_width_with_their_alt_text(
    built: Built,
) -> None:
    from PIL import Image

    path, report = built("illustrated")
    spec = lighthouse()
    # The image the book never got is named, with its chapter; the export is then incomplete.
    assert report.notes.missing == [
        {"chapter": 2, "chapter_title": "The Keeper", "name": "images/lost-survey.png"}
    ]
    assert report.notes.warnings == [{"code": "empty_alt", "chapter": 1, "name": "images/map.gif"}]
    with zipfile.ZipFile(path) as package:
        media = {n: package.read(n) for n in package.namelist() if n.startswith("word/media/")}
    shown = {name: body for name, (_, body) in spec.assets.items()}
    webp = shown.pop("images/harbour.webp")
    assert sorted(b for b in media.values() if b in shown.values()) == sorted(shown.values())
    (as_png,) = [b for b in media.values() if b not in shown.values()]  # Word reads no WebP
    assert Image.open(io.BytesIO(as_png)).tobytes() == Image.open(io.BytesIO(webp)).convert("RGB").tobytes()
    document = _document(path)
    extents = [(int(cx), int(cy)) for cx, cy in re.findall(r'<wp:extent cx="(\d+)" cy="(\d+)"/>', document)]
    descriptions = re.findall(r'<wp:docPr id="\d+" name="Picture \d+" descr="([^"]*)"/>', document)
    assert descriptions == [
        "The cover of The Lighthouse", "A rocky coast under a grey sky", "",
        "Fishing boats in the harbour at dawn", "The keeper in his oilskins",
        "A survey of the headland, in fine detail",
    ]  # fmt: skip
    # At its size (96 pixels an inch) when it fits: the map is 320 x 240 px, the keeper 300 x 450; the
    # coast (640 px) and the survey (1600 px) are shrunk to the text width, their aspect kept.
    assert extents[2] == (320 * 9525, 240 * 9525) and extents[4] == (300 * 9525, 450 * 9525)
    width = (11906 - 2 * 1418) * 635
    assert extents[1][0] == width and abs(extents[1][1] - width * 400 / 640) <= 1
    assert extents[5][0] == width and abs(extents[5][1] - width * 1200 / 1600) <= 1
    assert all(cx <= width for cx, _ in extents)
    assert "[The lost survey of 1888]" in document_text(path)


def test_languages_and_directions(built: Built) -> None:
    arabic_book, scripts = built("arabic")[0], built("scripts")[0]
    styles = _document(arabic_book, "word/styles.xml")
    assert '<w:lang w:val="ar" w:bidi="ar"/>' in styles and "<w:pPrDefault><w:pPr><w:bidi/>" in styles
    assert '<w:sectPr><w:pgSz w:w="11906" w:h="16838"/>' in _document(arabic_book)
    assert _document(arabic_book).count("<w:bidi/></w:sectPr>") == 1
    # A book in English with chapters in other scripts: each chapter tagged with its script's language, its
    # Arabic and Hebrew paragraphs right to left, its CJK characters kept.
    document = _document(scripts)
    chapters = document.split('<w:pStyle w:val="Heading1"/>')[1:]
    langs = [sorted(set(re.findall(r"<w:lang [^>]*/>", chapter))) for chapter in chapters]
    assert langs == [
        ['<w:lang w:val="el"/>'], ['<w:lang w:val="ru"/>'], ['<w:lang w:eastAsia="ja"/>'],
        ['<w:lang w:bidi="ar"/>'], ['<w:lang w:bidi="he"/>'], [],
    ]  # fmt: skip
    assert [chapter.count("<w:bidi/>") > 0 for chapter in chapters] == [
        False,
        False,
        False,
        True,
        True,
        False,
    ]
    assert "敏捷的棕色狐狸跳过了懒狗。いろはにほへと" in document_text(scripts)
    assert '<w:lang w:val="en"/>' in _document(scripts, "word/styles.xml")


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_the_contents_field_reaches_toc_depth(depth: int, tmp_path: Path) -> None:
    build(BOOKS["features"], "Depth", tmp_path / "d.docx", toc_depth=depth)
    document = _document(tmp_path / "d.docx")
    assert document.count("TOC \\o") == 1 and f'TOC \\o "1-{depth}" \\h \\z \\u' in document
    assert FORMATS["docx"].options["toc_depth"].allowed == (1, 2, 3)
    assert '<w:updateFields w:val="true"/>' in _document(tmp_path / "d.docx", "word/settings.xml")


def test_a_hostile_manuscript_stays_text(built: Built) -> None:
    hostile, report = built("hostile")
    assert report.skipped == []
    text = document_text(hostile)
    for literal in (
        "Hostile <w:p>",
        '</w:t></w:r></w:p><w:p><w:r><w:t>injected</w:t></w:r></w:p> <?xml version="1.0"?>',
        # (Markdown reads &amp; &#x41; &lt; and &gt; as the characters they name, and &e; as text.)
        '<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]> &e; & A <w:br/>',
        "A ]]> and a \"quote\" and a 'tick'.",
        "After the deep list.", "After the deep quote.", "quoted",
        '<w:footnote w:id="5"/> in a note.', "[a link](javascript:alert(1))",
    ):  # fmt: skip
        assert literal in text, literal
    document = _document(hostile)
    # Nothing of it became markup: the only paragraphs and notes are the writer's own.
    assert "injected</w:t>" not in document and "&lt;w:t&gt;injected&lt;/w:t&gt;" in document
    for part in ("word/document.xml", "word/footnotes.xml", "word/_rels/document.xml.rels"):
        ElementTree.fromstring(_document(hostile, part))  # well-formed, whatever it said
    notes = _document(hostile, "word/footnotes.xml")
    assert re.findall(r"<w:footnote [^>]*>", notes) == [  # the two separators, and the manuscript's one note
        '<w:footnote w:type="separator" w:id="-1">',
        '<w:footnote w:type="continuationSeparator" w:id="0">',
        '<w:footnote w:id="1">',
    ]
    assert "javascript:" not in _document(hostile, "word/_rels/document.xml.rels")
    assert 'Target="https://example.org/?a=1&amp;b=%3C2%3E"' in _document(
        hostile, "word/_rels/document.xml.rels"
    )
    # Word's nine list levels hold the deepest list; markdown's 20 are where nesting stops.
    assert max(int(v) for v in re.findall(r'<w:ilvl w:val="(\d+)"/>', document)) == 8


def test_a_revision_kept_before_characters_were_checked_still_makes_well_formed_parts(tmp_path: Path) -> None:
    """A manuscript, title or metadata holding a character XML 1.0 forbids is refused at the input
    (bindery.characters, tests/unit/test_characters.py); a revision kept before that was may hold them, and
    the writer still replaces each with U+FFFD (engine.ooxml.text)."""
    title = "Controls \x01\x0b\uffff"
    text = f"# {title}\n\nControls: \x01\x02\x0b\x0c\x1f and \ufffe\uffff end[^n].\n\n[^n]: \x1b\ufffe\n"
    source = Source(
        "abcdef0123456789abcd", title, 3, (title,), 1.8e9, metadata=Metadata(authors=("A\x0b\uffff",))
    )
    out = io.BytesIO()
    assert renderer_for("docx").render(source, [Text(1, title, text)], out).skipped == []
    path = tmp_path / "kept.docx"
    path.write_bytes(out.getvalue())
    for part in ("word/document.xml", "word/footnotes.xml", "docProps/core.xml"):
        ElementTree.fromstring(_document(path, part))  # well-formed
    assert "Controls: \ufffd\ufffd\ufffd\ufffd\ufffd and \ufffd\ufffd end" in document_text(path)
    assert "A\ufffd\ufffd" in _document(path, "docProps/core.xml")


@pytest.mark.parametrize("book", ["features", "scripts"])
def test_every_character_of_the_manuscript_is_in_the_document(book: str, built: Built) -> None:
    expected = text_characters(manuscript_text(BOOKS[book]))
    assert expected - text_characters(document_text(built(book)[0])) == {}


def test_a_chapter_that_cannot_be_rendered_is_named_and_leaves_no_half_of_its_xml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine import wordml

    chapter = wordml.Writer.chapter

    def half_then_fail(self: wordml.Writer, tokens: list[Any]) -> None:
        chapter(self, tokens)  # the whole chapter written, its note and its list numbered...
        if any(t.content == "Boom" for t in tokens):
            self.out.body.append("<w:p><w:r><w:t>half")
            raise ValueError("the writer fell over")  # ...and then lost

    monkeypatch.setattr(wordml.Writer, "chapter", half_then_fail)
    manuscript = (
        "# One\n\n1. a[^n]\n\n[^n]: note one\n\n# Boom\n\n3. b[^m]\n\n[^m]: lost\n\n"
        "# Three\n\nc[^k]\n\n[^k]: three\n"
    )
    report = build(manuscript, "Broken", tmp_path / "b.docx")
    assert report.skipped == [{"ordinal": 2, "title": "Boom", "reason": "ValueError: the writer fell over"}]
    document, notes = _document(tmp_path / "b.docx"), _document(tmp_path / "b.docx", "word/footnotes.xml")
    for part in (document, notes, _document(tmp_path / "b.docx", "word/numbering.xml")):
        ElementTree.fromstring(part)
    assert "half" not in document and "This chapter could not be rendered." in document_text(
        tmp_path / "b.docx"
    )
    # The notes of the chapters on either side are numbered as if the lost one had none.
    assert re.findall(r'<w:footnoteReference w:id="(\d+)"/>', document) == ["1", "2"]
    assert "lost" not in notes and '<w:footnote w:id="2">' in notes and "three" in notes
    assert '<w:startOverride w:val="3"/>' not in _document(tmp_path / "b.docx", "word/numbering.xml")


def test_a_book_too_large_for_a_docx_fails_early_and_never_reaches_the_engine(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bindery.engine import docx

    assert docx.RENDERER.max_manuscript_bytes == 100 * 1024 * 1024
    monkeypatch.setattr(docx.RENDERER, "max_manuscript_bytes", 10)
    monkeypatch.setattr(docx.RENDERER, "render", lambda *a: pytest.fail("the engine was called"))
    book = stack.create_book("# Long enough\n\nto be over ten bytes\n")
    export_id = stack.submit(book, "docx").body["id"]
    assert stack.services.builds.build(book, export_id) == "failed:too_large_for_format"


NOTES = (
    "# Notes\n\nOuter note[^outer].\n\n[^outer]: outer refers to inner[^inner]\n[^inner]: inner note text\n\n"
    "[^self]: self ref [^self]\n\nSelf[^self].\n\nAgain[^self] and last[^last].\n\n[^last]: last note text\n"
)


@pytest.mark.slow(8)
def test_a_note_cited_only_from_a_note_or_before_its_definition_keeps_its_reference_and_text(
    tmp_path: Path,
) -> None:
    """Word nests no notes: a note cited only from inside another is referenced in the body right after
    that one's, and numbered so; a note whose definition (citing itself) comes before its first citation
    is referenced there. pandoc and LibreOffice read every note's text, each once."""
    path = tmp_path / "notes.docx"
    build(NOTES, "Notes", path)
    document = _document(path)
    assert re.findall(r'<w:footnoteReference w:id="(\d+)"/>', document) == ["1", "2", "3", "4"]
    assert "Outer note" in document.split('w:id="1"/>')[0] and "Self" in document.split('w:id="3"/>')[0]
    notes = _document(path, "word/footnotes.xml")
    outer = re.search(r'<w:footnote w:id="1">(.*?)</w:footnote>', notes)
    assert outer and "outer refers to inner" in outer.group(1) and "<w:t>2</w:t>" in outer.group(1)
    got = shape(pandoc_ast(path, "docx")).notes
    assert got == ["outer refers to inner2", "inner note text", "self ref 3", "last note text"]
    run = libreoffice_to_pdf([path], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    text = _folded(pdftotext(tmp_path / "notes.pdf"))
    for note in ("outer refers to inner", "inner note text", "self ref", "last note text"):
        assert note in text, note


def test_lists_and_code_inside_a_quote_are_set_in_as_the_quote(tmp_path: Path) -> None:
    manuscript = (
        "# Quoted\n\n> quote\n>\n> - list in quote\n>   - nested in quote\n>\n> ```\n> code in quote\n> ```\n"
        ">\n> > deeper quote\n\n- a list outside\n\n```\ncode outside\n```\n\n" + ">" * 30 + " very deep\n"
    )
    build(manuscript, "Quoted", tmp_path / "q.docx")
    paragraphs = re.findall(r"<w:p><w:pPr>(.*?)</w:pPr>(.*?)</w:p>", _document(tmp_path / "q.docx"))

    def props(text: str) -> str:
        (found,) = [p for p, runs in paragraphs if re.search(f"[>;]{text}</w:t>", runs)]
        return found

    assert '<w:pStyle w:val="BlockText"/>' in props("quote") and "w:ind" not in props("quote")
    # The quote's 567 twips, then the list's own 720 a level; the marker hangs as outside a quote.
    assert '<w:ind w:left="1287" w:right="567" w:hanging="360"/>' in props("list in quote")
    assert '<w:ind w:left="2007" w:right="567" w:hanging="360"/>' in props("nested in quote")
    assert props("code in quote") == '<w:pStyle w:val="SourceCode"/><w:ind w:left="567" w:right="567"/>'
    assert '<w:ind w:left="1134" w:right="567"/>' in props("deeper quote")
    assert "w:ind" not in props("a list outside") and "w:ind" not in props("code outside")
    # markdown-it stops nesting at 20 quotes: their indentation stops at two thirds of the text block.
    assert '<w:ind w:left="6046" w:right="567"/>' in props(" very deep")


def test_a_linked_picture_is_a_link_and_an_empty_link_leaves_no_relationship(tmp_path: Path) -> None:
    spec = lighthouse()
    manuscript = (
        "# Linked\n\n[![linked img](images/map.gif)](http://example.com/?a=1&b=<2>\"')\n\n"
        "[](https://example.org/empty) and [text](https://example.org/kept)\n"
    )
    build(manuscript, "Linked", tmp_path / "l.docx", replace(spec, manuscript=manuscript))
    document = _document(tmp_path / "l.docx")
    linked = re.search(
        r'<w:hyperlink r:id="(rIdL\d+)">(<w:r><w:drawing>.*?</w:drawing></w:r>)</w:hyperlink>', document
    )
    assert linked and 'descr="linked img"' in linked.group(2)
    rels = _document(tmp_path / "l.docx", "word/_rels/document.xml.rels")
    targets = dict(re.findall(r'<Relationship Id="(rIdL\d+)" Type="[^"]*/hyperlink" Target="([^"]*)"', rels))
    assert targets == {
        linked.group(1): "http://example.com/?a=1&amp;b=%3C2%3E%22&#x27;",
        "rIdL2": "https://example.org/kept",
    }
    assert set(re.findall(r'r:id="(rIdL\d+)"', document)) == set(targets)
    got = pandoc_ast(tmp_path / "l.docx", "docx")
    assert '"t":"Link"' in json.dumps(got, separators=(",", ":")) and shape(got).images[-1][0] == "linked img"


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_the_contents_show_what_word_fills_in_to_toc_depth(depth: int, tmp_path: Path) -> None:
    manuscript = (
        "# Heading with note[^h]\n\ntext\n\n[^h]: a note\n\n## Second *level*\n\n### Third `level`\n\n"
        "#### Fourth\n\n# \n\nUntitled's text\n"
    )
    build(manuscript, "Contents", tmp_path / "c.docx", toc_depth=depth)
    document = _document(tmp_path / "c.docx")
    listed = re.findall(
        r'<w:pStyle w:val="TOC(\d)"/></w:pPr>.*?<w:t xml:space="preserve">([^<]*)</w:t>', document
    )
    everything = [("1", "Heading with note"), ("2", "Second level"), ("3", "Third level"), ("1", "Untitled")]
    assert listed == [(level, title) for level, title in everything if int(level) <= depth]
    headings = re.findall(
        r'<w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t xml:space="preserve">([^<]*)<', document
    )
    assert headings == ["Heading with note", "Untitled"]  # the untitled chapter's title, in both places
    assert "[^h]" not in document


def test_every_part_is_dated_the_revisions_time_so_a_revision_is_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No time of the build's own leaks into the zip (the outside test found two docx of one revision that
    differed in their entries' times): every part, pictures included, carries the revision's (1.8e9 here)."""
    spec = lighthouse()
    build(spec.manuscript, spec.title, tmp_path / "a.docx", spec)
    monkeypatch.setattr("time.time", lambda: 2.0e9)  # a build some years later, as a zip would date it
    build(spec.manuscript, spec.title, tmp_path / "b.docx", spec)
    assert (tmp_path / "a.docx").read_bytes() == (tmp_path / "b.docx").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.docx") as docx:
        dated = {info.date_time for info in docx.infolist()}
        assert any(info.filename.startswith("word/media/") for info in docx.infolist())
    assert dated == {(2027, 1, 15, 8, 0, 0)}  # 1.8e9 s, in UTC


def test_a_notes_links_and_pictures_are_the_notes_parts_own_relationships(tmp_path: Path) -> None:
    # A note's hyperlink named a relationship (rIdL1) of the document's part, which the footnotes part does
    # not have: pandoc read it back as a link to nowhere.
    spec = lighthouse()
    manuscript = (
        "# Noted\n\nBody [body link](https://example.org/body) and a note.[^1]\n\n"
        "[^1]: See [the site](https://example.org/in-note) and ![a map](images/map.gif).\n"
    )
    build(manuscript, "Noted", tmp_path / "n.docx", replace(spec, manuscript=manuscript))
    notes = _document(tmp_path / "n.docx", "word/footnotes.xml")
    rels = _document(tmp_path / "n.docx", "word/_rels/footnotes.xml.rels")
    used = set(re.findall(r'r:(?:id|embed)="([^"]+)"', notes))
    defined = dict(re.findall(r'<Relationship Id="([^"]+)" Type="[^"]*" Target="([^"]*)"', rels))
    assert len(used) == 2 and used <= set(defined), (used, defined)
    assert "https://example.org/in-note" in defined.values()
    assert "https://example.org/in-note" not in _document(tmp_path / "n.docx", "word/_rels/document.xml.rels")
    ast = json.dumps(pandoc_ast(tmp_path / "n.docx", "docx"), separators=(",", ":"))
    assert '"https://example.org/in-note"' in ast and '"https://example.org/body"' in ast
