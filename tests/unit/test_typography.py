"""Typography (issue 48): quotes as the book's language sets them, an apostrophe, dashes and an ellipsis, in
every format but the markdown (the manuscript as written); code and an autolink's address as typed; the
export option `typography=off` leaves the text as typed. Which quote opens and which closes is markdown-it's
`smartquotes` reading, held to it here, in work linear in the paragraph."""

from __future__ import annotations

import io
import subprocess
import zipfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from bindery.engine import markup, typography
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export

BOOK = """# "Don't" -- a title

"It's the 'best' of times," she said --- and paused... `"code" -- as typed` <https://example.com/a--b...>
"""
NNBSP = "\u202f"


def _theirs() -> MarkdownIt:
    return MarkdownIt("commonmark", {"typographer": True}).enable("smartquotes").disable("replacements")


def _ours(quotes: typography.Quotes) -> MarkdownIt:
    md = MarkdownIt("commonmark")
    typography.install(md)
    typography.configure(md, quotes)
    return md


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="'\"a b,!()*_\n1`\u00ab\u2014\u00a7$[]", max_size=40))
def test_each_quote_opens_or_closes_as_markdown_its_smartquotes_reads_it(text: str) -> None:
    assert _ours(typography.QUOTES["en"]).render(text) == _theirs().render(text)


def test_quotes_are_the_languages_and_dashes_and_ellipses_are_set() -> None:
    said = '"It\'s \'so\'," -- she said --- then... "Oui ?"'
    assert typography.plain(said, typography.quotes_for("en")) == "“It’s ‘so’,” – she said — then… “Oui ?”"
    assert typography.plain(said, typography.quotes_for("de-CH")) == "„It’s ‚so‘,“ – she said — then… „Oui ?“"
    french = typography.plain(said, typography.quotes_for("fr"))
    assert (
        french == f"«{NNBSP}It’s ‹{NNBSP}so{NNBSP}›,{NNBSP}» – she said — then… «{NNBSP}Oui{NNBSP}?{NNBSP}»"
    )
    assert typography.plain(said, None) == said


def test_code_and_an_autolinks_address_are_left_as_typed() -> None:
    md = markup.parser()
    typography.configure(md, typography.quotes_for("en"))
    html = md.render(BOOK.split("\n", 2)[2])
    assert "<code>&quot;code&quot; -- as typed</code>" in html
    assert '<a href="https://example.com/a--b...">https://example.com/a--b...</a>' in html
    assert "“It’s the ‘best’ of times,” she said — and paused…" in html


def test_html_and_epub_set_the_text_and_the_titles_and_off_leaves_them_as_typed(stack: Stack) -> None:
    book = stack.create_book(BOOK, title='"Quoted" -- the book')
    _, data = export(stack, book, "html")
    html = data.decode()
    assert "“Don’t” – a title" in html and "“Quoted” – the book" in html and '"Don' not in html
    _, data = export(stack, book, "html", {"typography": "off"})
    typed = data.decode()
    assert "“" not in typed and "&quot;It's the 'best' of times,&quot; she said --- and paused..." in typed
    _, data = export(stack, book, "epub")
    nav = zipfile.ZipFile(io.BytesIO(data)).read("OEBPS/nav.xhtml").decode()
    assert "“Don’t” – a title" in nav


def test_a_german_book_has_german_quotes_in_the_docx_and_the_pdf(stack: Stack, tmp_path: Path) -> None:
    book = stack.create_book(BOOK)
    assert stack.http("PATCH", f"/books/{book}", body={"metadata": {"language": "de"}}).status == 200
    _, data = export(stack, book, "docx")
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    assert "„It’s the ‚best‘ of times,“ she said — and paused…" in document
    _, data = export(stack, book, "pdf")
    (tmp_path / "t.pdf").write_bytes(data)
    text = subprocess.run(["pdftotext", str(tmp_path / "t.pdf"), "-"], capture_output=True, text=True).stdout
    assert "„It’s the ‚best‘ of times,“ she said — and" in " ".join(text.split()), text
