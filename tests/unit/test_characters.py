"""A character XML 1.0 forbids is refused where it comes in, with where it is: a manuscript's (inline or
uploaded) by its line, column and code point, a title's or a metadata field's by the field. So no format's
writer meets one (`test_well_formed` builds every format from what is accepted)."""

from __future__ import annotations

import json
import re
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it.common.utils import isValidEntityCode, unescapeAll
from markdown_it.rules_inline.entity import DIGITAL_RE

from bindery import errors
from bindery.characters import check_lines, first_forbidden
from bindery.objects import upload_key
from tests.unit.conftest import Stack

# XML 1.0's Char production, as the standard writes it: what the checks are held to.
_XML_CHAR = re.compile("[\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _allowed(character: str) -> bool:
    return _XML_CHAR.fullmatch(character) is not None


def _everything(stack: Stack) -> tuple[list[Any], list[str]]:
    """Every item and every key: what 'nothing was written' compares."""
    table = stack.exports.settings.table
    items = boto3.client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(items, key=json.dumps), sorted(stack.objects.keys(""))


def _error(reply: Any) -> dict[str, Any]:
    error: dict[str, Any] = reply.body["error"]
    return error


# (manuscript, line, column, code point): lines counted as the caller's file has them (a BOM, CRLF and lone
# CR endings, leading blank lines that normalising drops), columns in characters, not bytes.
FORBIDDEN_IN_MANUSCRIPTS = [
    ("# One\n\nfine\n\nab\x0bc\n", 5, 3, "U+000B"),
    ("\ufeff\r\n# A\r\n\r\n\u4e2d\u6587\x1b\r\n", 4, 3, "U+001B"),
    ("a\rb\r\x00", 3, 1, "U+0000"),
    ("# Caf\u00e9 \uffff\n", 1, 8, "U+FFFF"),
    ("x\n" * 1500 + "\u00e9\ufffe\n", 1501, 2, "U+FFFE"),  # past the first batch of lines checked at once
    ("# A\n\nA form feed: &#12;\n", 3, 14, "U+000C"),  # markdown-it reads it as U+000C itself
    ("`&#xC;` &#0;\n", 1, 2, "U+000C"),  # in code too: one rule, wherever it is
]


@pytest.mark.parametrize(("manuscript", "line", "column", "code_point"), FORBIDDEN_IN_MANUSCRIPTS)
@pytest.mark.parametrize("route", ["POST /books", "PUT manuscript", "PUT upload"])
def test_a_manuscript_holding_a_character_xml_forbids_is_a_422_naming_line_column_and_code_point(
    stack: Stack, route: str, manuscript: str, line: int, column: int, code_point: str
) -> None:
    book = stack.create_book()
    if route == "POST /books":
        before = _everything(stack)
        reply = stack.http("POST", "/books", body={"title": "T", "manuscript": manuscript})
    elif route == "PUT manuscript":
        before = _everything(stack)
        reply = stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": manuscript})
    else:
        upload = stack.http("POST", f"/books/{book}/uploads").body["upload_id"]
        stack.objects.put_bytes(upload_key(book, upload), manuscript.encode())
        before = _everything(stack)
        reply = stack.http("PUT", f"/books/{book}/manuscript", body={"upload_id": upload})
    error = _error(reply)
    assert (reply.status, error["code"]) == (422, "invalid_character"), reply.body
    assert (error["line"], error["column"], error["code_point"]) == (line, column, code_point)
    assert error["message"].startswith(f"line {line}, column {column}: ")
    assert code_point in error["message"] and "remove it" in error["message"]
    assert _everything(stack) == before  # no revision, chapter, cut or marker


def test_a_manuscript_of_every_character_xml_allows_is_accepted(stack: Stack) -> None:
    """The edges of Char, and what HTML or Unicode frown on but XML 1.0 allows (DEL, C1 controls,
    noncharacters past the BMP's last two, a BOM inside the text, references to allowed characters)."""
    allowed = "\t\x20\x7f\x80\x9f\ud7ff\ue000\ufdd0\ufeff\ufffd\U00010000\U0001fffe\U0010ffff"
    manuscript = f"# Edges {allowed} end\n\ntext\r{allowed} &#9; &#13; &#x20; &#65533; &#xFFFD; &#1114111;\n"
    book = stack.create_book(manuscript)
    assert stack.http("GET", f"/books/{book}").body["chapters"][0]["title"] == f"Edges {allowed} end"


_FORBIDDEN_WHY = "is not allowed in a book (XML 1.0 forbids it); remove it"
_CONTROL_WHY = "is a control character; remove it"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        # A control character XML forbids was refused before, unnamed; U+FFFE and U+FFFF were taken. (A lone
        # surrogate, the JSON escape \ud800, is the body's invalid_unicode, test_input_bounds.)
        *((value, _FORBIDDEN_WHY) for value in ["A\uffffB", "A\ufffeB", "A\x0bB"]),
        # XML 1.0 allows tab, LF, CR, DEL and the C1 controls, but a title is one line of text.
        *((value, _CONTROL_WHY) for value in ["A\tB", "A\nB", "A\rB", "A\x7fB", "A\x85B"]),
    ],
)
def test_a_title_holding_a_character_it_may_not_is_a_400_naming_its_place_and_code_point(
    stack: Stack, value: str, why: str
) -> None:
    book = stack.create_book()
    before = _everything(stack)
    for reply in [
        stack.http("POST", "/books", body={"title": value, "manuscript": "# A\n"}),
        stack.http("PATCH", f"/books/{book}", body={"title": value}),
    ]:
        error = _error(reply)
        assert (reply.status, error["code"], error["field"]) == (400, "invalid_title", "title"), reply.body
        code_point = f"U+{ord(value[1]):04X}"
        assert error["code_point"] == code_point
        assert error["message"] == f"title, character 2: {code_point} {why}"
    assert _everything(stack) == before


