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
    ("`&#x1B;` &#0;\n", 1, 2, "U+001B"),  # in code too: one rule, wherever it is
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


@pytest.mark.parametrize("value", ["A\uffffB", "A\ufffeB", "A\x0bB"])
def test_a_title_holding_a_character_xml_forbids_is_a_400_naming_its_place_and_code_point(
    stack: Stack, value: str
) -> None:
    """A control character was refused before, unnamed; U+FFFE and U+FFFF were taken. (A lone surrogate,
    the JSON escape \\ud800, is the body's invalid_unicode, test_input_bounds.)"""
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
        why = "is not allowed in a book (XML 1.0 forbids it); remove it"
        assert error["message"] == f"title, character 2: {code_point} {why}"
    assert _everything(stack) == before


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


def test_every_code_point_is_refused_in_a_manuscript_exactly_when_xml_forbids_it() -> None:
    """As itself in UTF-8, and as a decimal or hex reference with or without leading zeros: the bytes'
    check, the reference pattern and the text's check all agree with Char."""
    for number in [*range(0x11000), *range(0x11000, 0x110000, 97), 0x10FFFF]:
        character = chr(number)
        allowed = _allowed(character)
        assert (first_forbidden(f"a{character}") is None) == allowed, hex(number)
        if not 0xD800 <= number <= 0xDFFF:  # no UTF-8 holds one
            found = _refusal([f"a{character}b\n".encode()])
            assert found == (None if allowed else (1, 2, f"U+{number:04X}")), hex(number)
        for reference in (f"&#{number};", f"&#x{number:X};", f"&#X00{number:x};", f"&#00{number};"):
            found = _refusal([f"a{reference}b\n".encode()])
            assert found == (None if allowed else (1, 2, f"U+{number:04X}")), reference
    for near_miss in ("&#12", "&#1 2;", "&#x;", "&#;", "&#123;", "&#xC0;", "&#x1G;", "&amp;#12;"):
        assert _refusal([near_miss.encode() + b"\n"]) is None, near_miss


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
