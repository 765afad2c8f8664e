"""Definition lists, as pandoc writes them (`Term`, then `:   its definition`, its later paragraphs indented
four spaces): a `dl` in html and epub, Word's Definition Term and Definition styles in the docx (pandoc's),
Typst's term list in the pdf; and a link inside a definition lands, as pandoc's guide's options link to its
sections from theirs."""

from __future__ import annotations

import io
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.deflist import deflist_plugin

from bindery.engine import deflists, markup
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export
from tests.validators import epubcheck, pandoc

BOOK = """# Options

`-f` *FORMAT*, `--from=`*FORMAT*

:   Specify the input format. See [Markdown variants](#markdown-variants).

    A second paragraph of the same definition.

`-o` *FILE*

:   Write output to *FILE*.

# Markdown variants

Text.
"""


def test_html_sets_a_definition_list_as_pandoc_does_and_its_links_land(stack: Stack) -> None:
    _, data = export(stack, stack.create_book(BOOK), "html")
    html = data.decode()
    assert "<dl>" in html and html.count("<dt>") == 2 and html.count("<dd>") == 2
    assert '<a href="#markdown-variants">Markdown variants</a>' in html and "<pre>" not in html
    ours = re.findall(r"<(dl|dt|dd)>", html)
    theirs = re.findall(r"<(dl|dt|dd)>", pandoc("-f", "markdown", "-t", "html", text=BOOK))
    assert ours == theirs


def test_the_epub_sets_it_as_a_dl_and_epubcheck_passes(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "epub")
    page = zipfile.ZipFile(io.BytesIO(data)).read("OEBPS/chapter-000001.xhtml").decode()
    assert "<dl>" in page and 'href="chapter-000002.xhtml#markdown-variants"' in page
    (tmp_path / "dl.epub").write_bytes(data)
    report = epubcheck(tmp_path / "dl.epub")
    assert "0 fatals / 0 errors / 0 warnings" in report, report[-2000:]


def test_the_docx_uses_pandocs_definition_styles_and_pandoc_reads_a_definition_list(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    assert document.count('w:val="DefinitionTerm"') == 2 and document.count('w:val="Definition"') == 3
    (tmp_path / "dl.docx").write_bytes(data)
    read = pandoc("-f", "docx", "-t", "html", str(tmp_path / "dl.docx"))
    assert read.count("<dt>") == 2 and read.count("<dd>") == 2, read


def test_the_pdf_sets_each_term_and_its_definition(stack: Stack, tmp_path: Path) -> None:
    view, data = export(stack, stack.create_book(BOOK), "pdf")
    (tmp_path / "dl.pdf").write_bytes(data)
    text = " ".join(
        subprocess.run(
            ["pdftotext", str(tmp_path / "dl.pdf"), "-"], capture_output=True, text=True
        ).stdout.split()
    )
    assert "-f FORMAT, --from=FORMAT Specify the input format. See Markdown variants." in text, text[:600]
    assert "A second paragraph of the same definition." in text and view["complete"] is True


_LINES = st.sampled_from(
    [
        "Term",
        "Another *term*",
        ":   A definition",
        "~   Compact",
        ": x",
        "    more of it",
        "  lazy",
        "",
        "    code",
        "Text",
        ":",
        "~",
        "    - nested",
        "    > quoted",
        "\t tabbed",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_LINES, max_size=20))
def test_bindery_reads_a_definition_list_as_the_plugin_does_where_no_line_opens_a_block_of_its_own(
    lines: list[str],
) -> None:
    """Bindery's rule is the plugin's but for a heading or a list or quote in column 0 (never a later term
    in Bindery's): where no line is one, the tokens are the plugin's, but for which lists are tight (a blank
    line between a term and its definition makes it paragraphs, in pandoc: the next test)."""
    text = "\n".join(lines)
    theirs = MarkdownIt("commonmark").use(deflist_plugin)
    ours = MarkdownIt("commonmark")
    deflists.install(ours)
    assert [shape[:2] + shape[3:] for shape in _shape(ours.parse(text))] == [
        shape[:2] + shape[3:] for shape in _shape(theirs.parse(text))
    ]


@pytest.mark.parametrize(
    "text",
    [
        "apple\n:   red fruit\n\norange\n:   orange fruit\n",
        "apple\n\n:   red fruit\n\norange\n\n:   orange fruit\n",
        "apple\n:   red fruit\n\n:   and more\n",
        "apple\n:   red fruit\n:   and more\n",
        "apple\n\n:   red fruit\n",
        "term\n:   para one\n\n    para two\n\nt2\n:   def two\n",
    ],
)
def test_a_definition_is_paragraphs_where_pandoc_makes_it_so(text: str) -> None:
    ours = markup.parser().render(text)
    theirs = pandoc("-f", "markdown", "-t", "html", text=text)
    assert ours.count("<p>") == theirs.count("<p>"), (ours, theirs)


def test_a_heading_is_never_a_term_so_the_cut_and_the_parse_read_the_same_chapters() -> None:
    tokens = markup.parser().parse("Term\n:   one\n\n# Title\n:   two\n\n## Sub\n:   three\n")
    assert [t.type for t in tokens if t.type in ("dt_open", "heading_open")] == [
        "dt_open",
        "heading_open",
        "heading_open",
    ]
    # pandoc (whose headings need a blank line before them) takes `# Title` for the list's second term.
    native = pandoc("-f", "markdown", "-t", "native", text="Term\n:   one\n\n# Title\n:   two\n")
    assert 'Str "#"' in native


def test_a_list_or_quote_after_a_definition_is_one_not_a_term_as_the_cut_reads_it_afresh() -> None:
    tokens = markup.parser().parse("Term\n:   one\n\n- ## listed\n:   two\n\n> ## quoted\n:   three\n")
    kinds = [
        t.type for t in tokens if t.type in ("dt_open", "bullet_list_open", "blockquote_open", "heading_open")
    ]
    assert kinds == ["dt_open", "bullet_list_open", "heading_open", "blockquote_open", "heading_open"]


def _shape(tokens: list[Token]) -> list[tuple[str, str, bool, list[int] | None]]:
    # A later term's `dd` map starts at the term's line in the plugin's (Bindery's starts at its own line).
    return [(t.type, t.content, t.hidden, None if t.type == "dd_open" else t.map) for t in tokens]


def test_a_setext_heading_after_a_definition_is_set_once_where_pandoc_sets_it() -> None:
    text = "#Title\n:   def\n\n#Title\n===\n"
    ours = markup.parser().render(text)
    theirs = pandoc("-f", "markdown", "-t", "html", text=text)
    assert ours.count("<h1") == theirs.count("<h1") == 1 and ours.index("</dl>") < ours.index("<h1"), ours


def test_a_tight_definitions_later_paragraph_is_not_run_into_its_first() -> None:
    """pandoc reads both as Plain, one line after the other: the html keeps a line between them (a space on
    the page), never "oneSecond"."""
    html = markup.render(markup.parser(), "Term\n:   Definition one\n\n    Second para.\n", "ch1").html
    assert "<dd>Definition one\nSecond para.</dd>" in html, html
