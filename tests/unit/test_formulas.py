"""TeX math, as pandoc reads it (`$...$`, `$$...$$`), set in each format as its own readers know math:
MathML in the html and epub (epubcheck and Ace pass, and the package says the pages hold it), Typst's math
in the pdf (its text has the symbols, each formula a tagged Formula with its TeX as its alternative),
Word's equations in the docx (pandoc reads them back as the same math, LibreOffice opens them as formulas).
TeX that does not convert stays on the page as typed, and the build's warnings name it with its line."""

from __future__ import annotations

import io
import json
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pikepdf

from bindery.engine import formulas, markup
from tests.docx_checks import libreoffice_to_pdf
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export
from tests.validators import ace, epubcheck, pandoc, pdftotext

BOOK = r"""# Motion

Einstein wrote $E = mc^2$, and a sum: $$\sum_{i=0}^n i^2 = \frac{n(n+1)(2n+1)}{6}$$ That costs $5 and $10.

Roots $\sqrt{x}$ and $\sqrt[3]{y}$, $\vec{v}$, $\alpha + \beta$, $\left( \frac{a}{b} \right)$, $\binom{n}{k}$.

$$\begin{pmatrix} a & b \\ c & d \end{pmatrix}$$

Not read: $\nosuchcommand{x}$.

# Rest

No formulas here, and the page says none.
"""

# (a paragraph, the formulas pandoc reads in it)
READINGS = [
    "$x$ and $y$",
    "$5 and $10",
    "$ x$ and $x $",
    "$x$5 is not, $x$. is",
    r"\$x\$ escaped, $a\$b$ inside",
    "$$a + b$$ display, $$ $$ empty",
    "$x`$` and `$`x$",
    "a $b",
    "$a$$b$",
    "**$x^2$** and [$y$](u)",
]


def _pandoc_formulas(paragraphs: list[str]) -> list[list[tuple[str, str]]]:
    ast = json.loads(pandoc("-f", "markdown", "-t", "json", text="\n\n".join(paragraphs)))
    found: list[list[tuple[str, str]]] = []

    def walk(node: Any, into: list[tuple[str, str]]) -> None:
        if isinstance(node, dict):
            if node.get("t") == "Math":
                kind, tex = node["c"]
                into.append(("math_display" if kind["t"] == "DisplayMath" else "math_inline", tex))
                return
            for value in node.values():
                walk(value, into)
        elif isinstance(node, list):
            for value in node:
                walk(value, into)

    for block in ast["blocks"]:
        found.append([])
        walk(block, found[-1])
    return found


def _ours(paragraph: str) -> list[tuple[str, str]]:
    tokens = markup.parser().parse(paragraph, {})
    children = [child for token in tokens for child in token.children or []]
    return [(child.type, child.content) for child in children if child.type in formulas.KINDS]


def test_formulas_are_read_where_pandoc_reads_them() -> None:
    theirs = _pandoc_formulas(READINGS)
    assert len(theirs) == len(READINGS)
    for paragraph, expected in zip(READINGS, theirs, strict=True):
        assert _ours(paragraph) == expected, paragraph


def test_html_sets_mathml_with_the_tex_as_its_text_and_keeps_unread_tex_as_typed(stack: Stack) -> None:
    view, data = export(stack, stack.create_book(BOOK), "html")
    html = data.decode()
    maths = re.findall(r"<math .*?</math>", html)
    assert len(maths) == 9, maths
    sum_ = ElementTree.fromstring(next(m for m in maths if "sum_" in m))
    assert sum_.get("display") == "block" and sum_.get("alttext", "").startswith(r"\sum_{i=0}^n")
    mml = "{http://www.w3.org/1998/Math/MathML}"
    assert sum_.find(f".//{mml}annotation").text.startswith(r"\sum_{i=0}^n")  # type: ignore[union-attr]
    assert sum_.find(f".//{mml}mfrac") is not None and sum_.find(f".//{mml}munderover") is not None
    assert "$5 and $10" in html
    assert '<code class="math">$\\nosuchcommand{x}$</code>' in html
    warnings = [w for w in view["warnings"] if w["code"] == "math_unread"]
    assert warnings == [
        {
            "code": "math_unread",
            "chapter": 1,
            "chapter_title": "Motion",
            "line": 9,
            "tex": r"\nosuchcommand{x}",
        }
    ], view["warnings"]


def test_the_epub_says_which_pages_hold_mathml_and_passes_epubcheck_and_ace(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, stack.create_book(BOOK), "epub")
    book = zipfile.ZipFile(io.BytesIO(data))
    package = book.read("OEBPS/content.opf").decode()
    assert re.search(r'<item id="ch1" href="chapter-000001.xhtml" [^>]*properties="mathml"', package)
    assert re.search(
        r'<item id="ch2" href="chapter-000002.xhtml" media-type="application/xhtml\+xml"/>', package
    )
    assert '<meta property="schema:accessibilityFeature">MathML</meta>' in package
    assert "<math " in book.read("OEBPS/chapter-000001.xhtml").decode()
    (tmp_path / "m.epub").write_bytes(data)
    assert "0 fatals / 0 errors / 0 warnings" in epubcheck(tmp_path / "m.epub")
    violations, _ = ace(tmp_path / "m.epub", tmp_path / "ace")
    assert violations == []


