"""What may interrupt a paragraph, as pandoc reads it: a list only inside a list (a sublist right after its
item's first line), and a block quote never (`blank_before_blockquote`). Anywhere else each follows a blank
line, so `Here's a bullet.` then `* criminey.` is one paragraph, as is `2` then `> 1.`, since a `-`, a `2.`
or a `>` so easily starts a wrapped line. markdown-it's own rules (CommonMark's reading) are wrapped so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from markdown_it.rules_block import blockquote, list_block

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import StateBlock


def install(md: MarkdownIt) -> None:
    md.block.ruler.at("list", pandoc_list, {"alt": ["paragraph", "reference", "blockquote"]})
    md.block.ruler.at(
        "blockquote", pandoc_blockquote, {"alt": ["paragraph", "reference", "blockquote", "list"]}
    )


def interrupts(state: StateBlock) -> bool:
    """Whether a list may start where the paragraph being read would go on."""
    return state.parentType != "paragraph" or state.listIndent >= 0


def pandoc_list(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """markdown-it's list, which interrupts a paragraph only inside a list."""
    return (not silent or interrupts(state)) and list_block(state, start, end, silent)


def pandoc_blockquote(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """markdown-it's block quote, which never interrupts a paragraph."""
    return not (silent and state.parentType == "paragraph") and blockquote(state, start, end, silent)