@pytest.mark.parametrize(
    ("field", "value", "code_point", "at"),
    [
        ("description", "One.\r\nTwo.", "U+000D", 5),
        ("publisher", "  P\rQ", "U+000D", 4),  # counted in the value as sent, before its ends are trimmed
        ("rights", "r\x0bs", "U+000B", 2),  # one XML forbids: named as such
    ],
)
def test_a_metadata_control_character_is_a_422_naming_the_field_and_code_point(
    stack: Stack, field: str, value: str, code_point: str, at: int
) -> None:
    reply = stack.http(
        "POST", "/books", body={"title": "T", "manuscript": "# A\n", "metadata": {field: value}}
    )
    error = _error(reply)
    assert (reply.status, error["code"], error["field"]) == (422, "invalid_metadata", f"metadata.{field}")
    assert error["code_point"] == code_point
    assert error["message"].startswith(f"metadata.{field} at character {at}: {code_point} ")


def test_a_description_of_paragraphs_and_tabs_is_kept_as_given(stack: Stack) -> None:
    """LF and tab are a description's (pandoc's dc:description holds paragraphs); the writers escape it."""
    description = "First paragraph.\n\nSecond,\twith a tab."
    book = stack.create_book()
    reply = stack.http("PATCH", f"/books/{book}", body={"metadata": {"description": description}})
    assert reply.status == 200, reply.body
    assert stack.http("GET", f"/books/{book}").body["metadata"]["description"] == description


@pytest.mark.parametrize(
    ("metadata", "field", "code_point"),
    [
        ({"authors": ["Ada\uffff"]}, "metadata.authors[0]", "U+FFFF"),
        ({"subjects": ["ok", "\ufffe"]}, "metadata.subjects[1]", "U+FFFE"),
        ({"description": "x\ud800"}, "metadata.description", "U+D800"),
        ({"publisher": "\udfffP"}, "metadata.publisher", "U+DFFF"),
        ({"rights": "r\x0b"}, "metadata.rights", "U+000B"),
    ],
)
def test_metadata_holding_a_character_xml_forbids_is_a_422_naming_the_field_and_code_point(
    stack: Stack, metadata: dict[str, Any], field: str, code_point: str
) -> None:
    book = stack.create_book()
    before = _everything(stack)
    for reply in [
        stack.http("POST", "/books", body={"title": "T", "manuscript": "# A\n", "metadata": metadata}),
        stack.http("PATCH", f"/books/{book}", body={"metadata": metadata}),
    ]:
        error = _error(reply)
        assert (reply.status, error["code"], error["field"]) == (422, "invalid_metadata", field), reply.body
        assert error["code_point"] == code_point and code_point in error["message"]
    assert _everything(stack) == before


# ---- the check itself ---------------------------------------------------------------------------------


def _refusal(lines: list[bytes]) -> tuple[int, int, str] | None:
    try:
        check_lines(lines, 1)
    except errors.Unprocessable as exc:
        assert exc.code == "invalid_character"
        return exc.details["line"], exc.details["column"], exc.details["code_point"]
    return None


