"""HTML comments, `<!-- ... -->`, which authors keep notes to themselves in: read, and left out of every
format. pandoc reads one as raw HTML, which no other format prints and a browser does not show.

A comment is a block when a line (indented up to three spaces) opens it: it runs to the first line that
holds `-->`, as CommonMark's HTML block of comments does, and what follows the `-->` on that line is a
paragraph of its own. It ends a paragraph it follows, so that no line inside it is ever read as a heading
(pandoc reads the same lines as a comment within the paragraph). Anywhere else it is inline, and ends at
the first `-->` of the paragraph. Both give no
token at all, so no renderer has anything to leave out.

A comment that is never closed is not one: its text is printed, as pandoc prints it, except at the top
level of a manuscript, where a comment opened and never closed would hide the rest of the book; the cut
refuses that (`bindery.manuscript`, 422 `unclosed_comment`). Each rule finds the next `-->` by bisection in
the positions of all of them, found once, so no run of openers costs more than one pass.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the cut imports this module's names at a cold start; markdown-it loads when it cuts
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import StateBlock
    from markdown_it.rules_inline import StateInline

OPENER, CLOSER = "<!--", "-->"
# `<!-->` and `<!--->` are text to pandoc (CommonMark 0.31 reads each as an empty comment): neither opens a
# comment, which would hide the text up to a later `-->`.
_NO_COMMENT = (">", "->")
# The env's keys for the first line of a top-level comment that a parse found no closer for, and of any
# opener it found none for (inside a container, or where it would end a paragraph): the cut's.
UNCLOSED = "unclosed_comment"
OPENED = "comment_opened"


def install(md: MarkdownIt) -> None:
    md.block.ruler.before(
        "html_block", "comment", comment_block, {"alt": ["paragraph", "reference", "blockquote"]}
    )
    md.inline.ruler.before("autolink", "comment", comment_inline)


def _find_closers(src: str) -> list[int]:
    """Where each `-->` of `src` starts."""
    found, at = [], src.find(CLOSER)
    while at >= 0:
        found.append(at)
        at = src.find(CLOSER, at + 1)
    return found


def _closers(src: str, memo: Any) -> list[int]:
    """Where each `-->` of `src` starts, found once for a parse's state (`memo`)."""
    found: list[int] | None = getattr(memo, "_comment_closers", None)
    if found is None:
        found = memo._comment_closers = _find_closers(src)
    return found


def _next_closer(src: str, memo: Any, start: int) -> int:
    """Where the first `-->` at or after `start` begins, or -1."""
    closers = _closers(src, memo)
    i = bisect_left(closers, start)
    return closers[i] if i < len(closers) else -1


def comment_block(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    if state.is_code_block(start):
        return False
    pos = state.bMarks[start] + state.tShift[start]
    if not state.src.startswith(OPENER, pos) or state.src.startswith(_NO_COMMENT, pos + len(OPENER)):
        return False
    closer = _next_closer(state.src, state, pos + len(OPENER))
    # The line that holds it: the first to end after it (a closer never spans a line's end).
    line = bisect_right(state.eMarks, closer, start, end) if closer >= 0 else end
    if line >= end or closer < state.bMarks[line]:
        # No closer in this block's lines: not a comment. A top-level one is the cut's to refuse; any is one
        # that a closer further on may make a comment of, which the cut waits for.
        env = state.env
        env[OPENED] = min(env.get(OPENED, start), start)
        if not silent and state.level == 0 and state.blkIndent == 0:  # (not parentType: markdown-it's stale)
            env.setdefault(UNCLOSED, start)
        return False
    if silent:
        return True
    state.line = line + 1
    rest = state.src[closer + len(CLOSER) : state.eMarks[line]]
    if rest.strip():
        # What follows the comment on its last line is text, a paragraph of its own.
        token = state.push("paragraph_open", "p", 1)
        token.map = [line, line + 1]
        token = state.push("inline", "", 0)
        token.content, token.map, token.children = rest.strip(), [line, line + 1], []
        state.push("paragraph_close", "p", -1)
    return True


def comment_inline(state: StateInline, silent: bool) -> bool:
    pos = state.pos
    if not state.src.startswith(OPENER, pos) or state.src.startswith(_NO_COMMENT, pos + len(OPENER)):
        return False
    closer = _next_closer(state.src, state, pos + len(OPENER))
    if closer < 0 or closer + len(CLOSER) > state.posMax:
        return False
    after = closer + len(CLOSER)
    if state.pending.endswith(" ") and state.src[after : after + 1] == " ":
        after += 1  # `a <!-- c --> b`: one space between the words, not two
    state.pos = after
    return True
