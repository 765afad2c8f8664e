"""Code in a fenced block that names its language is highlighted in every format, in the colours of one
table (`highlighting.KINDS`), each readable at WCAG AA on the code's ground: spans of pandoc's classes in
the html and epub (epubcheck and Ace pass), runs in pandoc's character styles in the docx (pandoc reads
the code back unchanged), the pdf's Typst by a theme of the same colours. A language nobody knows, and no
language, leave the code plain; the language's name, the author's text, never becomes markup."""

from __future__ import annotations

import html.parser
import io
import json
import plistlib
import re
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pikepdf
import pytest

from bindery.engine import highlighting, markup
from bindery.engine.docx_parts import styles
from bindery.engine.measures import Block
from bindery.engine.pdf import DESIGN
from bindery.engine.typeset import chapter_source
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export
from tests.validators import ace, epubcheck, pandoc, pdftotext

AREA = 'def area(r):\n    """The area."""\n    return 3.14159 * r ** 2  # pi r squared'
UNKNOWN = "def plain(x): return x"
BARE = "def bare(y): return y"
HOSTILE_NAME = "\"><script>alert(1)</script><b class='x"
NAMED = "def named(z): return z"
JAVA = 'class J { String s = "java"; } // never coloured'
BOOK = f"""# Code

A function:

```python
{AREA}
```

In a language nobody knows:

```nosuchlang
{UNKNOWN}
```

With none:

```
{BARE}
```

Named by a hostile author:

```{HOSTILE_NAME}
{NAMED}
```

In a language Pygments knows, but does not read in bounded work:

```java
{JAVA}
```
"""
# What Pygments makes of AREA, and the kind of each: every one the reader must see in its colour.
AREA_TOKENS = {
    "def": "kw",
    "area": "fu",
    '"""The area."""': "do",
    "return": "kw",
    "3.14159": "dv",
    "# pi r squared": "co",
}
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _contrast(colour: str, ground: str) -> float:
    """WCAG 2's contrast ratio of two sRGB colours (#rrggbb)."""

    def luminance(hex_colour: str) -> float:
        channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(colour), luminance(ground)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@pytest.mark.parametrize("kind", highlighting.KINDS, ids=lambda kind: kind.style)
def test_every_colour_of_the_table_reads_at_wcag_aa_on_the_code_s_ground(kind: highlighting.Kind) -> None:
    assert _contrast(kind.colour, highlighting.GROUND) >= 4.5, kind


def test_the_code_s_ground_is_the_pdf_s_in_every_format() -> None:
    luma = re.search(
        r"show raw\.where\(block: true\): it => block\([^)]*fill: luma\((\d+)\)", DESIGN.read_text()
    )
    assert luma is not None
    assert "#" + f"{int(luma.group(1)):02x}" * 3 == highlighting.GROUND
    assert f"pre{{background:{highlighting.GROUND}}}" in highlighting.css()
    source_code = re.search(r'w:styleId="SourceCode">.*?</w:style>', styles("en", False, False))
    assert source_code is not None and f'w:fill="{highlighting.GROUND[1:].upper()}"' in source_code.group(0)


def test_the_pdf_s_theme_gives_typst_the_table_s_colours_and_book_typ_names_it() -> None:
    theme = plistlib.loads(highlighting.theme().encode())
    scoped = {
        entry["name"]: entry["settings"]["foreground"] for entry in theme["settings"] if "scope" in entry
    }
    table = {kind.style: kind.colour for kind in highlighting.KINDS if kind.scopes}
    assert scoped == table and len(scoped) >= 8
    # Every colour of the table is some scope's: a kind of no scopes of its own shares a colour with one.
    assert {kind.colour for kind in highlighting.KINDS} == set(scoped.values())
    assert f'set raw(theme: "{highlighting.THEME}")' in DESIGN.read_text()


@pytest.mark.parametrize(
    "code",
    ["\n\nx = 1  \n\n", "\tif x:\n\t\treturn '\\t'\n", "x = 'never closed\n", "é = '→'  # ünïcode"],
)
def test_the_tokens_give_back_the_code_exactly(code: str) -> None:
    found = highlighting.pieces(code, "python")
    assert found is not None and "".join(value for _, value in found) == code


@pytest.mark.parametrize(
    "info", ["", "nosuchlang", "c" + "x" * 40, '"><script>', "c\u00e9", "c{.x}", "c,", "java", "rust"]
)
def test_code_in_no_language_pygments_knows_is_plain(info: str) -> None:
    assert highlighting.pieces("int x = 1;", info) is None
    assert highlighting.html("int x = 1;", info) == ""
    assert highlighting.word("int x = 1;", info, "") == ""


