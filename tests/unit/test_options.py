"""Export options: defaults filled in and shown, checked against what each format takes, part of what an
Idempotency-Key promises, and honoured by the build."""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.books import BOOKS
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import export
from tests.validators import _need


def _submit(stack: Stack, book: str, fmt: str, options: Any = None, key: str | None = None) -> Any:
    body: dict[str, Any] = {"format": fmt}
    if options is not None:
        body["options"] = options
    return stack.http(
        "POST", f"/books/{book}/exports", body=body, headers={"Idempotency-Key": key} if key else None
    )


def test_options_have_defaults_and_a_poll_shows_them(stack: Stack) -> None:
    book = stack.create_book()
    shown = {fmt: _submit(stack, book, fmt).body["options"] for fmt in ("markdown", "html", "epub", "pdf")}
    book_options = {"toc_depth": 1, "figure_numbers": "book", "typography": "on"}
    pdf = {"page_size": "a5", "reference_pages": "off", **book_options}
    assert shown == {"markdown": {}, "html": book_options, "epub": book_options, "pdf": pdf}
    export_id = _submit(stack, book, "pdf", {"page_size": "letter"}).body["id"]
    assert stack.poll(book, export_id).body["options"] == {**pdf, "page_size": "letter"}


@pytest.mark.parametrize(
    ("fmt", "options", "status", "code"),
    [
        ("html", {"page_size": "a4"}, 422, "unknown_option"),
        ("markdown", {"toc_depth": 2}, 422, "unknown_option"),
        ("pdf", {"page_size": "a3"}, 422, "invalid_option"),
        ("pdf", {"toc_depth": 4}, 422, "invalid_option"),
        ("epub", {"toc_depth": True}, 422, "invalid_option"),
        ("epub", {"toc_depth": "2"}, 422, "invalid_option"),
        ("html", ["toc_depth"], 400, "invalid_options"),
    ],
)
def test_an_unknown_option_or_value_is_refused_listing_the_known_ones(
    stack: Stack, fmt: str, options: Any, status: int, code: str
) -> None:
    book = stack.create_book()
    reply = _submit(stack, book, fmt, options)
    assert (reply.status, reply.body["error"]["code"]) == (status, code), reply.body
    if code == "unknown_option":
        assert "known" in reply.body["error"]
    if code == "invalid_option":
        assert reply.body["error"]["allowed"] and reply.body["error"]["field"].startswith("options.")
    assert stack.http("GET", f"/books/{book}/exports").body["exports"] == []


def test_options_given_as_null_are_refused_as_not_an_object(stack: Stack) -> None:
    """Left out, options are the format's defaults; given, they are a JSON object, and null is not one."""
    book = stack.create_book()
    reply = stack.http("POST", f"/books/{book}/exports", body={"format": "pdf", "options": None})
    assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_options"), reply.body
    assert "options must be a JSON object" in reply.body["error"]["message"]
    assert stack.http("GET", f"/books/{book}/exports").body["exports"] == []
    assert _submit(stack, book, "pdf").status == 202  # left out: the defaults


def test_options_are_part_of_what_an_idempotency_key_promises(stack: Stack) -> None:
    book = stack.create_book()
    first = _submit(stack, book, "pdf", {"page_size": "a4"}, key="k1")
    again = _submit(
        stack, book, "pdf", {"page_size": "a4", "toc_depth": 1}, key="k1"
    )  # the same, spelled out
    assert first.status == 202 and again.status == 202 and again.body["id"] == first.body["id"]
    other = _submit(stack, book, "pdf", {"page_size": "letter"}, key="k1")
    assert (other.status, other.body["error"]["code"]) == (422, "idempotency_key_reused")


@pytest.mark.parametrize("fmt", ["html", "epub", "pdf", "docx"])
def test_a_value_equal_to_an_allowed_one_becomes_it(fmt: str) -> None:
    """JSON's 2.0 is the integer 2 (as JSON Schema counts it): the options carry the 2 itself, never the
    float a renderer would print as "2.0"; a bool, a string or 2.5 is still refused."""
    from bindery import errors
    from bindery.engine import options_for

    chosen = options_for(fmt, {"toc_depth": 2.0})
    assert chosen["toc_depth"] == 2 and type(chosen["toc_depth"]) is int
    for bad in (True, "2", 2.5):
        with pytest.raises(errors.Unprocessable):
            options_for(fmt, {"toc_depth": bad})


def test_a_float_equal_to_an_allowed_value_is_shown_as_it_and_is_the_same_request(stack: Stack) -> None:
    book = stack.create_book()
    first = _submit(stack, book, "docx", {"toc_depth": 2.0}, key="k2")
    assert first.status == 202 and first.body["options"] == {
        "toc_depth": 2,
        "figure_numbers": "book",
        "typography": "on",
    }
    assert repr(first.body["options"]["toc_depth"]) == "2"  # not 2.0
    again = _submit(stack, book, "docx", {"toc_depth": 2}, key="k2")
    assert again.status == 202 and again.body["id"] == first.body["id"]


def _page_size(path: Path) -> tuple[float, float]:
    info = subprocess.run(
        [_need("pdfinfo", "poppler-utils"), str(path)], capture_output=True, text=True
    ).stdout
    found = re.search(r"Page size:\s+([\d.]+) x ([\d.]+) pts", info)
    assert found, info
    return round(float(found.group(1))), round(float(found.group(2)))


@pytest.mark.slow(8)
def test_the_build_honours_page_size_and_toc_depth(stack: Stack, tmp_path: Path) -> None:
    book = stack.create_book(BOOKS["features"])
    sizes = {}
    for page_size in ("a5", "a4", "letter", "6x9in"):
        _, data = export(stack, book, "pdf", {"page_size": page_size})
        (tmp_path / f"{page_size}.pdf").write_bytes(data)
        sizes[page_size] = _page_size(tmp_path / f"{page_size}.pdf")
    assert sizes == {"a5": (420, 595), "a4": (595, 842), "letter": (612, 792), "6x9in": (432, 648)}

    _, shallow = export(stack, book, "html")
    _, deep = export(stack, book, "html", {"toc_depth": 3})
    nav = re.compile(r'<nav class="toc">.*?</nav>', re.S)
    assert "A second level" not in nav.search(shallow.decode()).group(0)  # type: ignore[union-attr]
    deep_nav = nav.search(deep.decode()).group(0)  # type: ignore[union-attr]
    assert '<a href="#a-second-level">A second level</a>' in deep_nav  # (the id pandoc gives it)
    assert '<a href="#a-third-level">A third level</a>' in deep_nav

    _, epub = export(stack, book, "epub", {"toc_depth": 2})
    (tmp_path / "deep.epub").write_bytes(epub)
    with zipfile.ZipFile(tmp_path / "deep.epub") as package:
        toc = package.read("OEBPS/nav.xhtml").decode()
    assert re.search(r'href="chapter-\d{6}\.xhtml#a-second-level">A second level<', toc)
    # depth 2: ## shown, and ### in the navigation's hidden lists (a reading system's contents lists it)
    hidden = r'<ol hidden="hidden"><li><a href="chapter-\d{6}\.xhtml#a-third-level">A third level<'
    assert re.search(hidden, toc)

    from tests.validators import pdftotext

    _, pdf = export(stack, book, "pdf", {"toc_depth": 2})
    (tmp_path / "deep.pdf").write_bytes(pdf)
    contents = next(page for page in pdftotext(tmp_path / "deep.pdf").split("\f") if "Contents" in page)
    assert "A second level" in contents and "A third level" not in contents
