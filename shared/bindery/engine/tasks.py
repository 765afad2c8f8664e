"""Task lists, as pandoc and GitHub write them: a list item that opens with `[ ]` or `[x]` (`[X]`) and a
space is a task, open or done. Its box is set as a character every format and every reader has: ☐ (U+2610)
and ☒ (U+2612), the glyphs pandoc's docx writes, before the item's words; the html and epub mark the list
and the item (`task-list`, `task`) so that a style may set the box in place of the bullet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore

BOXES = {"[ ] ": "\u2610 ", "[x] ": "\u2612 ", "[X] ": "\u2612 "}


def install(md: MarkdownIt) -> None:
    md.core.ruler.after("inline", "task_lists", task_lists)


def task_lists(state: StateCore) -> None:
    if "[" not in state.src:
        return
    tokens = state.tokens
    lists: list[int] = []  # each list open: its opening token's index
    for i, token in enumerate(tokens):
        if token.type in ("bullet_list_open", "ordered_list_open"):
            lists.append(i)
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif (
            token.type == "list_item_open" and i + 2 < len(tokens) and tokens[i + 1].type == "paragraph_open"
        ):
            inline = tokens[i + 2]
            first = inline.children[0] if inline.children else None
            box = BOXES.get(inline.content[:4])
            if (
                box is None
                or first is None
                or first.type != "text"
                or not first.content.startswith(inline.content[:4])
            ):
                continue
            first.content = box + first.content[4:]
            token.attrJoin("class", "task")
            opened = tokens[lists[-1]]
            if "task-list" not in str(opened.attrGet("class") or ""):
                opened.attrJoin("class", "task-list")
