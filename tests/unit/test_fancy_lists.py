"""pandoc's list markers (`fancy_lists`, `startnum`): `a.`, `(iii)`, `B)`, `#.`, `(2)` open lists of that
numbering, read where pandoc reads them, and every format numbers them so: the html's `ol` has pandoc's
`type` and `start`, the docx's list is Word's numbering of that format (pandoc reads it back as the same
list), the pdf prints the markers."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from bindery.engine import headings, markup
from bindery.engine.fancy_lists import label
from bindery.engine.token_tree import plain_text
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export
from tests.validators import epubcheck, pandoc, pdftotext

SAMPLES = [
    "a. one\nb. two\n",
    "(iii) three\n(iv) four\n",
    "#. first\n#. second\n",
    "B)  bee\nC)  sea\n",
    "B. Russell wrote\n",
    "I. Newton\n",
    "C.  two spaces\n",
    "IV. four\nV. five\n",
    "(2) two\n(3) three\n",
    "para\na. not a list\n",
    " i. roman\nii. two\n\nv. five\n",
    "a. one\nb) another delimiter\n",
    "i. roman\nb. a letter ends it\n",
    "a. outer\n\n    i. inner\n    ii. inner\n\nb. outer\n",
    "3) three\n4) four\n",
    "1. plain\n2. plain\n",
    "e.g. not a list\n",
    "- bullets\n\n  a. under\n  b. them\n",
]


def _lists(html: str) -> list[tuple[str, str, int]]:
    """Each `ol` as (type, start, its items), in order; `type="1"` is the decimal it says."""
    found = []
    for match in re.finditer(r"<ol([^>]*)>(.*?)</ol>", html, re.S):
        attrs = dict(re.findall(r'(\w+)="([^"]*)"', match[1]))
        kind = attrs.get("type", "1")
        found.append((kind, attrs.get("start", "1"), match[2].count("<li")))
    return found


@pytest.mark.parametrize("sample", SAMPLES)
def test_lists_are_read_where_pandoc_reads_them(sample: str) -> None:
    ours = markup.parser().render(sample)
    theirs = pandoc("-f", "markdown", "-t", "html", text=sample)
    assert _lists(ours) == _lists(theirs), (ours, theirs)
    assert ours.count("<p>") <= theirs.count("<p>") + ours.count("<li>")  # no list read as a paragraph


@pytest.mark.parametrize(
    "sample",
    [
        "Here's one with a bullet.\n* criminey.\n",
        "This should not be a block quote: 2\n> 1.\n",
        "A sentence wrapped onto\n2. a line\n",
        "- item\n  more\n  - a sublist\n",
        "1. item\n   > a quote, after a blank line or not\n",
        "Text\n\n> quoted\n\n- listed\n",
    ],
)
def test_a_list_or_a_quote_interrupts_a_paragraph_only_where_pandoc_lets_it(sample: str) -> None:
    ours = markup.parser().render(sample)
    theirs = pandoc("-f", "markdown", "-t", "html", text=sample)
    for tag in ("<ul", "<ol", "<blockquote", "<p>", "<li"):
        assert ours.count(tag) == theirs.count(tag), (tag, ours, theirs)


def test_a_marker_is_written_in_its_own_numbering() -> None:
    assert [label("(a)", n) for n in (1, 3, 26, 27)] == ["(a)", "(c)", "(z)", "(aa)"]
    assert [label("I.", n) for n in (1, 4, 9, 14, 1999)] == ["I.", "IV.", "IX.", "XIV.", "MCMXCIX."]
    assert label("1)", 12) == "12)"


BOOK = """# Lists

(c) third
(d) fourth

Then roman:

iv. four
v. five

And numbers (a `#.` right after the roman items would go on with them, as in pandoc):

#. one
#. two
"""


def _pandoc_lists(path: Path) -> list[list[Any]]:
    """Each ordered list pandoc reads in a file: [start, style, delimiter]."""
    ast = json.loads(pandoc("-t", "json", str(path)))
    found: list[list[Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("t") == "OrderedList":
                start, style, delim = node["c"][0]
                found.append([start, style["t"], delim["t"]])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(ast)
    return found


def test_html_and_epub_give_the_list_its_type_and_start(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "html")
    html = data.decode()
    assert '<ol type="a" start="3">' in html and '<ol type="i" start="4">' in html
    _, epub = export(stack, stack.create_book(BOOK), "epub")
    page = zipfile.ZipFile(io.BytesIO(epub)).read("OEBPS/chapter-000001.xhtml").decode()
    assert '<ol type="a" start="3">' in page
    (tmp_path / "l.epub").write_bytes(epub)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "l.epub")


def test_the_docx_numbers_each_list_in_its_format_and_pandoc_reads_it_back(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    numbering = zipfile.ZipFile(io.BytesIO(data)).read("word/numbering.xml").decode()
    assert '<w:numFmt w:val="lowerLetter"/><w:lvlText w:val="(%1)"/>' in numbering
    assert '<w:numFmt w:val="lowerRoman"/><w:lvlText w:val="%1."/>' in numbering
    (tmp_path / "l.docx").write_bytes(data)
    assert _pandoc_lists(tmp_path / "l.docx") == [
        [3, "LowerAlpha", "TwoParens"],
        [4, "LowerRoman", "Period"],
        [1, "Decimal", "Period"],
    ]


def test_the_pdf_prints_each_items_marker(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "pdf")
    (tmp_path / "l.pdf").write_bytes(data)
    text = pdftotext(tmp_path / "l.pdf")
    for marker, words in (
        ("(c)", "third"),
        ("(d)", "fourth"),
        ("iv.", "four"),
        ("v.", "five"),
        ("2.", "two"),
    ):
        assert re.search(re.escape(marker) + r"\s+" + words, text), (marker, text)


@pytest.mark.parametrize(
    "sample",
    [
        "0. zero\n1. one\n",
        "(0) zero\n",
        "a. first\n#. second\n#. third\n",
        "(mmmmcmxcix) last\n",
        "1. one\n   a. one-a\n   b. one-b\n      i. deep-i\n2. two\n",
    ],
)
def test_what_the_outside_test_found_is_read_as_pandoc_reads_it(sample: str) -> None:
    ours = markup.parser().render(sample)
    theirs = pandoc("-f", "markdown", "-t", "html", text=sample)
    assert _lists(ours) == _lists(theirs), (ours, theirs)


def test_a_formula_in_a_heading_is_its_tex_in_the_id_and_the_title_as_pandoc_gives_them() -> None:
    tokens = markup.parser().parse("# Math $x^2$ heading\n\n## Sub $\\alpha$ head\n")
    inlines = [token.children or [] for token in tokens if token.type == "inline"]
    assert [headings.identifier(headings.words(children)) for children in inlines] == [
        "math-x2-heading",
        "sub-alpha-head",
    ]
    assert plain_text(inlines[0]) == "Math x^2 heading"
