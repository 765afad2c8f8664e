"""pandoc's other list markers (`fancy_lists`, `startnum`): `a.`, `B)`, `(iii)`, `IV.`, `(2)`, `#.`.

A list opened by such a marker is read here; one opened by `1.` or `1)` is markdown-it's, as CommonMark
reads it. Its first marker sets its style, as pandoc's `anyOrderedListMarker` tries them: a number, `#` (the
next number), `i` or `I` (roman one), a single letter, roman numerals, each lower or upper case; then a
delimiter, `.`, `)` or both parentheses. Every later item takes a marker of the same style and delimiter
(read as that style: in a roman list `v.` is five), and any other ends the list. A capital letter with a
period needs two spaces after it (`B. Russell` and `I. Newton` are sentences, as in pandoc), and it
interrupts a paragraph only inside a list (`bindery.engine.interruptions`).

The list is markdown-it's `ordered_list_open`, with its start (`start`) and its style for the html (`type`:
`a`, `A`, `i`, `I`) and every format (`meta["numbering"]`, a Typst numbering pattern such as `(a)`, which
the docx and pdf write as their own). The item loop is markdown-it's `list_block` (MIT, markdown-it-py),
less what plain lists need alone (task boxes, `engine.tasks`, are read from the items' text).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from markdown_it.rules_block.list import markTightParagraphs

from bindery.engine.interruptions import interrupts

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import StateBlock

# A marker at a line's start: its delimiters, and what they hold (no more than a number of nine digits, or
# roman numerals of as many letters).
_MARKER = re.compile(r"(\()?([0-9]{1,9}|#|[a-zA-Z]{1,15})([.)])")
_ROMAN = re.compile(r"(?=[mdclxvi])m{0,4}(c[md]|d?c{0,3})(x[cl]|l?x{0,3})(i[xv]|v?i{0,3})")
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}

# A style: the html's `type`, and Typst's counting symbol.
STYLES = {"decimal": ("1", "1"), "lower-alpha": ("a", "a"), "upper-alpha": ("A", "A"),
          "lower-roman": ("i", "i"), "upper-roman": ("I", "I")}  # fmt: skip


class Marker(NamedTuple):
    after: int  # where the text after the marker starts
    style: str  # a key of STYLES
    delimiter: str  # `.`, `)` or `()`
    value: int | None  # None: `#`, the next number


def install(md: MarkdownIt) -> None:
    # A paragraph's terminator too, as markdown-it's list is, but only inside a list (`interrupts`).
    md.block.ruler.before("list", "fancy_list", fancy_list, {"alt": ["paragraph", "reference", "blockquote"]})


def numbering(style: str, delimiter: str) -> str:
    """The Typst numbering pattern of a style and delimiter: `1.`, `a)`, `(iv)` ..."""
    symbol = STYLES[style][1]
    return f"({symbol})" if delimiter == "()" else symbol + delimiter


def _marker(state: StateBlock, line: int, style: str | None = None) -> Marker | None:
    """The marker that opens `line`, of `style` (any, for a list's first), or None."""
    start = state.bMarks[line] + state.tShift[line]
    end = state.eMarks[line]
    found = _MARKER.match(state.src, start, end)
    if found is None:
        return None
    opened, body, closer = found.groups()
    if opened is not None and closer != ")":
        return None
    delimiter = "()" if opened else closer
    after = found.end()
    if after < end and state.src[after] not in " \t":
        return None
    read = _read(body, style)
    if read is None:
        return None
    kind, value = read
    capital = kind == "upper-alpha" or (kind == "upper-roman" and len(body) == 1)
    if capital and delimiter == "." and after < end and not state.src.startswith(("  ", " \t", "\t"), after):
        return None  # `B. Russell`: a sentence (pandoc asks two spaces of a capital letter and a period)
    return Marker(after, kind, delimiter, value)


def _read(body: str, style: str | None) -> tuple[str, int | None] | None:
    """A marker's body as `style` (or, for a list's first, the first style pandoc finds it to be)."""
    if body == "#":  # the next number, in any list
        return style or "decimal", None
    if body.isdigit():
        return ("decimal", int(body)) if style in (None, "decimal") else None
    lower = body.lower()
    case = "lower" if body.islower() else "upper" if body.isupper() else None
    if case is None:
        return None
    if style is None:
        if lower == "i":  # roman one before a letter
            return f"{case}-roman", 1
        if len(body) == 1:
            return f"{case}-alpha", ord(lower) - ord("a") + 1
        return (f"{case}-roman", _roman(lower)) if _ROMAN.fullmatch(lower) else None
    if style == f"{case}-alpha" and len(body) == 1:
        return style, ord(lower) - ord("a") + 1
    if style == f"{case}-roman" and _ROMAN.fullmatch(lower):
        return style, _roman(lower)
    return None


def _roman(numeral: str) -> int:
    values = [_ROMAN_VALUES[c] for c in numeral]
    return sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))


