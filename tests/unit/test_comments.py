"""HTML comments are the author's notes to themselves: no format prints them, no line inside one cuts a
chapter or is read as anything, and a top-level one never closed is refused where it comes in, since it
would hide the rest of the book (bindery.engine.comments)."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from bindery import errors
from bindery.engine import Source, Text, comments, markup, renderer_for
from bindery.manuscript import cut_text
from tests.docx_checks import document_text
from tests.unit.conftest import Stack
from tests.validators import pandoc, pdftotext

CHAPTER = """# Chapter

Before <!-- SECRETINLINE --> after.

<!--
SECRETBLOCK

# Not a heading

- nor a list
-->

Visible text.
<!-- SECRETINTERRUPTS
## still inside
-->
<!-- SECRETTAIL --> Tail words.

> Quoted <!-- SECRETQUOTE --> on.

    <!-- code keeps it -->

`<!-- span keeps it -->`
"""
SHOWN = [
    "Before after.",
    "Visible text.",
    "Tail words.",
    "Quoted on.",
    "<!-- code keeps it -->",
    "<!-- span keeps it -->",
]


def _text(fmt: str, built: bytes, tmp_path: Path) -> str:
    """The words a reader of the format finds in it."""
    if fmt == "pdf":
        path = tmp_path / "book.pdf"
        path.write_bytes(built)
        return pdftotext(path)
    if fmt == "docx":
        path = tmp_path / "book.docx"
        path.write_bytes(built)
        return document_text(path)
    if fmt == "epub":
        with zipfile.ZipFile(io.BytesIO(built)) as package:
            pages = [package.read(n).decode() for n in package.namelist() if n.endswith(".xhtml")]
        html = "".join(pages)
    else:
        html = built.decode()
    # Tags and the entities they escape out; a comment the file kept as markup would still be read here.
    return re.sub(r"<(?!!--)[^>]*>", "", html).replace("&lt;", "<").replace("&gt;", ">")


@pytest.mark.parametrize("fmt", ["html", "epub", "docx", "pdf"])
def test_no_format_prints_a_comment_and_every_word_around_one_is_kept(fmt: str, tmp_path: Path) -> None:
    source = Source("abcdef0123456789abcd", "Comments", 1, ("Chapter",))
    out = io.BytesIO()
    renderer_for(fmt).render(source, [Text(1, "Chapter", CHAPTER)], out)
    words = " ".join(_text(fmt, out.getvalue(), tmp_path).split())
    assert "SECRET" not in words and "Not a heading" not in words and "nor a list" not in words
    assert "still inside" not in words
    for shown in SHOWN:
        assert shown in words, (shown, words[:2000])


def test_a_comment_gives_no_token_and_what_follows_its_close_is_a_paragraph() -> None:
    tokens = markup.parser().parse(CHAPTER)
    assert not [t for t in tokens if t.type.startswith("html")]
    assert [t.tag for t in tokens if t.type == "heading_open"] == ["h1"]
    inline = [t.content for t in tokens if t.type == "inline"]
    assert "Tail words." in inline and "Visible text." in inline


def test_a_comment_never_closed_inside_a_container_is_text_as_pandoc_prints_it() -> None:
    html = markup.parser().render("- item\n\n  <!-- open\n\n  # Heading in the item\n\nAfter.\n")
    assert "&lt;!-- open" in html and re.search(r"<h1( id=\"[^\"]+\")?>Heading in the item</h1>", html)


def test_an_opener_never_closed_after_a_paragraph_or_in_a_list_is_its_text() -> None:
    # It would have ended the paragraph (or the list) as a comment; with no closer it is the text it is.
    for manuscript in ("# One\n\ntext\n<!--\n# Two\n", "# One\n\n- item\n<!-- x\n# Two\n"):
        cut = cut_text(manuscript)
        assert [section.title for section, _ in cut] == ["One", "Two"]
        assert "<!--" in cut[0][1]


def test_a_heading_inside_a_comment_cuts_no_chapter_and_an_opening_of_comments_is_none() -> None:
    manuscript = "<!-- a note\n\n# Draft title\n-->\n\n# One\n\ntext\n\n<!--\n\n# Cut?\n\n-->\n\n# Two\n"
    assert [section.title for section, _ in cut_text(manuscript)] == ["One", "Two"]
    # An opener in a list item or after a paragraph, closed further on, hides what lies between too.
    for opened in ("- item\n<!-- x\n", "text\n<!--\n", "> quote\n<!--\n"):
        manuscript = f"# One\n\n{opened}# Hidden\n\nmore\n\n# Hidden too\n-->\n\n# Two\n"
        assert [section.title for section, _ in cut_text(manuscript)] == ["One", "Two"], opened


@pytest.mark.parametrize(
    ("manuscript", "line"),
    [
        ("# One\n\n<!-- never closed\n\n# Two\n\ntext\n", 3),
        ("<!--\n" + "# a\n" * 2000, 1),  # each heading inside it cut nothing, and the cut read them once
    ],
)
def test_a_top_level_comment_never_closed_is_refused_naming_its_line(manuscript: str, line: int) -> None:
    with pytest.raises(errors.Unprocessable) as refused:
        cut_text(manuscript)
    assert (refused.value.code, refused.value.details["line"]) == ("unclosed_comment", line)
    assert f"line {line} opens an HTML comment" in refused.value.message


def _error(reply: Any) -> dict[str, Any]:
    error: dict[str, Any] = reply.body["error"]
    return error


def test_a_manuscript_with_a_comment_never_closed_is_a_422_and_nothing_is_written(stack: Stack) -> None:
    book = stack.create_book()
    before = stack.http("GET", f"/books/{book}").body
    reply = stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "# A\n\n<!-- oops\n\n# B\n"})
    error = _error(reply)
    assert (reply.status, error["code"], error["line"]) == (422, "unclosed_comment", 3), reply.body
    assert stack.http("GET", f"/books/{book}").body == before
    created = stack.http("POST", "/books", body={"title": "T", "manuscript": "# A\n<!-- oops\n"})
    assert (created.status, _error(created)["code"]) == (422, "unclosed_comment")


def test_a_parse_looks_for_closers_once_however_many_openers_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each opener looking for its own `-->` to the end would read 10,000 openers' text 10,000 times over.
    scanned: list[int] = []
    find = comments._find_closers

    def counting(src: str) -> list[int]:
        scanned.append(len(src))
        return find(src)

    monkeypatch.setattr(comments, "_find_closers", counting)
    manuscript = "a <!--" * 5_000 + "\n\n" + "<!--\n" * 5_000 + "\n- b\n" + "  <!--\n" * 5_000
    tokens = markup.parser().parse(manuscript)
    assert "a <!--" in "".join(t.content for t in tokens)  # every opener is text: none is closed
    assert sum(scanned) <= 2 * len(manuscript)


def test_an_opener_closed_at_once_is_text_as_pandoc_reads_it_and_hides_nothing() -> None:
    # `<!-->` and `<!--->` hid the text up to a later `-->` (CommonMark 0.31 reads each as an empty comment).
    text = "Text with --> stray closer and <!--> empty comment and <!---> too.\n"
    html = markup.render(markup.parser(), text, "ch1").html
    assert (
        html == "<p>Text with --&gt; stray closer and &lt;!--&gt; empty comment and &lt;!---&gt; too.</p>\n"
    )
    said = pandoc("-f", "markdown", "-t", "plain", text=text)
    assert "empty comment and" in said and "too." in said
