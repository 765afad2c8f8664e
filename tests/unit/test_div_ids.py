"""A fenced div's id (issue 48): `::: {#sidebar .note}` is a target of the book, as a span's is, so a link
to `#sidebar` from any chapter lands on it in every format, as in pandoc's reading. The first div of an id
takes it; a later one, or one inside a note, is set without it. Each file is read as its reader reads it."""

from __future__ import annotations

import io
import re
import subprocess
import zipfile
from pathlib import Path

import pikepdf

from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export
from tests.validators import epubcheck, pandoc

BOOK = """# One

::: {#sidebar .note}
The keeper's log is kept in the lamp room.
:::

::: {#sidebar}
A second div of the same id.
:::

Noted.[^n]

[^n]: A note.

    ::: {#in-note}
    Inside the note.
    :::

# Two

See [the sidebar](#sidebar) and [the note's](#in-note).
"""


def test_the_html_gives_the_first_div_its_id_and_the_link_lands(stack: Stack) -> None:
    view, data = export(stack, stack.create_book(BOOK), "html")
    html = data.decode()
    assert html.count('id="sidebar"') == 1 and '<div id="sidebar" class="note" role="note">' in html
    assert '<a href="#sidebar">the sidebar</a>' in html
    assert 'id="in-note"' not in html and "the note&#x27;s" not in html  # (its words, and a warning)
    unlanded = [w for w in view["warnings"] if w["code"] == "link_unlanded"]
    assert [w["href"] for w in unlanded] == ["#in-note"], view["warnings"]
    theirs = pandoc("-f", "markdown", "-t", "html", text=BOOK)
    assert '<div id="sidebar" class="note">' in theirs and '<a href="#sidebar">' in theirs


def test_the_epub_links_to_its_page_and_passes_epubcheck(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "epub")
    book = zipfile.ZipFile(io.BytesIO(data))
    assert '<div id="sidebar" class="note" role="note">' in book.read("OEBPS/chapter-000001.xhtml").decode()
    assert 'href="chapter-000001.xhtml#sidebar"' in book.read("OEBPS/chapter-000002.xhtml").decode()
    (tmp_path / "d.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "d.epub")


def test_the_docx_bookmarks_it_and_links_to_the_bookmark(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    assert len(re.findall(r'<w:bookmarkStart w:id="\d+" w:name="sidebar"/>', document)) == 1
    opened = (
        r'<w:bookmarkStart w:id="\d+" w:name="sidebar"/><w:bookmarkEnd w:id="\d+"/><w:r><w:t[^>]*>The keeper'
    )
    assert re.search(opened, document)  # (in the div's first paragraph, where pandoc reads it)
    assert '<w:hyperlink w:anchor="sidebar"' in document
    (tmp_path / "d.docx").write_bytes(data)
    read = pandoc("-f", "docx", "-t", "html", str(tmp_path / "d.docx"))
    assert 'href="#sidebar"' in read and 'id="sidebar"' in read, read


def test_the_pdf_names_a_destination_the_link_goes_to(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "pdf")
    (tmp_path / "d.pdf").write_bytes(data)
    with pikepdf.open(tmp_path / "d.pdf") as pdf:
        names = dict(pikepdf.NameTree(pdf.Root.Names.Dests).items())
        assert "sidebar" in names and "in-note" not in names
        goes = [
            str(a.Dest if "/Dest" in a else a.A.D)
            for page in pdf.pages
            for a in page.get("/Annots", [])
            if "/Dest" in a or ("/A" in a and "/D" in a.A)
        ]
    assert goes.count("sidebar") == 2, goes  # the link, by the destination's name, and the div's own mark
    text = subprocess.run(["pdftotext", str(tmp_path / "d.pdf"), "-"], capture_output=True, text=True).stdout
    assert "The keeper's log" in text.replace("\u2019", "'") and "A second div of the same id." in text


FIRSTS = """# Firsts

::: {#dtable}
| a | b |
|---|---|
| 1 | 2 |
:::

::: {#dcode}
```
code first
```
:::

::: {#dquote}
> A quote, then [back](#dtable), [code](#dcode), [odd](#x<y).
:::

::: {#x<y}
Not an id, as pandoc reads it: the braces are no attributes.
:::
"""


def test_the_docx_bookmarks_a_div_at_its_first_block_whatever_it_is(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(FIRSTS), "docx")
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    assert re.search(r'w:name="dtable"/><w:bookmarkEnd w:id="\d+"/><w:tbl>', document), document[-3000:]
    assert re.search(
        r'w:name="dcode"/><w:bookmarkEnd w:id="\d+"/><w:p><w:pPr><w:pStyle w:val="SourceCode"', document
    )
    assert 'w:name="x' not in document and "x&lt;y" not in re.sub(r"<w:t[^>]*>[^<]*</w:t>", "", document)


def test_an_id_pandoc_would_not_read_is_no_id_and_the_epub_stays_valid(stack: Stack, tmp_path: Path) -> None:
    view, data = export(stack, stack.create_book(FIRSTS), "epub")
    page = zipfile.ZipFile(io.BytesIO(data)).read("OEBPS/chapter-000001.xhtml").decode()
    assert 'id="dtable"' in page and re.search(r'href="[^"]*#dtable"', page) and 'href="#x' not in page
    assert [w["href"] for w in view["warnings"] if w["code"] == "link_unlanded"] == ["#x%3Cy"], view[
        "warnings"
    ]
    (tmp_path / "f.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "f.epub")
