"""The streaming cutter agrees with markdown-it-py parsing the whole (normalised) manuscript at once; the
normaliser changes line endings and outer blank lines, never what the markdown means."""

from __future__ import annotations

import hashlib
import io
import itertools
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import bindery.manuscript as manuscript_module
from bindery import errors
from bindery.engine import comments, crossrefs, headings, markup
from bindery.engine import spans as spans_module
from bindery.engine.anchors import Anchors
from bindery.engine.pandoc_tables import MAX_TABLE_LINES
from bindery.front_matter import split
from bindery.manuscript import OPENING_TITLE, cut, cut_text
from bindery.normalising import Normalised, normalise
from tests.books import BOOKS


def _text(manuscript: str) -> tuple[str, int]:
    """The normalised text after the front matter (pandoc's: no chapter), and the lines the front matter
    takes."""
    data = normalise(manuscript.encode())
    head, _ = split(iter(data.splitlines(keepends=True)))
    return data[len(b"".join(head)) :].decode(), len(head)


def _whole_parse(manuscript: str) -> list[tuple[str, str]] | tuple[str, int]:
    """The oracle: the renderers' markdown-it over the whole normalised text after any front matter, cut at
    every top-level h1; or the refusal of a top-level comment never closed, with its line."""
    manuscript, skipped = _text(manuscript)
    lines = manuscript.encode().splitlines(keepends=True)
    env: dict[str, int] = {}
    tokens = markup.parser().parse(manuscript, env)
    if comments.UNCLOSED in env:
        return ("unclosed_comment", env[comments.UNCLOSED] + 1 + skipped)
    starts = []
    for i, t in enumerate(tokens):
        if t.type == "heading_open" and t.tag == "h1" and t.level == 0 and t.map:
            inline = tokens[i + 1]
            title = "".join(
                " " if c.type in ("softbreak", "hardbreak") else c.content
                for c in inline.children or []
                if c.type in ("text", "code_inline", "math_inline", "math_display", "softbreak", "hardbreak")
            ).strip()
            starts.append((t.map[0], title or "Untitled"))
    out = []
    first = starts[0][0] if starts else len(lines)
    opening = b"".join(lines[:first]).decode()
    if re.sub(r"<!--.*?-->", "", opening, flags=re.S).strip():  # an opening of comments alone shows nothing
        out.append((OPENING_TITLE, opening))
    for n, (start, title) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        out.append((title, b"".join(lines[start:end]).decode()))
    return out


def _whole_anchors(manuscript: str) -> list[tuple[int, int, str, str]]:
    """The oracle's anchors: every heading of the whole parse, in order, as (chapter, level, id, words)."""
    return _whole_book(manuscript)[0]


def _whole_book(
    manuscript: str,
) -> tuple[list[tuple[int, int, str, str]], dict[str, tuple[int, str]], list[tuple[int, str]]]:
    """The oracle's index of the book, from whole parses: every heading, in order, as (chapter, level, id,
    words), a note's not; each footnote definition, the first of its label, as (chapter, its lines as
    written); each figure and table with a numbered id, as (chapter, id): the first of each, and none with
    an id a heading before it has (headings and targets claim ids in the book's order)."""
    sections = _whole_parse(manuscript)
    if isinstance(sections, tuple):
        return [], {}, []
    data = _text(manuscript)[0]
    md = markup.parser()
    tokens = md.parse(data)
    blocks: list[Any] = []
    env: dict[str, Any] = {}
    md.block.parse(data, md, env, blocks)
    lines = data.splitlines(keepends=True)
    starts = [
        t.map[0] for t in blocks if t.type == "heading_open" and t.tag == "h1" and t.level == 0 and t.map
    ]
    opening = len(sections) - len(starts)

    def chapter(line: int) -> int:
        return max(1, opening + sum(1 for start in starts if start <= line))

    events: list[tuple[int, str, Any]] = []  # (first line, kind, what): headings and targets, in order
    in_note = False
    spans: list[tuple[int, str, Any]] = []
    for i, t in enumerate(tokens):
        if t.type in ("footnote_block_open", "footnote_block_close"):
            in_note = t.type == "footnote_block_open"  # a note's headings are the note's, not the book's
        if t.type == "heading_open" and t.map and not in_note:
            events.append((t.map[0], "heading", (int(t.tag[1]), *headings.explicit_and_words(tokens, i))))
        if t.type == "div_open" and t.map and not in_note and spans_module.claimable(t.meta.get("id")):
            events.append((t.map[0], "target", t.meta["id"]))  # each div's that `balance` kept
        if t.type == "inline" and t.map and not in_note:  # each span's id (read from the whole parse's)
            ids = [c.meta["id"] for c in t.children or [] if c.type == "span_open" and c.meta.get("id")]
            spans.extend((t.map[0], "target", span_id) for span_id in ids)
    for first, _, target_id in crossrefs.targets(blocks, lambda content: md.parseInline(content, env)[0]):
        events.append((first, "target", target_id))
    events.extend(spans)  # (a block's figure or table before its spans, as the cut lists them)
    given = headings.Identifiers()
    found: list[tuple[int, int, str, str]] = []
    targets: list[tuple[int, str]] = []
    for first, kind, what in sorted(events, key=lambda e: e[0]):
        if kind == "heading":
            level, explicit, said = what
            found.append((chapter(first), level, given.claim(explicit, said), said))
        elif what not in given.used:
            given.used.add(what)
            targets.append((chapter(first), what))
    notes: dict[str, tuple[int, str]] = {}
    for t in blocks:
        if t.type == "footnote_reference_open" and t.map:
            notes.setdefault(t.meta["label"], (chapter(t.map[0]), "".join(lines[t.map[0] : t.map[1]])))
    return found, notes, targets


