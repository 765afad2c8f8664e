"""markdown-it's block parsing, in work linear in the manuscript: the block tokens markdown-it gives, with
one change of what is read (past twenty levels of nesting a list or quote reads as the text it is, where
markdown-it dropped the rest of the document).

markdown-it asked every block rule at every line, and every rule that may end a paragraph (a quote, a
list, a definition) again at each of its lines; `install` gives a parser a tokenize and chains of
terminators that offer each line only to the rules that may match it, by its first character.
tests/unit/test_markup.py holds them to markdown-it's tokens; tests/unit/test_render_work.py holds html,
epub and docx to linear work on every family of hostile input.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from types import MethodType
from typing import Any

from markdown_it import MarkdownIt, rules_block
from markdown_it.parser_block import ParserBlock
from markdown_it.ruler import Ruler
from markdown_it.rules_block import StateBlock
from mdit_py_plugins.footnote.index import footnote_def

from bindery.engine import fancy_lists, interruptions
from bindery.engine.comments import comment_block
from bindery.engine.divs import fenced_div


def install(md: MarkdownIt) -> None:
    """`md`'s block tokenize and its ruler's chains of terminators, replaced by this module's."""
    md.block.tokenize = MethodType(_tokenize_bounded, md.block)  # type: ignore[method-assign]
    md.block.ruler.getRules = MethodType(_block_chain, md.block.ruler)  # type: ignore[method-assign]


# The block rules that open a container (their content is parsed by a nested tokenize, one level deeper).
CONTAINERS = frozenset({"blockquote", "list", "fancy_list", "footnote_def"})


def _tokenize_bounded(self: ParserBlock, state: StateBlock, start: int, end: int) -> None:
    """markdown-it's block tokenize, with two changes. At `maxNesting` (20) it does not drop the rest of
    the document, as markdown-it does ("we should not care about content"), but stops opening containers,
    so a list or quote nested deeper reads as the text it is. A 100,000-deep list is then twenty levels
    and a paragraph of dashes, and what follows it in the chapter is still there. And each line is offered
    only to the rules that may match it (`_BlockRules`)."""
    everything, leaves = _block_rules(self.ruler)
    max_nesting = state.md.options.maxNesting
    line, had_empty = start, False
    while line < end:
        state.line = line = state.skipEmptyLines(line)
        if line >= end or state.sCount[line] < state.blkIndent:
            break  # the end of the range, or of the container this call is parsing
        rules = everything if state.level < max_nesting else leaves
        if not rules.match(state, line, end, False):
            raise RuntimeError("none of the block rules matched")
        if state.line <= line:
            raise RuntimeError("block rule didn't increment state.line")
        state.tight = not had_empty
        line = state.line
        if (line - 1) < end and state.isEmpty(line - 1):
            had_empty = True  # a paragraph may take the blank line after it, in a nested list
        if line < end and state.isEmpty(line):
            had_empty = True
            line += 1
            state.line = line


class _BlockRules:
    """Block rules in the ruler's order, each line offered only to those that may match it: every rule of
    markdown-it's and the notes' but a table, a setext heading and a paragraph looks first at the line's
    first character (after its indentation) and declines any but its own, unless the line is blank or
    indented as code, when all are asked. A rule not known here is asked at every line. A paragraph of
    short lines asked all eight rules that may end a paragraph at each of its lines, and again for a
    setext heading, and again for a definition."""

    def __init__(self, rules: list[Any]) -> None:
        self.rules = rules
        # Each marker's rules; a line that starts with any other character is offered those with none.
        marked = "".join(_BLOCK_MARKERS.get(rule, "") for rule in rules)
        self._at = {char: tuple(r for r in rules if char in _BLOCK_MARKERS.get(r, char)) for char in marked}
        self._unmarked = tuple(rule for rule in rules if rule not in _BLOCK_MARKERS)

    def at(self, state: StateBlock, line: int) -> Sequence[Any]:
        pos = state.bMarks[line] + state.tShift[line]
        if pos >= state.eMarks[line] or state.is_code_block(line):
            return self.rules
        return self._at.get(state.src[pos], self._unmarked)

    def match(self, state: StateBlock, line: int, end: int, silent: bool) -> bool:
        """Whether one of the rules matches at `line`, as markdown-it asks each in turn (the first that
        matches ends the asking): the one rule a chain of terminators becomes."""
        return any(rule(state, line, end, silent) for rule in self.at(state, line))


def _block_rules(ruler: Ruler[Any]) -> tuple[_BlockRules, _BlockRules]:
    """The block rules (and those that open no container), made again when the ruler's rules change."""
    rules = ruler.getRules("")
    made: tuple[Any, _BlockRules, _BlockRules] | None = getattr(ruler, "_block_rules", None)
    if made is None or made[0] is not rules:
        leaves = [rule.fn for rule in ruler.__rules__ if rule.enabled and rule.name not in CONTAINERS]
        made = (rules, _BlockRules(rules), _BlockRules(leaves))
        ruler._block_rules = made  # type: ignore[attr-defined]
    return made[1], made[2]


def _block_chain(self: Ruler[Any], chain: str = "") -> list[Any]:
    """The block ruler's getRules: a chain of rules that may end a block (a paragraph's, a quote's, a
    list's, a definition's) is given as one rule, `_BlockRules.match`, which asks only those that may
    match the line. The main chain is as markdown-it keeps it (`_tokenize_bounded` asks it by line)."""
    rules = Ruler.getRules(self, chain)
    if not chain:
        return rules
    chains: dict[str, tuple[Any, list[Any]]] | None = getattr(self, "_block_chains", None)
    if chains is None:
        chains = self._block_chains = {}  # type: ignore[attr-defined]
    made = chains.get(chain)
    if made is None or made[0] is not rules:
        made = chains[chain] = (rules, [_BlockRules(rules).match])
    return made[1]


# The first characters of a line each known block rule may match at (the rest of the rules: any). The code
# rule matches only a line indented as code, where every rule is asked.
_BLOCK_MARKERS: dict[Any, str] = {
    rules_block.code: "",
    rules_block.fence: "~`",
    interruptions.pandoc_blockquote: ">",
    rules_block.hr: "*-_",
    interruptions.pandoc_list: "*-+0123456789",
    fancy_lists.fancy_list: "(#0123456789" + string.ascii_letters,
    rules_block.reference: "[",
    rules_block.html_block: "<",
    comment_block: "<",
    rules_block.heading: "#",
    footnote_def: "[",
    fenced_div: ":",
}