def test_the_docx_holds_word_equations_that_pandoc_reads_back_as_the_same_math(
    stack: Stack, tmp_path: Path
) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    assert document.count("<m:oMath>") == 9 and document.count("<m:oMathPara>") == 2
    assert "<m:f>" in document and "<m:nary>" in document and "<m:rad>" in document
    (tmp_path / "m.docx").write_bytes(data)
    read = json.loads(pandoc("-f", "docx", "-t", "json", str(tmp_path / "m.docx")))
    found: list[list[str]] = [[] for _ in range(1)]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("t") == "Math":
                found[0].append(node["c"][1])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(read)
    tex = [" ".join(t.split()) for t in found[0]]
    assert len(tex) == 9, tex
    assert "E = mc^{2}" in tex and r"\sqrt[3]{y}" in tex and r"\binom{n}{k}" in tex
    assert any(t.startswith(r"\sum_{i = 0}^{n}i^{2} = \frac{n(n + 1)(2n + 1)}{6}") for t in tex), tex
    assert any(r"\begin{pmatrix}" in t for t in tex), tex
    assert r"\nosuchcommand" in pandoc("-f", "docx", "-t", "plain", str(tmp_path / "m.docx"))


def test_libreoffice_opens_the_docx_equations_as_formulas(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    (tmp_path / "m.docx").write_bytes(data)
    subprocess.run(
        ["soffice", "--headless", "--convert-to", "odt", "--outdir", str(tmp_path), str(tmp_path / "m.docx")],
        capture_output=True, timeout=180, check=True,
    )  # fmt: skip
    odt = zipfile.ZipFile(tmp_path / "m.odt")
    objects = [name for name in odt.namelist() if re.fullmatch(r"Object \d+/content.xml", name)]
    assert len(objects) == 9, odt.namelist()
    read = "".join(odt.read(name).decode() for name in objects)
    assert read.count('<math xmlns="http://www.w3.org/1998/Math/MathML"') == 9
    assert "<mfrac>" in read and "<msqrt>" in read
    libreoffice_to_pdf([tmp_path / "m.docx"], tmp_path / "pdf")
    assert "∑" in pdftotext(tmp_path / "pdf" / "m.pdf")


def test_the_pdf_sets_each_formula_as_a_tagged_formula_with_its_tex(stack: Stack, tmp_path: Path) -> None:
    view, data = export(stack, stack.create_book(BOOK), "pdf")
    (tmp_path / "m.pdf").write_bytes(data)
    text = pdftotext(tmp_path / "m.pdf")
    for symbol in ("∑", "√", "𝛼", "𝛽", "𝐸"):
        assert symbol in text, symbol
    assert "$\\nosuchcommand{x}$" in text and "$5 and $10" in text
    alts: list[str] = []
    with pikepdf.open(tmp_path / "m.pdf") as pdf:
        todo = [pdf.Root.StructTreeRoot]
        while todo:
            node = todo.pop()
            if node.get("/S") == pikepdf.Name.Formula:
                alts.append(str(node.get("/Alt")))
            kids = node.get("/K")
            for kid in kids if isinstance(kids, pikepdf.Array) else [kids] if kids is not None else []:
                if isinstance(kid, pikepdf.Dictionary):
                    todo.append(kid)
    assert len(alts) == 9 and "E = mc^2" in alts, alts
    assert [w["code"] for w in view["warnings"]] == ["math_unread"]


def test_a_formula_cannot_reach_typst_as_code(stack: Stack, tmp_path: Path) -> None:
    hostile = (
        '# T\n\n$\\text{"); #panic("no}$ and $#read("/etc/passwd") \\$ x$ and $a$b$ and $\\mathrm{a"b}$\n'
    )
    view, data = export(stack, stack.create_book(hostile), "pdf")
    (tmp_path / "h.pdf").write_bytes(data)
    text = pdftotext(tmp_path / "h.pdf")
    assert '"); #panic("no' in text and "root:" not in text
    assert not view.get("warnings"), view


def test_an_escaped_ampersand_and_a_backslash_are_read_and_an_unknown_command_is_not() -> None:
    assert formulas.tree(_token(r"a \& b")) is not None and formulas.tree(_token(r"\backslash x")) is not None
    assert formulas.tree(_token(r"\nosuchcommand x")) is None and formulas.tree(_token("a & b")) is None


def _token(tex: str) -> Any:
    [formula] = [
        c for t in markup.parser().parse(f"${tex}$") for c in t.children or [] if c.type in formulas.KINDS
    ]
    return formula


def test_a_formula_in_a_link_is_in_the_docx_hyperlink(stack: Stack) -> None:
    _, data = export(stack, stack.create_book("# L\n\n[see $x^2$ here](https://example.com)\n"), "docx")
    document = zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()
    link = re.search(r"<w:hyperlink [^>]*>(.*?)</w:hyperlink>", document, re.S)
    assert link is not None and "<m:oMath>" in link[1] and "see" in link[1], document