def _markdown_it_reads(reference: str) -> set[str]:
    """What markdown-it makes of `reference` wherever it reads one: in text (its entity rule: 1-7 decimal
    digits or 1-6 hex, U+FFFD for a code it holds invalid) and in a link's destination or title, a
    definition's, or a fence's info (unescapeAll: 1-8 digits, left as written when invalid)."""
    read = {unescapeAll(reference)}
    if (found := DIGITAL_RE.fullmatch(reference)) is not None:
        digits = found.group(1)
        code = int(digits[1:], 16) if digits[0] in "xX" else int(digits)
        read.add(chr(code) if isValidEntityCode(code) else "\ufffd")
    return read


def test_every_code_point_is_refused_in_a_manuscript_exactly_when_xml_forbids_it() -> None:
    """As itself in UTF-8 (the bytes' check and the text's agree with Char), and as a decimal or hex
    reference, with or without leading zeros: refused exactly when markdown-it reads it, somewhere, as a
    character Char does not hold."""
    for number in [*range(0x11000), *range(0x11000, 0x110000, 97), 0x10FFFF]:
        character = chr(number)
        allowed = _allowed(character)
        assert (first_forbidden(f"a{character}") is None) == allowed, hex(number)
        if not 0xD800 <= number <= 0xDFFF:  # no UTF-8 holds one
            found = _refusal([f"a{character}b\n".encode()])
            assert found == (None if allowed else (1, 2, f"U+{number:04X}")), hex(number)
        for reference in (f"&#{number};", f"&#x{number:X};", f"&#X00{number:x};", f"&#00{number};"):
            read = _markdown_it_reads(reference)
            forbidden = [r for r in read if len(r) == 1 and not _allowed(r)]
            found = _refusal([f"a{reference}b\n".encode()])
            assert found == ((1, 2, f"U+{ord(forbidden[0]):04X}") if forbidden else None), reference
    for near_miss in ("&#12", "&#1 2;", "&#x;", "&#;", "&#123;", "&#xC0;", "&#x1G;", "&amp;#12;"):
        assert _refusal([near_miss.encode() + b"\n"]) is None, near_miss


@pytest.mark.parametrize(
    ("reference", "refused"),
    [
        ("&#12;", True),
        ("&#0000012;", True),  # 7 digits: markdown-it's text reads it
        ("&#00000012;", True),  # 8: its link titles read it (unescapeAll)
        ("&#000000012;", False),  # 9: nowhere
        ("&#xC;", True),
        ("&#x00000c;", True),
        ("&#X0000000C;", True),  # 8 hex digits: link titles
        ("&#x00000000C;", False),
        ("&#0;", False),  # U+FFFD in text, left as written in a title: no forbidden character
        ("&#x0;", False),
        ("&#xD800;", False),
        ("&#57343;", False),
        ("&#xFFFE;", False),
        ("&#65535;", False),
        ("&#x1B;", False),
        ("&#8;", False),
        ("&#x7F;", False),
    ],
)
def test_a_reference_is_refused_exactly_when_markdown_it_reads_it_as_a_forbidden_character(
    reference: str, refused: bool
) -> None:
    """Only a form feed, of the characters XML 1.0 forbids, is a code markdown-it decodes (isValidEntityCode
    makes every other U+FFFD); the rest is how many digits it reads."""
    from bindery.engine.markup import parser

    md = parser(xhtml=True)
    rendered = md.render(f"a {reference} b\n") + md.render(f'[l](/u "t{reference}")\n')
    assert ("\x0c" in rendered) == refused, rendered
    assert _refusal([f"a {reference} b\n".encode()]) == ((1, 3, "U+000C") if refused else None)


_LINE_ENDS = st.sampled_from(["\n", "\r\n", "\r", ""])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.text(st.characters(exclude_categories=["Cs"]), max_size=30), _LINE_ENDS)))
def test_a_refusal_names_the_first_forbidden_characters_line_and_column(
    pieces: list[tuple[str, str]],
) -> None:
    """Lines as the manuscript's reader splits them (bytes.splitlines: LF, CR, CRLF), and the place of the
    first forbidden character as the text's own check finds it, counted in characters."""
    lines = "".join(text + end for text, end in pieces).encode().splitlines(keepends=True)
    expected = None
    for number, line in enumerate(lines, start=1):
        found = first_forbidden(line.decode())
        if found is not None:
            expected = (number, found.index + 1, found.code_point)
            break
    assert _refusal(lines) == expected
