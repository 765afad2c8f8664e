"""Superscript and subscript, as pandoc reads them: `2^10^`, `H~2~O`. What stands between the marks is text
that holds no space (a backslash makes one a no-break space: `P~a\\ cat~`), so a mark looks no further
than the next space or mark: linear work. `~~` is strikethrough's, read before. Anywhere in the text, as
pandoc reads it, `\\ ` is a no-break space (`escaped_space`: `10\\ km` does not break).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_inline import StateInline

# What a script most often holds: letters and digits alone, set as they are.
_PLAIN = re.compile(r"\w+")

# A mark, then characters that are no space and no mark (or any escaped but a line's end), then the mark.
_SUPERSCRIPT = re.compile(r"\^((?:\\[^\n]|[^\s^\\])+)\^")
_SUBSCRIPT = re.compile(r"~((?:\\[^\n]|[^\s~\\])+)~")


def install(md: MarkdownIt) -> None:
    md.inline.ruler.before("escape", "escaped_space", escaped_space)
    md.inline.ruler.after("strikethrough", "subscript", subscript)
    md.inline.ruler.after("emphasis", "superscript", superscript)
    for tag in ("sup", "sub"):  # (markdown-it's renderToken asks of each what a tag has none of)
        md.add_render_rule(f"{tag}_open", lambda *_, tag=tag: f"<{tag}>")
        md.add_render_rule(f"{tag}_close", lambda *_, tag=tag: f"</{tag}>")


def _script(state: StateInline, silent: bool, pattern: re.Pattern[str], tag: str) -> bool:
    found = None if silent else pattern.match(state.src, state.pos, state.posMax)
    if found is None:
        return False
    state.push(f"{tag}_open", tag, 1).markup = found[0][0]
    if _PLAIN.fullmatch(found[1]):
        state.push("text", "", 0).content = found[1]
    else:  # what it holds is inline markup, as pandoc reads it (`a^*hello*^`), a `\ ` a no-break space
        held = len(state.tokens)
        end, state.pos, state.posMax = state.posMax, found.start(1), found.end(1)
        state.md.inline.tokenize(state)
        if state.pending:
            state.pushPending()
        state.posMax = end
        for token in state.tokens[held:]:
            if token.type in ("text", "text_special"):  # (`\ ` is markdown-it's text_special)
                token.content = token.content.replace("\\ ", "\u00a0")
    state.push(f"{tag}_close", tag, -1).markup = found[0][0]
    state.pos = found.end()
    return True


def superscript(state: StateInline, silent: bool) -> bool:
    return _script(state, silent, _SUPERSCRIPT, "sup")


def subscript(state: StateInline, silent: bool) -> bool:
    return _script(state, silent, _SUBSCRIPT, "sub")


def escaped_space(state: StateInline, silent: bool) -> bool:
    """`\\ `: a no-break space, as pandoc reads it (CommonMark escapes no space: the backslash would show)."""
    if state.src[state.pos] != "\\" or state.src[state.pos + 1 : state.pos + 2] != " ":
        return False
    if not silent:
        state.push("text", "", 0).content = "\u00a0"
    state.pos += 2
    return True
