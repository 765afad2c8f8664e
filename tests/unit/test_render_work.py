"""The work each renderer that reads markup.py's tokens (html, epub, docx) does on a manuscript grows
linearly with it, and is at most ten times what as much prose costs it, for every family of hostile input
(tests/books/hostile.py, and the shapes below): counted, never timed, as the lines and calls of Python it
runs (sys.settrace), so that a test fails on the shape and cannot flake. A C function that rescans its
input is one call here however long it runs: the seconds per MB each family costs live in `make bench`.
(Ten times prose's traced work is at most about four and a half times its time: the hostile shapes are
many small tokens, each a few lines of Python with little C work beneath them.)"""

from __future__ import annotations

import functools
import io
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from bindery.engine import Source, Text, formulas, renderer_for
from tests.books.hostile import FAMILIES, HEAD, PROSE

SIZE = 2_000  # bytes; each family is counted at this size and at GROWTH times it
GROWTH = 8
FORMATS = ("html", "epub", "docx")
LINEAR = 1.5  # work at GROWTH times the size: at most this many times GROWTH times the work
# Work at most this many times what as much prose costs. A shape whose every few characters open an element
# costs its tokens: `^[^[` is a superscript every two characters, as pandoc reads it (10.4 times prose).
PROSE_TIMES = 11


def _chapter(body: str) -> str:
    return HEAD + body + "\n"


# Shapes found measuring the renderers, past what the families above reach: each `[` (or `![`, `^[`) of
# them walked on through the rest of its line. The first was quadratic: `[^` x 40,000 on a line, in a
# chapter with a note, took six minutes to render.
RENDER_FAMILIES: dict[str, Callable[[int], str]] = {
    "references to a note left open": lambda n: _chapter("[^1]: a note\n\n" + "[^" * (n // 2)),
    "inline notes left open": lambda n: _chapter("^[" * (n // 2)),
    "images left open": lambda n: _chapter("![" * (n // 2)),
    "nested images": lambda n: _chapter("![" * (n // 4) + "a" + "]" * (n // 4)),
    "link labels each followed by [": lambda n: _chapter("[a][" * (n // 4)),
    # Comments (bindery.engine.comments): openers with no closer, each of which looks for one.
    "comment openers in a list item": lambda n: _chapter("- a\n" + "  <!--\n" * (n // 7)),
    "inline comment openers": lambda n: _chapter("a <!--" * (n // 6)),
    "comments": lambda n: _chapter("<!-- c --> a <!-- d -->\n" * (n // 24)),
}
SHAPES = {**FAMILIES, **RENDER_FAMILIES}


def _texts(manuscript: str) -> tuple[Source, list[Text]]:
    return Source("abcdef0123456789abcd", "Work", 1, ("T",)), [Text(1, "T", manuscript)]


def _work(manuscript: str, fmt: str) -> int:
    """The lines and calls of Python the format's renderer runs to build `manuscript`, handed to it as
    one chapter, as the cut hands each of these (the cut's work, and what it refuses before any build, as a
    table past 256 columns, are tests/unit/test_linear_work.py's). It is built once before it is counted,
    so that what a renderer makes once and keeps (the parser's tables of rules) is not counted against the
    shape that happens to come first."""
    renderer = renderer_for(fmt)
    source, texts = _texts(manuscript)
    renderer.render(source, texts, io.BytesIO())
    source, texts = _texts(manuscript)
    formulas.forget()  # each formula is read again, as by another worker (the first render kept them)
    events = 0

    def count(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal events
        events += 1
        return count

    before = sys.gettrace()  # (a coverage tracer, say: put back as it was)
    sys.settrace(count)
    try:
        renderer.render(source, texts, io.BytesIO())
    finally:
        sys.settrace(before)
    return events


@functools.cache
def _prose_work(fmt: str, size: int) -> int:
    return _work(PROSE(size), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("family", sorted(SHAPES))
def test_rendering_a_hostile_manuscript_grows_linearly_and_costs_at_most_ten_times_as_much_prose(
    family: str, fmt: str
) -> None:
    # Before inline_rules.py read labels, destinations and notes' references once: nested brackets cost 21
    # times prose, link openers with no closers 28, unclosed link destinations 20, the shapes above 29
    # to 55, and references to a note left open 220 times at 2 KB and 50 times more at 8 times the size.
    make = SHAPES[family]
    small, large = _work(make(SIZE), fmt), _work(make(GROWTH * SIZE), fmt)
    assert large <= LINEAR * GROWTH * small, f"{large / small:.1f} times the work at {GROWTH} times the size"
    prose = _prose_work(fmt, GROWTH * SIZE)
    assert large <= PROSE_TIMES * prose, f"{large / prose:.1f} times the work of as much prose"
