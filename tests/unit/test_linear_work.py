"""The work each reader of a manuscript does grows linearly with it, for every family of hostile input
(tests/books/hostile.py): counted, never timed, so that a test fails on the shape and cannot flake. The
seconds per MB each family costs live in `make bench`."""

from __future__ import annotations

from typing import Any

import pytest

import bindery.manuscript as manuscript_module
from bindery.manuscript import cut_text
from tests.books.hostile import FAMILIES, PROSE

SIZE = 40_000  # bytes


class _Counted:
    """markdown-it as the cut uses it, counting the characters handed to it."""

    def __init__(self, parser: Any) -> None:
        self.parser, self.characters = parser, 0
        block_parse = parser.block.parse

        def parse(text: str, md: Any, env: Any, tokens: Any) -> Any:
            self.characters += len(text)
            return block_parse(text, md, env, tokens)

        parse_inline = parser.parseInline

        def inline(text: str, env: Any = None) -> Any:
            self.characters += len(text)
            return parse_inline(text, env)

        parser.block.parse = parse
        parser.parseInline = inline


def _characters_parsed(manuscript: str, monkeypatch: pytest.MonkeyPatch) -> int:
    counted: list[_Counted] = []
    make = manuscript_module._parser

    def parser() -> Any:
        counted.append(_Counted(make()))
        return counted[-1].parser

    monkeypatch.setattr(manuscript_module, "_parser", parser)
    cut_text(manuscript)
    return sum(c.characters for c in counted)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_cut_hands_markdown_it_each_line_of_a_hostile_manuscript_about_once(
    family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each candidate heading once re-parsed every line since the list item opened: 4,000 indented
    # headings handed markdown-it 48 million characters for a manuscript of 24,000.
    manuscript = FAMILIES[family](SIZE)
    assert _characters_parsed(manuscript, monkeypatch) <= 2 * len(manuscript)


def test_a_window_read_at_its_bound_keeps_at_most_half_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # One list item longer than the bound, a candidate in every line: each read of a full window is paid
    # for by as many new bytes as it keeps, so the whole is parsed at most about three times.
    monkeypatch.setattr(manuscript_module, "MAX_CONTEXT_BYTES", 4096)
    manuscript = FAMILIES["indented atx headings in a list item"](SIZE)
    parsed = _characters_parsed(manuscript, monkeypatch)
    assert len(manuscript) < parsed <= 3 * len(manuscript)


def test_prose_is_parsed_only_where_a_heading_may_be(monkeypatch: pytest.MonkeyPatch) -> None:
    # A window with no candidate line is never parsed: prose costs the cut its headings, not its text.
    manuscript = PROSE(SIZE)
    assert _characters_parsed(manuscript, monkeypatch) <= len(manuscript) // 100
