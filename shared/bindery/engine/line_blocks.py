"""Line blocks, as pandoc reads them: lines that begin with `|` and a space keep their breaks and their
leading spaces, the way verse and addresses are set. A line that begins with a space continues the one
before it; `|` alone is an empty line.

    | The limerick packs laughs anatomical
    |    Into space that is quite economical.

Each is a paragraph (class `line-block` in html and epub) whose lines end in hard breaks, so every format
sets it with the structure it has for a paragraph with breaks; the leading spaces are no-break spaces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import StateBlock
    from markdown_it.rules_core import StateCore

NBSP = "\u00a0"


def install(md: MarkdownIt) -> None:
    md.block.ruler.before("paragraph", "line_block", line_block)
    md.core.ruler.after("inline", "line_breaks", line_breaks)


def _opens(state: StateBlock, line: int) -> bool:
    pos, end = state.bMarks[line] + state.tShift[line], state.eMarks[line]
    return pos < end and state.src[pos] == "|" and (pos + 1 == end or state.src[pos + 1] == " ")


def line_block(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    if state.is_code_block(start) or not _opens(state, start):
        return False
    if silent:
        return True
    lines: list[str] = []
    line = start
    while line < end and not state.isEmpty(line) and state.sCount[line] >= state.blkIndent:
        begin = state.bMarks[line] + state.tShift[line]
        text = state.src[begin : state.eMarks[line]]
        if _opens(state, line):
            kept = text[2:]
            lines.append(NBSP * (len(kept) - len(kept.lstrip(" "))) + kept.lstrip(" "))
        elif lines and state.sCount[line] > state.blkIndent:
            lines[-1] += " " + text.strip()  # a line begun with a space goes on with the one before
        else:
            break
        line += 1
    opened = state.push("paragraph_open", "p", 1)
    opened.map = [start, line]
    opened.attrSet("class", "line-block")
    inline = state.push("inline", "", 0)
    inline.content, inline.map, inline.children = "\n".join(lines), [start, line], []
    inline.meta["line_block"] = True
    state.push("paragraph_close", "p", -1)
    state.line = line
    return True


def line_breaks(state: StateCore) -> None:
    """Each line of a line block ends in a hard break."""
    for token in state.tokens:
        if token.type == "inline" and token.meta.get("line_block"):
            for child in token.children or []:
                if child.type == "softbreak":
                    child.type, child.tag = "hardbreak", "br"