def _streamed_anchors(manuscript: str) -> list[tuple[int, int, str, str]]:
    return _streamed_index(manuscript)[0]


def _streamed_index(
    manuscript: str,
) -> tuple[list[tuple[int, int, str, str]], dict[str, tuple[int, str]], list[tuple[int, str]]]:
    anchors = Anchors()
    try:
        list(cut(normalise(manuscript.encode()).splitlines(keepends=True), anchors))
    except errors.Unprocessable:
        return [], {}, []
    return [(a.chapter, a.level, a.id, a.title) for a in anchors.anchors], anchors.notes, anchors.targets


def _streamed(manuscript: str) -> list[tuple[str, str]] | tuple[str, int]:
    try:
        sections = cut_text(manuscript)
    except errors.Unprocessable as refused:
        return (refused.code, refused.details["line"])
    batched = manuscript_module.HASH_LINES
    try:
        manuscript_module.HASH_LINES = 1  # lines hashed as soon as they may be, not a batch at a time
        eager = cut_text(manuscript)
    finally:
        manuscript_module.HASH_LINES = batched
    assert eager == sections
    for section, text in sections:
        # Taken as the cut goes, each section's SHA-256 is its own bytes', whatever opened it.
        assert section.sha256 == hashlib.sha256(text.encode()).hexdigest(), section.title
    return [(section.title, text) for section, text in sections]


def test_every_test_book_is_cut_as_a_whole_parse_would_cut_it() -> None:
    for name, manuscript in BOOKS.items():
        assert _streamed(manuscript) == _whole_parse(manuscript), name


def test_headings_inside_code_lists_and_quotes_do_not_cut() -> None:
    manuscript = (
        "# Real One\n\n```\n# not a heading\n```\n\n~~~~\n# nor this\n~~~~\n\n"
        "- item\n\n  # inside the item\n\n> # quoted\n\nSetext\n======\n\n    # indented code\n"
    )
    assert [t for t, _ in _streamed(manuscript)] == ["Real One", "Setext"]
    assert _streamed(manuscript) == _whole_parse(manuscript)


def test_the_sections_cover_the_manuscript_without_gaps_or_overlaps() -> None:
    manuscript = "intro\n\n# A\n\na\n# B\nb"
    sections = [s for s, _ in cut_text(manuscript)]
    assert sections[0].offset == 0
    for before, after in itertools.pairwise(sections):
        assert before.offset + before.length == after.offset
    assert sections[-1].offset + sections[-1].length == len(manuscript.encode()) + 1  # its final newline


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        (b"# A\n\ntext\n", b"# A\n\ntext\n"),  # already normal: kept byte for byte
        (b"# A\r\n\r\ntext\r\n", b"# A\n\ntext\n"),  # CRLF
        (b"# A\r\rtext\r", b"# A\n\ntext\n"),  # lone CR
        (b"\xef\xbb\xbf# A\n", b"# A\n"),  # a byte-order mark
        (b"# A\ntext", b"# A\ntext\n"),  # no final newline
        (b"\n  \n\t\n# A\n\n\n \n", b"# A\n"),  # blank lines before the first text and after the last
        (b"line one  \nline two\n", b"line one  \nline two\n"),  # two trailing spaces: a hard break
        (b"```\ncode\n\n   \nmore\n```\n", b"```\ncode\n\n   \nmore\n```\n"),  # inner blanks stay
        (b"", b""),
        (b"\n\n", b""),
    ],
)
def test_normalising_changes_line_endings_and_outer_blanks_never_meaning(raw: bytes, kept: bytes) -> None:
    lines = Normalised(raw.splitlines(keepends=True))
    assert b"".join(lines) == kept
    assert (lines.size, lines.changed) == (len(kept), kept != raw)
    parse = MarkdownIt("commonmark").render
    assert parse(kept.decode()) == parse(raw.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n"))


_LINES = st.sampled_from(
    [
        "# Title",
        "#Title",
        "## Sub",
        "text",
        "",
        "```",
        "~~~",
        "- item",
        "  # nested",
        "> # quoted",
        "> text",
        "===",
        "---",
        "title: a front matter's",
        "% A title block",
        "...",
        "a. a fancy item",
        "(ii) # in a roman item",
        "#. next",
        "    # code",
        "1. one",
        "<div>",
        "Ω unicode",
        "# ",
        "#",
        "\t# tab",
        "<!--",
        "-->",
        "<!-- c -->",
        "<!-- c --> after",
        "text <!-- c",
        "  <!-- c",
        "- ## listed",
        "> ## quoted two",
        "### Three {#three}",
        "1. ## numbered",
        "Term",
        ":   A definition",
        "~   Another, with a [link](#x)",
        "    # a heading in it",
        "A [span]{#sp .smallcaps} and [another]{#sp2}",
        "| a line of verse",
        "::: note",
        ":::",
        "::: {.warning}",
        "::: {#box .note}",
        "::: {#sp}",
        "- ::: {#in-item}",
        "> ::: {#quoted .tip}",
        "|   # indented in it",
        "- [ ] a task",
        "- [listed]{#sp} in a list",
        "[^c]: A note's [span]{#sp3}",
        "[^a]: A note",
        "    its second paragraph",
        "[^b]: Another",
        "![A map](map.png){#fig-map}",
        "![A map](map.png){#fig-two} and text",
        "`![code](x.png){#fig-code}`",
        ": Lights {#tbl-lights}",
        "| a | b |",
        "|---|---|",
        "Sub",
        "+---+---+",
        "+===+===+",
        "-----  -----",
        "-------",
        "  a    b",
    ]
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_LINES, max_size=30))
def test_any_manuscript_is_cut_as_a_whole_parse_would_cut_it(lines: list[str]) -> None:
    manuscript = "\n".join(lines)
    assert _streamed(manuscript) == _whole_parse(manuscript)
    assert _streamed_index(manuscript) == _whole_book(manuscript)


