"""Every file well-formed for every input the API accepts. Arbitrary Unicode (surrogates, C0 and C1 controls,
noncharacters, markdown's own characters and references among it) as a title, metadata and a manuscript
goes through the checks the API makes of each; what they refuse must be a character no book may hold (or
another rule's, named); what they accept is built in every format, and each XML part of the epub and the
docx is parsed by expat, which refuses what XML 1.0 does, and the html by the WHATWG parsing algorithm
(tinyhtml5, which comes with weasyprint), which must report no parse error."""

from __future__ import annotations

import io
import re
import unicodedata
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
import tinyhtml5.parser
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from bindery import errors
from bindery.engine import FORMATS, Source, Text, renderer_for
from bindery.manuscript import cut
from bindery.metadata import Metadata, check_title, merged
from bindery.normalising import normalise

# XML 1.0's Char production, as the standard writes it.
_XML_CHAR = re.compile("[\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_REFERENCE = re.compile(r"&#(?:[xX]([0-9a-fA-F]+)|([0-9]+));")
# What the WHATWG algorithm calls a parse error in the input stream and XML 1.0 allows (DEL, C1 controls,
# noncharacters): the API takes them, and an html reader keeps them as they are.
_HTML_FLAGS = re.compile(
    "[\x7f-\x9f\ufdd0-\ufdef"
    + "".join(chr(plane << 16 | 0xFFFE) + chr(plane << 16 | 0xFFFF) for plane in range(1, 17))
    + "]"
)
_NOT_XML_PARTS = (".css", ".png", ".jpg", ".jpeg", ".gif", ".webp")

# What XML 1.0 forbids, a sample of each kind: C0 controls, surrogates (lone, as JSON's \ud800 escape gives
# them), U+FFFE and U+FFFF; and references to them, which markdown reads as the characters they name.
_FORBIDDEN = ["\x00\x01\x08\x0b\x0c\x0e\x1b\x1f", "\ud800\udbff\udc00\udfff", "\ufffe\uffff"]
# (markdown-it reads most such references as U+FFFD; not a form feed's, in any of its spellings)
# (a link's title reads up to 8 digits); the others are here as what markdown-it reads as no such character.
_FORBIDDEN_REFERENCES = ["&#12;", "&#x0C;", "&#X0c;", "&#0012;", "&#00000012;", "&#x0000000c;", "&#x0B;"]
_FORBIDDEN_REFERENCES += ["&#xFFFF;", "&#0;", "&#55296;"]
_NOT_CHAR = "".join(chr(n) for n in range(0x20) if chr(n) not in "\t\n\r") + "\ufffe\uffff"
_EDGES = "\t\r\n \x7f\x80\x85\x9f\xa0\xad\u2028\u2029\u200f\u202e\ud7ff\ue000\ufdd0\ufeff\ufffd"
_EDGES += "\U00010000\U0001f600\U0001fffe\U0010ffff\u0301\u05d0\u0627\u4e2d"
_CONTROLS = "".join(chr(n) for n in [*range(0x20), *range(0x7F, 0xA0)])  # Unicode's Cc
_MARKUP = "#*_`~[](){}<>!&;|\\-=+:^\"'/. "
_REFERENCES = ["&#9;", "&#233;", "&#x1F600;", "&#65533;", "&#x85;", "&#xFDD0;", "&amp;", "&Tab;", "&NewLine;"]


def _allowed_text(max_size: int, without: str = "") -> st.SearchStrategy[str]:
    """Arbitrary text of what XML 1.0 allows, often an edge of it, one of markdown's marks or a reference;
    `without` what a field's own rule refuses (so that few examples are spent on that rule)."""
    anything = st.characters(exclude_categories=["Cs"], exclude_characters=_NOT_CHAR + without)
    edges = "".join(c for c in _EDGES if c not in without)
    alphabet = st.one_of(anything, st.sampled_from(edges), st.sampled_from(_MARKUP))
    piece = st.one_of(st.text(alphabet, min_size=1, max_size=max_size), st.sampled_from(_REFERENCES))
    return st.lists(piece, min_size=1, max_size=3).map("".join)


# What one of a book's inputs is given besides: any character at all (surrogates too), one XML 1.0 forbids,
# or a reference to one.
_INTRUDER = st.one_of(
    st.characters(exclude_categories=()),
    *(st.sampled_from(kind) for kind in _FORBIDDEN),
    st.sampled_from(_FORBIDDEN_REFERENCES),
)


@st.composite
def _spoiled(draw: st.DrawFn, text: str, markdown: bool = False) -> str:
    """`text` given one intruder; in `markdown`, more often a reference (markdown's way to a character)."""
    intruder = st.one_of(_INTRUDER, st.sampled_from(_FORBIDDEN_REFERENCES)) if markdown else _INTRUDER
    at = draw(st.integers(0, len(text)))
    return text[:at] + draw(intruder) + text[at:]


# Markdown's shapes, each slot filled with arbitrary text: a chapter title, alt text, a link's text, title
# and destination, a note, a table's cell, code, raw HTML (shown as text), a heading's setext underline.
_SHAPES = [
    "# {}", "## {}", "{}", "{}\n===", "- {}\n  - {}", "1. {}", "> {}\n> > {}", "    {}",
    "```{}\n{}\n```", "![{}](images/a.png)", '[{}](https://example.org/{} "{}")', "{}[^n]\n\n[^n]: {}",
    "| {} | {} |\n|---|---|\n| {} | x |", "`{}` *{}* **{}** ~~{}~~", "<{}> <https://example.org/{}>",
    "{}  \n{}\\\n{}", "[{}]\n\n[{}]: https://example.org/x '{}'",
]  # fmt: skip


@st.composite
def _manuscript(draw: st.DrawFn, spoil: bool) -> str:
    shapes = draw(st.lists(st.sampled_from(_SHAPES), min_size=1, max_size=6))
    slots = [draw(_allowed_text(12)) for shape in shapes for _ in range(shape.count("{}"))]
    if spoil:
        n = draw(st.integers(0, len(slots) - 1))
        slots[n] = draw(_spoiled(slots[n], markdown=True))
    filled = iter(slots)
    blocks = [shape.format(*(next(filled) for _ in range(shape.count("{}")))) for shape in shapes]
    return "\n\n".join(blocks) + "\n"


@st.composite
def _metadata(draw: st.DrawFn, spoil: bool) -> dict[str, Any]:
    """Every free-text field: a value starts with a letter, so a blank one is not what a refusal is of, and
    holds no CR or LF (a name is one line)."""
    value = _allowed_text(12, without="\r\n").map(lambda text: "x" + text)
    fields = {
        "authors": st.lists(value, min_size=1, max_size=2),
        "subjects": st.lists(value, min_size=1, max_size=2),
        "publisher": value,
        "description": value,
        "rights": value,
    }
    metadata: dict[str, Any] = {name: draw(made) for name, made in fields.items() if draw(st.booleans())}
    if spoil and metadata:
        name = draw(st.sampled_from(sorted(metadata)))
        if isinstance(metadata[name], list):
            n = draw(st.integers(0, len(metadata[name]) - 1))
            metadata[name][n] = draw(_spoiled(metadata[name][n]))
        else:
            metadata[name] = draw(_spoiled(metadata[name]))
    return metadata


@dataclass
class Book:
    title: str
    metadata: dict[str, Any]
    manuscript: str
    uploaded: bool  # sent as an upload's bytes (a lone surrogate is then invalid UTF-8), not in the body


@st.composite
def _books(draw: st.DrawFn) -> Book:
    """In half the books, one input is given one more character, often one XML 1.0 forbids or a
    reference to one; every text is otherwise arbitrary of what XML 1.0 allows."""
    spoil = draw(st.sampled_from([None, None, None, "title", "metadata", "manuscript"]))
    title = "T" + draw(_allowed_text(40, without=_CONTROLS))
    return Book(
        draw(_spoiled(title)) if spoil == "title" else title,
        draw(_metadata(spoil == "metadata")),
        draw(_manuscript(spoil == "manuscript")),
        draw(st.booleans()),
    )


@dataclass
class Accepted:
    title: str
    metadata: Metadata
    data: bytes  # the manuscript as Bindery keeps it


def _accepted(book: Book) -> Accepted:
    """What the API makes of the book: its body's check (a lone surrogate in a string is invalid_unicode),
    the title's, the metadata's and the manuscript's (`bindery.normalising.Normalised`), in that order;
    a refusal raises."""
    for name, value in [("title", book.title), ("manuscript", book.manuscript)]:
        if not book.uploaded or name == "title":
            try:
                value.encode()
            except UnicodeEncodeError:
                raise errors.BadRequest(name, code="invalid_unicode", field=name) from None
    check_title(book.title)
    metadata = merged(Metadata(), book.metadata)
    # An upload's bytes may be anything: a surrogate in them is invalid UTF-8, read as U+FFFD.
    return Accepted(book.title.strip(), metadata, normalise(book.manuscript.encode("utf-8", "surrogatepass")))


def _forbidden(character: str) -> bool:
    return _XML_CHAR.fullmatch(character) is None


def _assert_refusal_is_justified(book: Book, refusal: errors.BinderyError) -> None:
    """A refusal names a character no book may hold, where it is; or it is another rule's, and the input
    breaks that rule."""
    details = refusal.details
    if refusal.code == "invalid_unicode":
        value = book.title if details["field"] == "title" else book.manuscript
        assert any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    elif refusal.code == "invalid_character":
        line = book.manuscript.encode("utf-8", "surrogatepass").splitlines()[details["line"] - 1]
        text = line.decode("utf-8", "replace")
        at = (text.removeprefix("\ufeff") if details["line"] == 1 else text)[details["column"] - 1 :]
        reference = _REFERENCE.match(at)
        named = chr(int(reference[1] or reference[2], 16 if reference[1] else 10)) if reference else at[0]
        assert _forbidden(named) and details["code_point"] == f"U+{ord(named):04X}", (at[:10], details)
    elif "code_point" in details:
        code_point = details["code_point"]
        named = chr(int(code_point[2:], 16))
        assert code_point in refusal.message
        if (
            refusal.code == "invalid_title"
        ):  # or a control character: XML 1.0 allows tab, CR and C1, a title not
            assert _forbidden(named) or unicodedata.category(named) == "Cc", refusal.message
            assert named in book.title
        else:  # or metadata's control character XML 1.0 allows but LF and tab: a CR, DEL, a C1 control
            assert _forbidden(named) or (unicodedata.category(named) == "Cc" and named not in "\n\t"), (
                refusal.message
            )
    else:  # a name of more than one line
        assert refusal.code == "invalid_metadata", refusal.message
        values: list[str] = []
        for value in book.metadata.values():
            values += value if isinstance(value, list) else [value]
        assert any("\r" in v or "\n" in v for v in values), refusal.message


def _piece(data: bytes, offset: int, length: int) -> bytes:
    return data[offset : offset + length]


def _build(accepted: Accepted, fmt: str) -> bytes:
    """The book built as a build does, its chapters read from the kept bytes."""
    data = accepted.data
    sections = list(cut(data.splitlines(keepends=True)))
    source = Source(
        "abcdef0123456789abcd",
        accepted.title,
        1,
        tuple(s.title for s in sections),
        1.8e9,
        metadata=accepted.metadata,
    )
    texts = [
        Text(n, s.title, load=partial(_piece, data, s.offset, s.length), size=s.length)
        for n, s in enumerate(sections, start=1)
    ]
    out = io.BytesIO()
    report = renderer_for(fmt).render(source, texts, out)
    assert report.skipped == [], fmt
    return out.getvalue()


def _assert_parts_are_well_formed(fmt: str, file: bytes) -> set[str]:
    """Each XML part of an epub or docx, parsed strictly: expat refuses a character XML 1.0 forbids, as
    itself or as a reference. Returns the parts parsed."""
    parsed = set()
    with zipfile.ZipFile(io.BytesIO(file)) as package:
        for name in package.namelist():
            if name == "mimetype" or name.endswith(_NOT_XML_PARTS):
                continue
            try:
                ET.fromstring(package.read(name))
            except ET.ParseError as exc:
                raise AssertionError(f"{fmt} {name}: {exc}") from None
            parsed.add(name)
    return parsed


# The parts that carry the author's text: the cover, title page, a chapter, the contents and the package.
_TEXT_PARTS = {
    "epub": {
        "OEBPS/cover.svg",
        "OEBPS/cover.xhtml",
        "OEBPS/title.xhtml",
        "OEBPS/chapter-000001.xhtml",
        "OEBPS/nav.xhtml",
        "OEBPS/content.opf",
    },
    "docx": {"word/document.xml", "word/footnotes.xml", "docProps/core.xml"},
}


def _assert_html_parses_without_error(page: bytes) -> None:
    """No parse error but one for each code point XML 1.0 allows and the WHATWG algorithm flags (a C0
    control that got through would be one more, or a broken tag, another kind)."""
    parser = tinyhtml5.parser.HTMLParser()
    text = page.decode()
    parser.parse(text)
    kinds = [kind for _, kind, _ in parser.errors]
    assert kinds == ["invalid-codepoint"] * len(_HTML_FLAGS.findall(text)), parser.errors[:3]


# Every format, in one property or the other: the pdf's, set by Typst, costs many times the rest.
_TEXT_FORMATS = ("markdown", "html", "epub", "docx")
_SET_FORMATS = ("pdf",)


def _check(book: Book, formats: tuple[str, ...]) -> None:
    note(repr(book))
    try:
        accepted = _accepted(book)
    except errors.BinderyError as refusal:
        event(f"refused: {refusal.code}")
        _assert_refusal_is_justified(book, refusal)
        return
    if not list(cut(accepted.data.splitlines(keepends=True))):
        event("accepted, no chapters (an export fails empty_book, nothing built)")
        return
    event("accepted and built")
    for fmt in formats:
        file = _build(accepted, fmt)
        if fmt in ("epub", "docx"):
            assert _assert_parts_are_well_formed(fmt, file) >= _TEXT_PARTS[fmt]
        elif fmt == "html":
            _assert_html_parses_without_error(file)
        elif fmt == "markdown":  # (a build copies the kept bytes; its renderer reads them as text does)
            assert file == accepted.data.decode("utf-8", "replace").encode()
        else:
            assert file.startswith(b"%PDF-") and file.rstrip().endswith(b"%%EOF")


@pytest.mark.slow(10)
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_books())
def test_every_xml_and_html_file_is_well_formed_for_every_input_the_api_accepts(book: Book) -> None:
    _check(book, _TEXT_FORMATS)


@pytest.mark.slow(5)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_books())
def test_every_pdf_builds_for_every_input_the_api_accepts(book: Book) -> None:
    """Typst reads the text as data (engine.literals), not XML: this holds that arbitrary text sets."""
    _check(book, _SET_FORMATS)


def test_every_format_is_built_by_one_of_the_properties() -> None:
    assert sorted(_TEXT_FORMATS + _SET_FORMATS) == sorted(FORMATS)
