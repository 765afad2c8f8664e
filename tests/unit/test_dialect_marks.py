"""Superscript and subscript, task lists and line blocks (issue 48), as pandoc reads them, in every format
with the structure it has for each: `sup`/`sub`, Word's raised and lowered runs, Typst's `super`/`sub`; a
task's box (☐, ☒) before its words; a line block's lines kept, each ending in a break, its leading spaces
kept. Each file is read back as its reader reads it, and beside pandoc's reading of the same manuscript."""

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

BOOK = """# Marks

Water is H~2~O, and 2^10^ is 1024; a P~a\\ cat~ too. ~~Struck~~ stays struck.

- [ ] an open task
- [x] a done one
- a plain item

| The limerick packs laughs anatomical
|    Into space that is quite economical.
|
| After an empty line

HTML: CO<sub>2</sub>, mc<sup>2</sup>; press <kbd>Ctrl</kbd>; <mark>marked</mark>; one<br>two;
<abbr title="HyperText &amp; more">HTML</abbr>; <script>alert(1)</script> <b onclick="x">bold</b> <sub>open.

Read https://example.com/guide?page=2. It is (https://example.org/a_(b)) there; `https://in.code` is code.
"""


def test_html_reads_as_pandocs_html_does(stack: Stack) -> None:
    _, data = export(stack, stack.create_book(BOOK), "html")
    html = data.decode()
    ours = re.findall(r"<(sup|sub)>([^<]*)</", html)
    # (pandoc passes raw HTML through, the unclosed `<sub>` too: its reading of Markdown's marks alone)
    marks = BOOK.split("HTML:")[0]
    theirs = re.findall(r"<(sup|sub)>([^<]*)</", pandoc("-f", "markdown", "-t", "html", text=marks))
    assert ours == [*theirs, ("sub", "2"), ("sup", "2")]
    assert theirs == [("sub", "2"), ("sup", "10"), ("sub", "a\u00a0cat")]
    assert '<a href="https://example.com/guide?page=2">https://example.com/guide?page=2</a>. It' in html
    assert '(<a href="https://example.org/a_(b)">' in html and "<code>https://in.code</code>" in html
    theirs_links = re.findall(
        r'<a\s+href="([^"]+)"', pandoc("-f", "markdown+autolink_bare_uris", "-t", "html", text=BOOK)
    )
    assert re.findall(r'<a href="(http[^"]+)"', html) == theirs_links
    assert "CO<sub>2</sub>, mc<sup>2</sup>; press <kbd>Ctrl</kbd>; <mark>marked</mark>; one<br" in html
    assert '<abbr title="HyperText &amp; more">HTML</abbr>' in html and "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &lt;b onclick=" in html and "&lt;sub&gt;open." in html
    assert '<ul class="task-list">' in html and '<li class="task">☐ an open task</li>' in html
    assert "☒ a done one" in html and "<li>a plain item</li>" in html
    assert re.search(
        r'<p class="line-block">The limerick[^<]*<br ?/?>\n\u00a0{3}Into space[^<]*<br ?/?>\n<br ?/?>', html
    )


def test_the_epub_passes_epubcheck(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "epub")
    page = zipfile.ZipFile(io.BytesIO(data)).read("OEBPS/chapter-000001.xhtml").decode()
    assert "H<sub>2</sub>O" in page and "2<sup>10</sup>" in page and 'class="line-block"' in page
    (tmp_path / "m.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "m.epub")


def test_the_docx_raises_and_lowers_runs_and_pandoc_reads_them_back(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    (tmp_path / "m.docx").write_bytes(data)
    read = pandoc("-f", "docx", "-t", "markdown", str(tmp_path / "m.docx"))
    flat = " ".join(read.split())
    assert "H~2~O" in flat and "2^10^" in flat and "~~Struck~~" in flat, read
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    assert re.search(r'w:val="subscript"/>[^<]*(<[^>]*>)*<w:t[^>]*>2</w:t>', document)
    assert re.search(r'<w:highlight w:val="yellow"/>[^<]*(<[^>]*>)*<w:t[^>]*>marked<', document)
    assert re.search(r'Courier New"/>[^<]*(<[^>]*>)*<w:t[^>]*>Ctrl<', document)
    assert "CO~2~, mc^2^" in flat and "\\<script\\>alert(1)" in flat, read  # (the script is its text)
    rels = zipfile.ZipFile(io.BytesIO(data)).read("word/_rels/document.xml.rels").decode()
    assert (
        'Target="https://example.com/guide?page=2"' in rels and 'Target="https://example.org/a_(b)"' in rels
    )
    assert "- [ ] an open task" in read and "- [x] a done one" in read, read  # (pandoc reads the boxes so)
    # A line block's lines end in breaks, which pandoc reads as its hard line breaks.
    assert re.search(r"The limerick packs laughs anatomical\\\s*\n\s*\S*Into space", read), read


def test_the_pdf_keeps_the_boxes_and_the_lines(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "pdf")
    (tmp_path / "m.pdf").write_bytes(data)
    text = subprocess.run(["pdftotext", str(tmp_path / "m.pdf"), "-"], capture_output=True, text=True).stdout
    assert "☐ an open task" in text and "☒ a done one" in text and "• ☐" not in text, text  # (no bullet)
    lines = [line.strip() for line in text.splitlines()]
    assert "The limerick packs laughs anatomical" in lines and "Into space that is quite economical." in lines
    assert "After an empty line" in lines
    with pikepdf.open(tmp_path / "m.pdf") as pdf:
        annots = [a for page in pdf.pages for a in page.get("/Annots", [])]
        uris = [str(a.A.URI) for a in annots if "/A" in a and "/URI" in a.A]
    assert "https://example.com/guide?page=2" in uris and "https://example.org/a_(b)" in uris


def test_a_link_too_long_for_typst_is_its_words_in_the_pdf(stack: Stack, tmp_path: Path) -> None:
    address = "https://example.org/" + "a" * 8_000  # Typst refuses an address past 8,000 characters
    view, data = export(stack, stack.create_book(f"# Long\n\nSee {address} and [this]({address}).\n"), "pdf")
    assert view["complete"] is True and not view.get("skipped_chapters"), view
    (tmp_path / "l.pdf").write_bytes(data)
    with pikepdf.open(tmp_path / "l.pdf") as pdf:
        uris = [a.A.URI for page in pdf.pages for a in page.get("/Annots", []) if "/A" in a and "/URI" in a.A]
    assert uris == []


def test_an_escaped_space_is_a_no_break_space_anywhere_as_pandocs_is() -> None:
    from bindery.engine import markup

    text = "10\\ km and a\\\\ b, P~a\\ cat~, `code\\ x`.\n"
    ours = markup.render(markup.parser(), text, "ch1").html
    assert ours == pandoc("-f", "markdown", "-t", "html", text=text), ours
    assert "10\u00a0km" in ours and "a\\ b" in ours and "<code>code\\ x</code>" in ours
