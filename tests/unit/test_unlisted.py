"""`.unlisted` (issue 48): a heading so marked, and every heading under it, is left out of the contents in
every format, as pandoc's contents leave it out, and stays in the text as a heading a link lands on. Each
file is read as its reader reads it: the html's and the epub's contents, the pdf's outline and its page
of contents, the docx's contents field and Word's outline levels (and pandoc's reading of the docx)."""

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

BOOK = """# Front matter {.unlisted}

A page nobody lists.

## Under the front

# One

## Shown

## Hidden {.unlisted}

### Under hidden

## Shown again

### Below shown again

# Two

See [the hidden one](#hidden) and [the front](#front-matter).
"""
LISTED = ["One", "Shown", "Shown again", "Below shown again", "Two"]
UNLISTED = ["Front matter", "Under the front", "Hidden", "Under hidden"]


def _links(listing: str) -> list[str]:
    found = re.findall(r"<a [^>]*>(.*?)</a>", listing, re.DOTALL)
    return [" ".join(re.sub(r"<[^>]+>", "", title).split()) for title in found]


def test_the_html_contents_list_what_pandocs_list_and_the_headings_stay(stack: Stack) -> None:
    _, data = export(stack, stack.create_book(BOOK), "html", {"toc_depth": 3})
    html = data.decode()
    toc = html[html.index("<nav") : html.index("</nav>")]
    theirs = pandoc("-f", "markdown", "-t", "html", "--toc", "--toc-depth=3", "-s", text=BOOK)
    their_toc = theirs[theirs.index('<nav id="TOC"') : theirs.index("</nav>")]
    assert _links(toc) == _links(their_toc) == LISTED
    assert re.search(r'<h2 (class="unlisted" id="hidden"|id="hidden" class="unlisted")>Hidden</h2>', html)
    assert "Under hidden</h3>" in html
    assert '<a href="#hidden">the hidden one</a>' in html and '<a href="#front-matter">' in html


def test_the_epub_navigation_leaves_them_out_and_passes_epubcheck(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "epub", {"toc_depth": 3})
    book = zipfile.ZipFile(io.BytesIO(data))
    nav = book.read("OEBPS/nav.xhtml").decode()
    toc = nav[nav.index('epub:type="toc"') : nav.index("</nav>")]
    assert _links(toc) == LISTED
    assert "chapter-000001.xhtml" not in toc and 'href="chapter-000002.xhtml#hidden"' not in toc
    assert '<itemref idref="ch1"/>' in book.read("OEBPS/content.opf").decode()  # (still read, in order)
    assert 'id="hidden"' in book.read("OEBPS/chapter-000002.xhtml").decode()
    (tmp_path / "u.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "u.epub")


def test_an_epub_whose_every_chapter_is_unlisted_lists_its_first(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book("# Alone {.unlisted}\n\nWords.\n"), "epub")
    nav = zipfile.ZipFile(io.BytesIO(data)).read("OEBPS/nav.xhtml").decode()
    assert _links(nav[nav.index('epub:type="toc"') : nav.index("</nav>")]) == ["Alone"]
    (tmp_path / "a.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "a.epub")


def test_the_pdf_outline_and_contents_leave_them_out_and_links_land(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "pdf", {"toc_depth": 3})
    (tmp_path / "u.pdf").write_bytes(data)
    with pikepdf.open(tmp_path / "u.pdf") as pdf:
        with pdf.open_outline() as outline:

            def titles(items: list[pikepdf.OutlineItem]) -> list[str]:
                return [t for item in items for t in [item.title, *titles(item.children)]]

            assert titles(outline.root) == LISTED
        names = {str(k) for k, _ in pikepdf.NameTree(pdf.Root.Names.Dests).items()}
    assert {"hidden", "front-matter"} <= names  # where the links to them land
    text = subprocess.run(["pdftotext", str(tmp_path / "u.pdf"), "-"], capture_output=True, text=True).stdout
    contents = text[text.index("Contents") :].split("\f")[0]  # (its page)
    assert all(title in contents for title in LISTED), contents
    assert not any(title in contents for title in UNLISTED), contents
    assert "Under hidden" in text and "Under the front" in text  # (set in the text)


def test_the_docx_contents_leave_them_out_at_body_level_and_pandoc_reads_headings(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx", {"toc_depth": 3})
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    listed = re.findall(r'<w:pStyle w:val="TOC\d"/>.*?</w:p>', document)
    field = re.compile(r"<w:instrText[^>]*>[^<]*</w:instrText>|<[^>]+>")  # (the field's code, and tags)
    assert [field.sub("", line) for line in listed] == LISTED
    body_level = re.findall(r'<w:pStyle w:val="Heading\d"/><w:outlineLvl w:val="9"/>.*?</w:p>', document)
    assert [re.sub(r"<[^>]+>", "", p) for p in body_level] == UNLISTED
    (tmp_path / "u.docx").write_bytes(data)
    read = pandoc("-f", "docx", "-t", "markdown", str(tmp_path / "u.docx"))
    assert "## Hidden" in read and "### Under hidden" in read and "# Front matter" in read, read
