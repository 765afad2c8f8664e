"""Fenced divs, as pandoc reads them: a line of three or more colons and a class (`::: note`) or attributes
(`::: {.warning}`) opens one, a line of colons alone closes the innermost open, and one never closed runs
to the end of what holds it. An opener starts a block of its own (it does not end a paragraph); a closer
ends the paragraph before it.

    ::: warning
    The light is not lit in daylight.
    :::

`note`, `tip`, `warning`, `caution` and `important` (and Quarto's `callout-note`, ...) are asides, set apart
in every format (`ASIDES`): a `div` with the ARIA role `note` in html and epub, Word paragraph styles of
those names (a rule at their left, as the html's), a Typst block with a rule at its left in the pdf. Any
other class reaches the html and epub as a class; its blocks are the blocks around it elsewhere.

The block rule leaves each fence a marker at the level it stands (`div_open`, `div_close`, of no nesting),
so a heading inside a div is where the cut finds it, and a chapter cut inside a div is read alone as the
whole book reads it; `balance` then pairs the markers in each container (nesting +1 and -1), closes one
left open where its container ends, and drops a closer with nothing open (and an opener past MAX_DEPTH).
A div's id (`::: {#sidebar .note}`) is a target of the book, as a span's is (`targets`, which the cut reads,
feeds `bindery.engine.anchors`), so a link to `#sidebar` lands on it in every format; the first div of an
id takes it (`Links.owns`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bindery.engine import spans
from bindery.engine.headings import ATTRIBUTE_LIST, parse_attributes

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import StateBlock
    from markdown_it.rules_core import StateCore
    from markdown_it.token import Token

ASIDES = ("note", "tip", "warning", "caution", "important")
MAX_DEPTH = 16  # divs open at once; an opener past them is dropped, its blocks the open div's
_OPENER = re.compile(r":{3,}[ \t]*(?:\{([^{}\n]*)\}|([^\s{}:]+))[ \t]*:*[ \t]*$")
_CLOSER = re.compile(r":{3,}[ \t]*$")
# A line the cut reads for a div's id, in a list or quote too (from a run's first colon, taken whole: linear).
DIV_ID_LINE = re.compile(rb"(?<!:):{3,}+[ \t]*+\{[^{}\n]*#")


def install(md: MarkdownIt) -> None:
    # A closer ends a paragraph, a table's rows and a quote's lazy lines, as pandoc's does (markdown-it asks a
    # table's and a quote's ends of the rules of "blockquote").
    md.block.ruler.before("fence", "fenced_div", fenced_div, {"alt": ["paragraph", "blockquote"]})
    md.core.ruler.after("block", "div_balance", balance)


def fenced_div(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    if state.is_code_block(start):
        return False
    pos, limit = state.bMarks[start] + state.tShift[start], state.eMarks[start]
    if not state.src.startswith(":::", pos):
        return False
    line = state.src[pos:limit]
    closer = _CLOSER.match(line) is not None
    opener = None if closer else _OPENER.match(line)
    if opener is not None and opener[1] is not None and not ATTRIBUTE_LIST.fullmatch(opener[1]):
        opener = None  # (`{#x<y}`: braces that hold no attributes, as pandoc reads them, open nothing)
    if silent:  # as a paragraph's or a quote's lazy line's end, a closer alone; else (`deflists`), either
        return closer or (opener is not None and state.parentType not in ("paragraph", "blockquote"))
    if opener is None:
        if not closer:
            return False
        token = state.push("div_close", "div", 0)
    else:
        token = state.push("div_open", "div", 0)
        given = parse_attributes(opener[1]) if opener[1] is not None else None
        classes = given.classes if given is not None else (opener[2],)
        if classes:
            token.attrSet("class", " ".join(classes))
        if given is not None and given.values:
            token.meta["values"] = dict(given.values)  # (`custom-style`: the docx's paragraph style)
        if given is not None and given.id:
            token.meta["id"] = given.id
    token.map, token.markup = [start, start + 1], ":::"
    state.line = start + 1
    return True


def aside(token: Token) -> str | None:
    """The kind of aside a div is (`note`, `warning`, ...), or None."""
    for name in str(token.attrGet("class") or "").split():
        kind = name.removeprefix("callout-")
        if kind in ASIDES:
            return kind
    return None


def balance(state: StateCore) -> None:
    if ":::" not in state.src:
        return
    out: list[Token] = []
    opened: list[tuple[int, list[Token]]] = []  # the containers open, each with the divs opened in it
    divs: list[Token] = []  # the divs open in the innermost container
    depth = 0  # divs open, in every container
    for token in state.tokens:
        if token.type == "div_open":
            if depth >= MAX_DEPTH:
                continue
            token.nesting = 1
            divs.append(token)
            depth += 1
        elif token.type == "div_close":
            if not divs:
                continue  # nothing open here: dropped
            divs.pop()
            depth -= 1
            token.nesting = -1
        elif token.nesting == 1:
            opened.append((len(out), divs))
            divs = []
        elif token.nesting == -1:
            out.extend(_closes(divs))
            depth -= len(divs)
            divs = opened.pop()[1] if opened else []
        out.append(token)
    out.extend(_closes(divs))
    state.tokens[:] = out


def targets(tokens: list[Token]) -> list[tuple[int, int, str]]:
    """The ids of the divs of a block parse's tokens (the cut's), as (first line, line after, id), in order:
    each div `balance` keeps, outside a footnote's definition (whose div is the note's, as its spans are)."""
    found: list[tuple[int, int, str]] = []
    outer: list[int] = []  # the divs open in each container around the innermost
    here = depth = 0  # divs open in the innermost container, and in every one (as `balance` counts)
    in_note = False
    for token in tokens:
        if token.type == "div_open":
            if depth < MAX_DEPTH:
                here, depth = here + 1, depth + 1
                if not in_note and token.map and spans.claimable(token.meta.get("id")):
                    found.append((token.map[0], token.map[1], str(token.meta["id"])))
        elif token.type == "div_close":
            if here:
                here, depth = here - 1, depth - 1
        elif token.nesting == 1:
            outer.append(here)
            here = 0
        elif token.nesting == -1:
            depth -= here
            here = outer.pop() if outer else 0
        if token.type in ("footnote_reference_open", "footnote_reference_close"):
            in_note = token.type == "footnote_reference_open"
    return found


def _closes(divs: list[Token]) -> list[Token]:
    """The closers of divs left open, innermost first."""
    from markdown_it.token import Token

    closers = []
    for div in reversed(divs):
        closer = Token("div_close", "div", -1, level=div.level, markup=":::")
        closers.append(closer)
    return closers
