"""The work each reader of a manuscript does grows linearly with it, for every family of hostile input
(tests/books/hostile.py): counted, never timed, so that a test fails on the shape and cannot flake. The
seconds per MB each family costs live in `make bench`."""

from __future__ import annotations

from typing import Any

import pytest

import bindery.manuscript as manuscript_module
from bindery import errors
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


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[_Counted]:
    """Every parser the cut makes from now on, counting what it is handed."""
    counted: list[_Counted] = []
    make = manuscript_module._parser

    def parser() -> Any:
        counted.append(_Counted(make()))
        return counted[-1].parser

    monkeypatch.setattr(manuscript_module, "_parser", parser)
    return counted


def _characters_parsed(manuscript: str, monkeypatch: pytest.MonkeyPatch) -> int:
    counted = _counting(monkeypatch)
    try:
        cut_text(manuscript)
    except errors.Unprocessable as refused:
        # A table refused as it is read, before the cut parses its line; a comment never closed, at the end.
        assert refused.code in ("table_too_wide", "unclosed_comment")
    return sum(c.characters for c in counted)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_cut_hands_markdown_it_each_line_of_a_hostile_manuscript_about_once(
    family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each candidate heading once re-parsed every line since the list item opened: 4,000 indented
    # headings handed markdown-it 48 million characters for a manuscript of 24,000. A window read before it
    # ends is read again only once it has grown fourfold: the reads before the last sum to at most four
    # thirds of the last but one, and the whole is handed over at most seven thirds of a time.
    manuscript = FAMILIES[family](SIZE)
    assert _characters_parsed(manuscript, monkeypatch) <= 7 / 3 * len(manuscript)


def test_a_window_read_at_its_bound_keeps_at_most_half_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # One list item longer than the bound, a candidate in every line: each read of a full window is paid
    # for by as many new bytes as it keeps, so the whole is parsed at most about four times.
    monkeypatch.setattr(manuscript_module, "MAX_CONTEXT_BYTES", 4096)
    manuscript = FAMILIES["indented atx headings in a list item"](SIZE)
    parsed = _characters_parsed(manuscript, monkeypatch)
    assert len(manuscript) < parsed <= 4 * len(manuscript)


def test_a_run_of_headings_is_cut_as_it_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    # 100,000 headings one space in, with no blank line between: the window was read whole before its
    # first chapter came out, so a book refused at its 5,001st chapter had cost the parse of all of them.
    manuscript = " # a\n" * 100_000
    counted = _counting(monkeypatch)
    sections = manuscript_module.cut(manuscript.encode().splitlines(keepends=True))
    assert [next(sections).title for _ in range(5_001)][-1] == "a"
    assert (
        counted[0].characters <= 2 * len(" # a\n") * 5_001 + 2 * len(" # a\n") * manuscript_module.READ_AFTER
    )


def test_prose_is_parsed_only_where_a_heading_may_be(monkeypatch: pytest.MonkeyPatch) -> None:
    # A window with no candidate line is never parsed: prose costs the cut its headings, not its text.
    manuscript = PROSE(SIZE)
    assert _characters_parsed(manuscript, monkeypatch) <= len(manuscript) // 100


@pytest.mark.parametrize(("rule", "parsed"), [("\n---\n\n", 1 / 100), ("\n---\n", 1)])
def test_a_rule_between_blank_lines_holds_no_window_open(
    rule: str, parsed: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A line of dashes may open a pandoc table, which the cut reads whole: but not one a blank line follows,
    # so a book's scene breaks leave its chapters read a heading at a time. (One that text follows holds
    # the window whole, to the next such line: here the whole book, once.)
    chapter = PROSE(SIZE // 20).removeprefix("# T\n\n")
    manuscript = "".join(f"# Chapter {n}\n\n{chapter}{rule}{chapter}" for n in range(10))
    assert len(manuscript) // 1000 < _characters_parsed(manuscript, monkeypatch) <= parsed * len(manuscript)


@pytest.mark.parametrize(
    "manuscript",
    [
        "# T\n\n" + "<!-- c -->\n\n" * (SIZE // 12),  # each comment a window of its own
        "# T\n\n- a\n" + "  <!--\n" * (SIZE // 7),  # openers in one list item, never closed
        "# T\n\n<!--\n" + "# a\n\n" * (SIZE // 5),  # headings inside a comment left open: refused
    ],
)
def test_the_cut_hands_markdown_it_each_line_of_a_manuscript_of_comments_about_once(
    manuscript: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _characters_parsed(manuscript, monkeypatch) <= 7 / 3 * len(manuscript)


def test_a_table_wider_than_any_page_is_refused_at_its_line_before_anything_is_built() -> None:
    wide = "|" + "a|" * 300 + "\n|" + "-|" * 300 + "\n"
    with pytest.raises(errors.Unprocessable) as refused:
        cut_text("# T\n\ntext\n\n" + wide)
    assert (refused.value.code, refused.value.details["line"]) == ("table_too_wide", 6)
    assert len(cut_text("# T\n\n" + "|a" * 256 + "|\n" + "|-" * 256 + "|\n")) == 1  # the widest allowed


def test_a_list_item_within_the_bound_read_early_keeps_its_context(monkeypatch: pytest.MonkeyPatch) -> None:
    # Read early (its candidates waiting), a window over half the bound was cut back to half: the list item's
    # first line was lost, and 1 MB of headings indented in one item made 33,548 chapters, not one.
    monkeypatch.setattr(manuscript_module, "MAX_CONTEXT_BYTES", 2048)  # read early at about 1,536 bytes
    manuscript = FAMILIES["indented atx headings in a list item"](2000)
    assert [section.title for section, _ in cut_text(manuscript)] == [manuscript_module.OPENING_TITLE]


def test_a_manuscript_that_would_cost_the_cut_too_much_is_refused_where_it_gets_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 4.9 MB of `- x` / `  # a` items, each a list item holding a heading-shaped line, took the cut 40 s (an
    # outside test): linear, but 70 times prose's cost, in the API's request.
    monkeypatch.setattr(manuscript_module, "MAX_CUT_TOKENS", 50_000)
    with pytest.raises(errors.Unprocessable) as refused:
        cut_text("# T\n\n" + "- x\n  # a\n" * 20_000)
    assert refused.value.code == "manuscript_too_complex"
    assert 3 < refused.value.details["line"] < 2 * 20_000 and refused.value.details["limit"] == 50_000
    assert len(cut_text(PROSE(200_000) + "# U\n\n- x\n  ```\n  code\n  ```\n" * 500)) == 501  # within it


def test_every_hostile_family_at_a_megabyte_is_within_the_cuts_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bench builds each family at 1 MB: none of them is refused for what it would cost the cut.
    read, made = manuscript_module._read, [0]

    def counting(parser: Any, window: list[bytes], reported: int = 0) -> Any:
        found = read(parser, window, reported)
        made[0] += found.tokens
        return found

    monkeypatch.setattr(manuscript_module, "_read", counting)
    for family in FAMILIES:
        made[0] = 0
        try:
            cut_text(FAMILIES[family](1_000_000))
        except errors.Unprocessable as refused:
            assert refused.code == "table_too_wide", family
        assert made[0] <= manuscript_module.MAX_CUT_TOKENS, family