# Blocks that run long: a list item, a block quote or a fence of many lines, so that a candidate can sit
# further from what opened its container than any fixed window (the cutter once looked back 40 lines).
_LONG = st.tuples(
    st.sampled_from(["- item", "1. one", "> quote", "```", "  ```", "~~~~", "text", "    code", "---  ---"]),
    st.sampled_from(["  continued", "continued", "> more", "", "   more", "text", "# x", "a    b"]),
    st.integers(0, 120),
).map(lambda t: [t[0], *[t[1]] * t[2]])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_LINES.map(lambda line: [line]), _LONG), max_size=12))
def test_a_manuscript_of_long_blocks_is_cut_as_a_whole_parse_would_cut_it(blocks: list[list[str]]) -> None:
    manuscript = "\n".join(line for block in blocks for line in block)
    assert _streamed(manuscript) == _whole_parse(manuscript)
    assert _streamed_anchors(manuscript) == _whole_anchors(manuscript)


@pytest.mark.parametrize("continued", [5, 45, 500])
def test_a_heading_deep_inside_a_long_list_item_does_not_cut(continued: int) -> None:
    # With 45 continuation lines the item's first line was out of the cutter's old 40-line window, and the
    # indented heading cut a chapter "inside the item" that a whole parse does not make.
    manuscript = (
        "- item\n" + "".join(f"  continued {n}\n" for n in range(continued)) + "\n  # inside the item\n"
        "\n# Real\n\ntext\n"
    )
    assert [title for title, _ in _streamed(manuscript)] == [OPENING_TITLE, "Real"]
    assert _streamed(manuscript) == _whole_parse(manuscript)


@pytest.mark.parametrize("rows", [3, 40, MAX_TABLE_LINES // 2 - 3, MAX_TABLE_LINES // 2 + 3])
def test_rows_of_a_multiline_table_shaped_like_headings_cut_only_if_the_table_is_none(rows: int) -> None:
    # Each row starts in column 0 after a blank line and reads `# x`: a fresh start and a heading to a cut
    # that reads it as it comes, but rows of one table to a whole parse, while the table is at most
    # MAX_TABLE_LINES long (2 lines a row); past that, its dashes are no table, and each row is a chapter.
    manuscript = "-------\n" + "".join(f"# x {n}\n\n" for n in range(rows)) + "-------\n\n# After\n"
    titles = [title for title, _ in _streamed(manuscript)]
    rows_cut = [] if 2 * rows + 1 < MAX_TABLE_LINES else [f"x {n}" for n in range(rows)]
    assert titles == [OPENING_TITLE, *rows_cut, "After"]
    assert _streamed(manuscript) == _whole_parse(manuscript)
    assert _streamed_anchors(manuscript) == _whole_anchors(manuscript)


def test_an_uploads_lines_stream_as_a_whole_text_split_would_cut_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bindery.objects as objects_module
    from bindery.config import Settings

    data = b"a\r\nb\rc\n\n# x\r\n" * 500 + b"tail"

    class Bytes(objects_module.Objects):
        def open(self, key: str) -> io.BytesIO:
            return io.BytesIO(data)

    for size in (1, 2, 3, 7, 64, 4096):  # chunk edges inside lines and between a CR and its LF
        monkeypatch.setattr(objects_module, "READ_CHUNK", size)
        assert list(Bytes(Settings()).lines("k")) == data.splitlines(keepends=True), size
