"""pandoc's `custom-style` (issue 48): a div's `{custom-style="Poetry"}` is a Word paragraph style of that
name for the paragraphs it holds, a span's `[words]{custom-style="Emphatic"}` a character style, each
defined in the document's styles (on Body Text, for a paragraph's) so an editor restyles them in Word; pandoc
reads them back as the same custom styles."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

from tests.docx_checks import pandoc_elements
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export
from tests.validators import pandoc

BOOK = """# Verse

::: {custom-style="Poetry"}
The lamp is lit at dusk.

And trimmed at four.
:::

A line with [these words]{custom-style="Emphatic Words"} styled, and [a link](https://example.com).

::: {custom-style="Body Text"}
A style the document has already.
:::
"""


def test_custom_styles_are_word_styles_defined_in_the_document(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(BOOK), "docx")
    package = zipfile.ZipFile(io.BytesIO(data))
    document = package.read("word/document.xml").decode()
    styles = package.read("word/styles.xml").decode()
    paragraphs = re.findall(r'<w:pStyle w:val="Poetry"/>.*?</w:p>', document, re.S)
    assert len(paragraphs) == 2 and "dusk" in paragraphs[0] and "four" in paragraphs[1]
    assert re.search(r'<w:rStyle w:val="EmphaticWords"/>(?:(?!</w:r>).)*these words', document, re.S)
    assert (
        '<w:style w:type="paragraph" w:customStyle="1" w:styleId="Poetry"><w:name w:val="Poetry"/>' in styles
    )
    assert '<w:style w:type="character" w:customStyle="1" w:styleId="EmphaticWords">' in styles
    assert styles.count('w:styleId="BodyText"') == 1  # (a style the document has is not made again)
    (tmp_path / "s.docx").write_bytes(data)
    ast = json.loads(pandoc("-f", "docx+styles", "-t", "json", str(tmp_path / "s.docx")))
    named = {dict(attrs[2]).get("custom-style") for attrs, _ in pandoc_elements(ast, "Div")}
    named |= {dict(attrs[2]).get("custom-style") for attrs, _ in pandoc_elements(ast, "Span")}
    assert {"Poetry", "Emphatic Words"} <= named, named


CLASSED = """# Classes

::: poem
Whose woods these are.
:::

::: warning
An aside keeps its own style.
:::

A [defined term]{.term} and [small words]{.smallcaps} and [both]{.smallcaps .gloss}.
"""


def test_any_other_class_is_a_named_style_in_the_docx(stack: Stack, tmp_path: Path) -> None:
    _, data = export(stack, stack.create_book(CLASSED), "docx")
    package = zipfile.ZipFile(io.BytesIO(data))
    document = package.read("word/document.xml").decode()
    styles = package.read("word/styles.xml").decode()
    assert re.search(r'<w:pStyle w:val="poem"/>(?:(?!</w:p>).)*Whose woods', document, re.S)
    assert re.search(r'<w:pStyle w:val="Warning"/>(?:(?!</w:p>).)*own style', document, re.S)
    assert re.search(r'<w:rStyle w:val="term"/>(?:(?!</w:r>).)*defined term', document, re.S)
    assert re.search(r'<w:rStyle w:val="gloss"/>(?:(?!</w:r>).)*both', document, re.S)
    assert 'w:styleId="smallcaps"' not in styles and 'w:styleId="warning"' not in styles
    assert '<w:style w:type="paragraph" w:customStyle="1" w:styleId="poem"><w:name w:val="poem"/>' in styles
    (tmp_path / "c.docx").write_bytes(data)
    ast = json.loads(pandoc("-f", "docx+styles", "-t", "json", str(tmp_path / "c.docx")))
    named = {dict(attrs[2]).get("custom-style") for attrs, _ in pandoc_elements(ast, "Div")}
    named |= {dict(attrs[2]).get("custom-style") for attrs, _ in pandoc_elements(ast, "Span")}
    assert {"poem", "term", "gloss"} <= named, named


def test_a_class_naming_a_style_of_the_other_type_is_its_pair_and_case_is_one_name(stack: Stack) -> None:
    book = (
        "# Pairs\n\n::: TERM\nA poem.\n:::\n\nA [note]{.Note}, a [term]{.term}, a [keyword]{.KeywordTok}.\n\n"
        "::: Hyperlink\nLinked.\n:::\n"
    )
    _, data = export(stack, stack.create_book(book), "docx")
    package = zipfile.ZipFile(io.BytesIO(data))
    document = package.read("word/document.xml").decode()
    styles = package.read("word/styles.xml").decode()
    kinds = dict((i, t) for t, i in re.findall(r'<w:style w:type="(\w+)"[^>]*w:styleId="([^"]+)"', styles))
    used = {("paragraph", i) for i in re.findall(r'<w:pStyle w:val="([^"]+)"', document)}
    used |= {("character", i) for i in re.findall(r'<w:rStyle w:val="([^"]+)"', document)}
    assert all(kinds.get(i) == t for t, i in used), [
        (t, i, kinds.get(i)) for t, i in used if kinds.get(i) != t
    ]
    assert {("character", "NoteChar"), ("character", "termChar"), ("character", "KeywordTok")} <= used
    assert ("paragraph", "HyperlinkPara") in used and ("paragraph", "TERM") in used
    names = [n.lower() for n in re.findall(r'<w:name w:val="([^"]+)"', styles)]
    assert len(names) == len(set(names))  # (Word's names are one whatever their case)
