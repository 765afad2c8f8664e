"""Bracketed spans, as pandoc reads them (`[words]{#id .class}`): a link to a span's id lands on it in every
format, as pandoc's guide's links to `[...]{#option--reference-doc}` do; `.smallcaps` is set in small
capitals; any other class reaches the html and epub. A second span of an id takes none (the book's index
holds the first), so no page has an id twice."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

from bindery.engine import markup
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export
from tests.unit.test_links import _pdf_links
from tests.validators import epubcheck, pandoc

BOOK = """# Options

`--reference-doc=`*FILE*

:   [Use the specified file as a style reference]{#option--reference-doc .option} in
    producing a docx. Set in [Small Capitals]{.smallcaps}.

# Markdown variants

See [the reference doc option](#option--reference-doc), and [not a span] {.x}.

A second [span]{#option--reference-doc} of the id takes none.
"""


def test_the_parse_reads_spans_where_pandoc_does() -> None:
    for text in ("A [few words]{.aside key=v}.", "[a [b]{.y}]{#z}", "[x]{bad attr}", "[link](u){.x}"):
        ours = re.findall(r"<span[^>]*>", markup.parser().render(text))
        theirs = re.findall(r"<span[^>]*>", pandoc("-f", "markdown", "-t", "html", text=text))
        assert ours == theirs, text


def test_html_gives_the_first_span_its_id_and_a_link_lands_on_it(stack: Stack) -> None:
    _, data = export(stack, stack.create_book(BOOK), "html")
    html = data.decode()
    assert html.count('id="option--reference-doc"') == 1
    assert '<span id="option--reference-doc" class="option">Use the specified' in html
    assert '<a href="#option--reference-doc">the reference doc option</a>' in html
    assert '<span class="smallcaps">Small Capitals</span>' in html and "{.x}" in html


def test_the_epub_links_to_the_span_in_its_chapter_and_epubcheck_passes(stack: Stack, tmp_path: Path) -> None:
    view, data = export(stack, stack.create_book(BOOK), "epub")
    book = zipfile.ZipFile(io.BytesIO(data))
    assert 'id="option--reference-doc"' in book.read("OEBPS/chapter-000001.xhtml").decode()
    second = book.read("OEBPS/chapter-000002.xhtml").decode()
    assert 'href="chapter-000001.xhtml#option--reference-doc"' in second
    assert second.count("option--reference-doc") == 1, second
    assert "small-caps" in book.read("OEBPS/style.css").decode()
    (tmp_path / "s.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "s.epub")
    assert not view.get("warnings"), view


def test_the_docx_bookmarks_the_span_and_sets_small_capitals(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    assert document.count('w:name="option--reference-doc"') == 1
    assert '<w:hyperlink w:anchor="option--reference-doc">' in document
    assert re.search(r"<w:smallCaps/>[^<]*(<[^>]*>)*<w:t[^>]*>Small Capitals", document)
    (tmp_path / "s.docx").write_bytes(data)
    read = pandoc("-f", "docx", "-t", "markdown", str(tmp_path / "s.docx"))
    assert "[Small Capitals]{.smallcaps}" in read and "(#option--reference-doc)" in read, read


def test_the_pdf_names_a_destination_for_the_span_and_links_to_it(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "pdf")
    named, links = _pdf_links(data, tmp_path)
    assert "option--reference-doc" in named
    page, _ = named["option--reference-doc"]
    # The link from the second chapter's page, and the span's own empty link to itself, where the join
    # found the place it names.
    here, there = sorted(p for p, name in links if name == "option--reference-doc")
    assert here == page < there


CLASHING = """# One [in the title]{#titled}

A [span ch]{#ch-1}, [fn]{#fn-ch1-1}, [r]{#fnref-ch1-1}, [c2]{#ch-2} and [t]{#tbl-x}, with a note.[^1]

[^1]: The note.

# Two

| a | b |
|---|---|
| 1 | 2 |

: Lights {#tbl-x}

See @tbl-x, [the title](#titled), [a link with a [span]{#in-link} in it](#titled).
"""


def test_a_span_never_takes_an_id_a_page_or_a_numbered_target_has(stack: Stack, tmp_path: Path) -> None:
    book = stack.create_book(CLASHING)
    view, data = export(stack, book, "html")
    html = data.decode()
    for taken in ("ch-1", "ch-2", "fn-ch1-1", "fnref-ch1-1", "tbl-x"):
        assert html.count(f'id="{taken}"') == 1, taken  # Bindery's own, or the table's: the span has none
    assert re.search(r'<table id="tbl-x"', html) and '<a href="#tbl-x">Table\u00a01</a>' in html
    assert '<a href="#titled">a link with a <span id="in-link">span</span> in it</a>' in html
    assert not view.get("warnings"), view
    _, data = export(stack, book, "epub")
    (tmp_path / "c.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "c.epub")


def test_the_pdf_lands_a_link_on_a_span_in_a_chapters_title_and_names_no_placeholder(
    stack: Stack, tmp_path: Path
) -> None:
    import pikepdf

    _, data = export(stack, stack.create_book(CLASHING), "pdf")
    named, links = _pdf_links(data, tmp_path)
    assert "titled" in named and "titled" in {name for _, name in links}
    with pikepdf.open(tmp_path / "book.pdf") as pdf:
        said = [str(a.get("/Contents", "")) for page in pdf.pages for a in page.get("/Annots", [])]
    assert said and not [s for s in said if "bindery-" in s], said


def test_a_spans_key_values_are_read_as_pandocs_html_writes_them() -> None:
    html = markup.parser().render(
        '[x]{id=real class="c1 c2" lang=fr dir=rtl onclick=y style="a" data-y=z k=v}'
    )
    assert html == '<p><span id="real" class="c1 c2" lang="fr" dir="rtl" data-y="z" data-k="v">x</span></p>\n'