def test_the_language_is_the_info_string_s_first_word() -> None:
    found = highlighting.pieces("int x = 1;", "c {.numberLines} title")
    assert found is not None and found[0] == (highlighting.KINDS[0], "int")


def test_every_language_named_is_one_pygments_knows_by_that_name() -> None:
    from pygments.lexers import get_all_lexers

    known = {alias for _, aliases, _, _ in get_all_lexers(plugins=False) for alias in aliases}
    assert sorted(highlighting.LANGUAGES - known) == []


def test_a_block_with_a_line_past_the_bound_is_plain() -> None:
    assert highlighting.pieces("x = 1\n" + "y" * highlighting.MAX_LINE, "python") is not None
    assert highlighting.pieces("x = 1\n" + "y" * (highlighting.MAX_LINE + 1), "python") is None


def test_a_block_past_the_bound_is_plain_and_one_at_it_highlighted() -> None:
    line = "x = 1\n"
    at = line * (highlighting.MAX_CHARS // len(line))
    assert highlighting.pieces(at, "python") is not None
    assert highlighting.pieces(at + "y" * (highlighting.MAX_CHARS - len(at) + 1), "python") is None


def test_a_language_is_known_by_any_of_its_names_in_any_case() -> None:
    assert highlighting.pieces("int x;", "C++") is not None and highlighting.pieces("x = 1", "Py") is not None


class _Page(html.parser.HTMLParser):
    """Each `pre`'s `code`: its attributes, its text, and its spans (class, text); and every tag seen."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[dict[str, Any]] = []
        self.tags: list[str] = []
        self.span: str | None = None
        self.style = ""
        self.in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "code" and self.tags[-2:-1] == ["pre"]:
            self.blocks.append({"attrs": attrs, "text": "", "spans": []})
        elif tag == "span" and self.blocks and self.blocks[-1].get("open", True):
            self.span = dict(attrs).get("class")
            self.blocks[-1]["spans"].append((self.span, ""))
        self.in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "span":
            self.span = None
        if tag == "pre" and self.blocks:
            self.blocks[-1]["open"] = False
        self.in_style = False

    def handle_data(self, data: str) -> None:
        if self.in_style:
            self.style += data
        elif self.blocks and self.blocks[-1].get("open", True):
            self.blocks[-1]["text"] += data
            if self.span is not None:
                css, said = self.blocks[-1]["spans"][-1]
                self.blocks[-1]["spans"][-1] = (css, said + data)


def _read_page(page: str) -> tuple[_Page, dict[str, str]]:
    """The page, and the colour its CSS gives each class of span inside `pre`."""
    parsed = _Page()
    parsed.feed(page)
    parsed.close()
    return parsed, dict(re.findall(r"pre span\.(\w+)\{color:(#[0-9a-f]{6})\}", parsed.style))


def _check_page(page: _Page, colours: dict[str, str]) -> None:
    area, unknown, bare, named, java = page.blocks
    assert [block["text"] for block in page.blocks] == [
        AREA + "\n",
        UNKNOWN + "\n",
        BARE + "\n",
        NAMED + "\n",
        JAVA + "\n",
    ]
    spans = dict((said, css) for css, said in area["spans"])
    assert {said: spans.get(said) for said in AREA_TOKENS} == AREA_TOKENS
    table = {kind.css: kind.colour for kind in highlighting.KINDS}
    assert {said: colours[css] for said, css in AREA_TOKENS.items()} == {
        said: table[css] for said, css in AREA_TOKENS.items()
    }
    assert unknown["spans"] == [] and bare["spans"] == [] and named["spans"] == [] and java["spans"] == []
    # The hostile name is one attribute's value, as typed: no element or attribute came of it.
    assert named["attrs"] == [("class", "language-" + HOSTILE_NAME.split()[0])]  # (its first word)
    assert "script" not in page.tags and "b" not in page.tags


def test_the_html_colours_each_token_from_one_css_block_and_leaves_the_rest_plain(stack: Stack) -> None:
    _, data = export(stack, stack.create_book(BOOK), "html")
    page, colours = _read_page(data.decode())
    _check_page(page, colours)
    assert "style=" not in data.decode().split("</style>", 1)[1]  # colours by class alone


def test_the_epub_colours_each_token_and_passes_epubcheck_and_ace(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "epub")
    book = zipfile.ZipFile(io.BytesIO(data))
    page, _ = _read_page(book.read("OEBPS/chapter-000001.xhtml").decode())
    _, colours = _read_page(f"<style>{book.read('OEBPS/style.css').decode()}</style>")
    _check_page(page, colours)
    (tmp_path / "c.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "c.epub")
    violations, _ = ace(tmp_path / "c.epub", tmp_path / "ace")
    assert violations == []


def _code_runs(document: bytes) -> list[list[tuple[str, str]]]:
    """Each `SourceCode` paragraph's runs: (character style, text, a break as a line feed)."""
    blocks = []
    for paragraph in ElementTree.fromstring(document).iter(f"{W}p"):
        style = paragraph.find(f"{W}pPr/{W}pStyle")
        if style is None or style.get(f"{W}val") != "SourceCode":
            continue
        runs = []
        for run in paragraph.iter(f"{W}r"):
            run_style = run.find(f"{W}rPr/{W}rStyle")
            said = "".join("\n" if part.tag == f"{W}br" else part.text or "" for part in run)
            runs.append((run_style.get(f"{W}val", "") if run_style is not None else "", said))
        blocks.append(runs)
    return blocks


def test_the_docx_sets_each_token_in_pandoc_s_style_of_its_colour_and_pandoc_reads_the_code_back(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    package = zipfile.ZipFile(io.BytesIO(data))
    area, unknown, bare, named, java = _code_runs(package.read("word/document.xml"))
    assert "".join(said for _, said in area) == AREA
    runs = dict((said, style) for style, said in area)
    expected = {
        said: kind.style
        for kind in highlighting.KINDS
        for said, css in AREA_TOKENS.items()
        if kind.css == css
    }
    assert {said: runs.get(said) for said in AREA_TOKENS} == expected
    for plain in (unknown, bare, named, java):
        assert {style for style, _ in plain} == {"VerbatimChar"}
    styles_xml = ElementTree.fromstring(package.read("word/styles.xml"))
    colours = {}
    for style in styles_xml.iter(f"{W}style"):
        colour, based = style.find(f"{W}rPr/{W}color"), style.find(f"{W}basedOn")
        if colour is not None and based is not None:
            colours[style.get(f"{W}styleId")] = (colour.get(f"{W}val"), based.get(f"{W}val"))
    for kind in highlighting.KINDS:
        assert colours[kind.style] == (kind.colour[1:].upper(), "VerbatimChar"), kind
    (tmp_path / "c.docx").write_bytes(data)
    read = json.loads(pandoc("-f", "docx", "-t", "json", str(tmp_path / "c.docx")))
    code = [block["c"][1] for block in read["blocks"] if block["t"] == "CodeBlock"]
    assert code == [AREA, UNKNOWN, BARE, NAMED, JAVA]


def _fill_colours(path: Path) -> set[str]:
    """Every colour the pdf's pages fill with (`r g b sc`/`rg`), as #rrggbb."""
    found = set()
    with pikepdf.open(path) as pdf:
        for page in pdf.pages:
            for operands, operator in pikepdf.parse_content_stream(page):
                if str(operator) in ("sc", "scn", "rg") and len(operands) == 3:
                    found.add("#" + "".join(f"{round(float(value) * 255):02x}" for value in operands))
    return found


def test_the_pdf_colours_the_tokens_from_the_same_table_and_leaves_the_rest_plain(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, stack.create_book(BOOK), "pdf")
    (tmp_path / "c.pdf").write_bytes(data)
    text = pdftotext(tmp_path / "c.pdf")
    assert "def area(r):" in text and "def named(z): return z" in text
    table = {kind.css: kind.colour for kind in highlighting.KINDS}
    fills = _fill_colours(tmp_path / "c.pdf")
    # Typst reads the code its own way, and colours each token as the table's kind of it: a keyword, a
    # function's name, a string, a number and a comment of AREA, in the colours the html gives them.
    assert {table[css] for css in set(AREA_TOKENS.values())} <= fills
    # Typst is given the language only where the other formats highlight it: Java it knows, and sets plain.
    source = chapter_source(markup.parser().parse, BOOK, "ch1", Block(300, 500), None).source
    assert 'lang: "python"' in source and "lang:" not in source.replace('lang: "python"', "")
    # And none of Typst's own theme (its red, green, grey and blue), which it would use without ours.
    assert not fills & {"#d73a49", "#298e0d", "#8a8a8a", "#818181"}


def test_the_pdf_leaves_plain_a_block_every_other_format_leaves_plain() -> None:
    long = "x = 1\n" * (highlighting.MAX_CHARS // 6 + 1)
    wide = "x = " + "1" * highlighting.MAX_LINE + "\n"
    for code, coloured in ((long, False), (wide, False), ("x = 1\n", True)):
        source = chapter_source(
            markup.parser().parse, f"# C\n\n```python\n{code}```\n", "ch1", Block(300, 500), None
        )
        assert ('lang: "python"' in source.source) is coloured
        assert (highlighting.pieces(code, "python") is not None) is coloured