def fancy_list(state: StateBlock, startLine: int, endLine: int, silent: bool) -> bool:
    if state.is_code_block(startLine):
        return False
    if (
        state.listIndent >= 0
        and state.sCount[startLine] - state.listIndent >= 4
        and state.sCount[startLine] < state.blkIndent
    ):
        return False
    first = _marker(state, startLine)
    if first is None or (first.style == "decimal" and first.delimiter != "()" and first.value is not None):
        return False  # `1.` and `1)`: markdown-it's list, as CommonMark reads it
    if silent:
        return interrupts(state)
    style, delimiter = first.style, first.delimiter
    start_at = 1 if first.value is None else first.value
    list_index = len(state.tokens)
    token = state.push("ordered_list_open", "ol", 1)
    if STYLES[style][0] != "1":
        token.attrSet("type", STYLES[style][0])
    if start_at != 1:
        token.attrSet("start", start_at)
    token.meta["numbering"] = numbering(style, delimiter)
    token.map = list_lines = [startLine, 0]
    token.markup = delimiter
    tight, previous_empty_end = True, False
    terminators = state.md.block.ruler.getRules("list")
    old_parent, state.parentType = state.parentType, "list"
    marker: Marker | None = first
    next_line = startLine
    while next_line < endLine and marker is not None:
        after = marker.after
        maximum = state.eMarks[next_line]
        initial = offset = (
            state.sCount[next_line] + after - (state.bMarks[startLine] + state.tShift[startLine])
        )
        pos = after
        while pos < maximum and state.src[pos] in " \t":
            offset += 4 - (offset + state.bsCount[next_line]) % 4 if state.src[pos] == "\t" else 1
            pos += 1
        content_start = pos
        indent_after = 1 if content_start >= maximum else offset - initial
        if indent_after > 4:
            indent_after = 1  # more is an indented code block
        token = state.push("list_item_open", "li", 1)
        token.markup = delimiter
        token.map = item_lines = [startLine, 0]
        token.info = "#" if marker.value is None else str(marker.value)
        old_tight, old_shift, old_count = state.tight, state.tShift[startLine], state.sCount[startLine]
        old_list_indent, state.listIndent = state.listIndent, state.blkIndent
        state.blkIndent = initial + indent_after
        state.tight = True
        state.tShift[startLine] = content_start - state.bMarks[startLine]
        state.sCount[startLine] = offset
        if content_start >= maximum and state.isEmpty(startLine + 1):
            state.line = min(state.line + 2, endLine)  # an empty item ends the list before what follows
        else:
            state.md.block.tokenize(state, startLine, endLine)
        if not state.tight or previous_empty_end:
            tight = False
        previous_empty_end = (state.line - startLine) > 1 and state.isEmpty(state.line - 1)
        state.blkIndent, state.listIndent = state.listIndent, old_list_indent
        state.tShift[startLine], state.sCount[startLine], state.tight = old_shift, old_count, old_tight
        state.push("list_item_close", "li", -1).markup = delimiter
        next_line = startLine = state.line
        item_lines[1] = next_line
        if (
            next_line >= endLine
            or state.sCount[next_line] < state.blkIndent
            or state.is_code_block(next_line)
        ):
            break
        if any(rule(state, next_line, endLine, True) for rule in terminators):
            break
        marker = _marker(state, next_line, style)
        if marker is not None and marker.delimiter != delimiter:
            marker = None
    state.push("ordered_list_close", "ol", -1).markup = delimiter
    list_lines[1] = next_line
    state.line = next_line
    state.parentType = old_parent
    if tight:
        markTightParagraphs(state, list_index)
    return True


def label(pattern: str, value: int) -> str:
    """Item `value`'s marker as `pattern` numbers it: `label("(a)", 3)` is `(c)`."""
    symbol = next((c for c in pattern if c in "1aAiI"), "1")
    if symbol in "aA":
        written = ""
        while value > 0:  # a, ..., z, aa, ab, ... (as Typst counts past z)
            value, digit = divmod(value - 1, 26)
            written = chr(ord("a") + digit) + written
    elif symbol in "iI":
        written = ""
        for numeral, worth in _NUMERALS:
            count, value = divmod(value, worth)
            written += numeral * count
    else:
        written = str(value)
    return pattern.replace(symbol, written.upper() if symbol.isupper() else written, 1)


_NUMERALS = [("m", 1000), ("cm", 900), ("d", 500), ("cd", 400), ("c", 100), ("xc", 90), ("l", 50), ("xl", 40),
             ("x", 10), ("ix", 9), ("v", 5), ("iv", 4), ("i", 1)]  # fmt: skip
