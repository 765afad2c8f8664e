"""Fenced divs (issue 48), as pandoc reads them: `::: warning` ... `:::`. An aside (note, tip, warning,
caution, important) is set apart in every format; any other class reaches the html and epub. A div never
closed runs to the end of what holds it; a closer with nothing open is dropped (a chapter cut inside a div
leaves its closer without its opener); an opener does not end a paragraph."""

from __future__ import annotations

import io
import re
import subprocess
import zipfile
from pathlib import Path

from bindery.engine import markup
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export
from tests.validators import epubcheck, pandoc

BOOK = """# Asides

::: warning
The light is not lit in daylight.

- nor in fog
:::

::: {.sidebar .wide}
A div of other classes.

::: tip
A tip inside it.
:::
:::

After them.
"""


def _divs(html: str) -> list[str]:
    return re.findall(r'<div class="([^"]*)"', html)


def test_the_parse_reads_divs_where_pandoc_does() -> None:
    for text in (BOOK, "text\n::: note\nnot an opener\n:::\n", "::: note\nnever closed\n\n# Heading\n"):
        assert _divs(markup.parser().render(text)) == _divs(pandoc("-f", "markdown", "-t", "html", text=text))
    assert "<p>stray</p>" in markup.parser().render(":::\nstray\n")  # (pandoc shows the colons)


def test_a_closer_ends_a_table_or_a_quote_before_it_as_pandocs_does() -> None:
    """A closer right under a table's last row or a quote's line is the div's end, not a row or a lazy line
    (the div used to run on over the rest of the chapter)."""
    for text in (
        "::: {#t .box}\n| a | b |\n|---|---|\n| 1 | 2 |\n:::\n\nAfter.\n",
        "::: box\n> quoted\n:::\n\nAfter.\n",
        "::: box\n-----  -----\n  a      b\n-----  -----\n:::\n\nAfter.\n",
    ):
        ours = markup.parser().render(text)
        assert ours.rstrip().endswith("</div>\n<p>After.</p>"), ours
        assert ":::" not in ours, ours
        theirs = pandoc("-f", "markdown", "-t", "html", text=text)
        assert theirs.rstrip().endswith("</div>\n<p>After.</p>"), theirs
    lazy = markup.parser().render("> quoted\n::: box\nstill quoted\n")
    assert "<p>quoted\n::: box\nstill quoted</p>" in lazy  # (an opener is no end: a lazy line, as pandoc's)


def test_html_and_epub_set_an_aside_as_a_note(stack: Stack, tmp_path: Path) -> None:
    book = stack.create_book(BOOK)
    _, data = export(stack, book, "html")
    html = data.decode()
    assert '<div class="warning" role="note">\n<p>The light is not lit in daylight.</p>' in html
    assert '<div class="sidebar wide">' in html and '<div class="tip" role="note">' in html
    assert ".warning,.caution{border-color:" in html
    _, data = export(stack, book, "epub")
    page = zipfile.ZipFile(io.BytesIO(data)).read("OEBPS/chapter-000001.xhtml").decode()
    assert page.count('role="note"') == 2
    (tmp_path / "d.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "d.epub")


def test_the_docx_sets_an_asides_paragraphs_in_its_style(stack: Stack) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    package = zipfile.ZipFile(io.BytesIO(data))
    document = package.read("word/document.xml").decode()
    assert re.search(r'<w:pStyle w:val="Warning"/>.*?The light is not lit in daylight', document)
    assert re.search(r'<w:pStyle w:val="Tip"/>.*?A tip inside it', document)
    assert not re.search(r'<w:pStyle w:val="(Warning|Tip)"/>(?:(?!</w:p>).)*After them', document)
    assert 'w:styleId="Warning"' in package.read("word/styles.xml").decode()


def test_the_pdf_sets_an_aside_apart_and_keeps_its_words(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "pdf")
    (tmp_path / "d.pdf").write_bytes(data)
    text = subprocess.run(["pdftotext", str(tmp_path / "d.pdf"), "-"], capture_output=True, text=True).stdout
    flat = " ".join(text.split())
    assert "The light is not lit in daylight. • nor in fog" in flat and "A tip inside it. After them." in flat
