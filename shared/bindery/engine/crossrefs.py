"""Numbered cross-references, written as Quarto writes them, read into tokens every format renders.

    ![A map of the coast](images/coast.png){#fig-coast}      a figure: an image alone in its paragraph

    | Port | Light |
    |------|-------|
    | Wick | fixed |

    : Lights of the north coast {#tbl-lights}                 a table's caption, after it (or `Table: ...`)

    ## Harbours {#sec-harbours}                                a section

    As @fig-coast shows, and [-@tbl-lights] lists ...         "Figure 3", "1"

What this rule makes of them (`install`, after every other rule of the dialect):
- an image's attributes (`{#id .class}`, pandoc's `link_attributes`) leave its text, and its id is its own;
- a paragraph holding one image with a `fig-` id becomes a `figure_open`/`figure_close` pair around it;
- a caption paragraph after a table (`: ...` or `Table: ...`) becomes the table's (`table_open.meta`), its
  id, a `tbl-` one, the table's;
- each `@fig-x`, `@tbl-x`, `@sec-x` in text (`[@fig-x]`, and `[-@fig-x]` for the number alone) becomes a
  `crossref` token.
What each is numbered is the book's (`bindery.engine.anchors`, which the cut fills: `targets`), so "Figure 3"
is the third figure of the book, or the chapter's third (`3.3`, where the export asks for numbers by
chapter), and a section the numbers of its heading in its chapter (`Section 2.1`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from bindery.engine.headings import parse_attributes

if TYPE_CHECKING:
    from markdown_it.rules_core import StateCore
    from markdown_it.token import Token

# What a reference's kind is called before its number, as Quarto's defaults say it.
NAMES = {"fig": "Figure", "tbl": "Table", "sec": "Section"}
_ID = r"(?:fig|tbl|sec)-[\w:.-]*\w"
# `[-@fig-x]` (the number alone), `[@fig-x]`, or `@fig-x` not inside a word or an address.
_CITATION = re.compile(r"\[(-?)@(" + _ID + r")\]|(?<![\w@.])@(" + _ID + r")")
_LEADING = re.compile(r"\{([^{}\n]*)\}")  # attributes right after an image
_CAPTION = re.compile(r"(?:Table)?:[ \t]+(.*?)(?:[ \t]*\{([^{}\n]*)\})?[ \t]*", re.DOTALL)
# A line the cut reads for a target: an image's or a caption's attributes holding a numbered id.
TARGET_LINE = re.compile(rb"\{[^{}\n]*#(?:fig|tbl)-")
_TARGET = re.compile(TARGET_LINE.pattern.decode())


def kind_of(target_id: str) -> str | None:
    kind = target_id.split("-", 1)[0]
    return kind if kind in NAMES and "-" in target_id else None


def install(md: Any) -> None:
    md.core.ruler.push("crossrefs", crossrefs)


def crossrefs(state: StateCore) -> None:
    if not any(mark in state.src for mark in ("{", "@", "|", "able:", "\n:")):
        return  # no attribute, citation, table or caption: most chapters (a substring search each)
    tokens = state.tokens
    dropped: set[int] = set()
    table = None  # the last table opened
    for i, token in enumerate(tokens):
        kind = token.type
        if kind == "table_open":
            table = token
        elif kind == "table_close" and table is not None:
            if _caption(state, tokens, i, table):
                dropped.update((i + 1, i + 2, i + 3))
        elif kind == "inline" and token.children:
            # (Most paragraphs hold neither: each test is a substring search, and nothing more is done.)
            if "{" in token.content:
                _image_attributes(token.children)
                if 0 < i < len(tokens) - 1 and tokens[i - 1].type == "paragraph_open":
                    _figure(tokens[i - 1], token, tokens[i + 1])  # (a figure's id is an attribute)
            if "@" in token.content:
                token.children = _citations(token.children)
    if dropped:
        state.tokens = [t for n, t in enumerate(tokens) if n not in dropped]


def _image_attributes(children: list[Token]) -> None:
    for j, child in enumerate(children[:-1]):
        after = children[j + 1]
        if child.type == "image" and after.type == "text" and (found := _LEADING.match(after.content)):
            given = parse_attributes(found.group(1))
            if given.id:
                child.attrSet("id", given.id)
            after.content = after.content[found.end() :]


def _figure(opened: Token, inline: Token, closed: Token) -> None:
    """A paragraph of one image with a `fig-` id (spaces beside it aside) is a figure: its caption the
    image's alt text."""
    shown = [c for c in inline.children or [] if not (c.type == "text" and not c.content.strip())]
    if len(shown) != 1 or shown[0].type != "image":
        return
    figure_id = str(shown[0].attrGet("id") or "")
    if kind_of(figure_id) != "fig" or closed.type != "paragraph_close":
        return
    opened.type, opened.tag, closed.type, closed.tag = "figure_open", "figure", "figure_close", "figure"
    opened.meta["id"] = closed.meta["id"] = figure_id
    closed.meta["image"] = shown[0]


def _caption(state: StateCore, tokens: list[Token], i: int, table: Token) -> bool:
    """The paragraph after a table, if it is a caption (`: ...`, `Table: ...`): the table's. (pandoc takes
    one before a table first; here a line's reading never waits on a table below it, so the cut, which
    reads a manuscript forward, reads every chapter's captions as the whole book does.)"""
    if i + 3 >= len(tokens) or tokens[i + 1].type != "paragraph_open" or tokens[i + 1].level != table.level:
        return False
    found = _CAPTION.fullmatch(tokens[i + 2].content)
    if found is None:
        return False
    given = parse_attributes(found.group(2)) if found.group(2) else None
    if given is not None and given.id:
        table.attrSet("id", given.id)
    children: list[Token] = []
    state.md.inline.parse(found.group(1), state.md, state.env, children)
    table.meta["caption"] = children
    return True


def _citations(children: list[Token]) -> list[Token]:
    from markdown_it.token import Token

    out: list[Token] = []
    for child in children:
        if child.type != "text" or "@" not in child.content:
            out.append(child)
            continue
        text, at = child.content, 0
        for found in _CITATION.finditer(text):
            if found.start() > at:
                out.append(_text(child, text[at : found.start()]))
            cited = Token("crossref", "", 0)
            cited.meta = {"id": found.group(2) or found.group(3), "bare": found.group(1) == "-"}
            cited.content = found.group(0)
            out.append(cited)
            at = found.end()
        if at < len(text):
            out.append(_text(child, text[at:]))
    return out


def _text(like: Token, content: str) -> Token:
    from markdown_it.token import Token

    made = Token("text", "", 0)
    made.content, made.level = content, like.level
    return made


def targets(tokens: list[Token], parse_inline: Any) -> list[tuple[int, int, str]]:
    """The numbered targets of a block parse's tokens (the cut's, whose inline content is not parsed), as
    (first line, line after the last, id): each figure (parsing the inline content of a paragraph only when
    it holds a target's attributes), and each table caption with a `tbl-` id. (A caption is read alone: the
    cut may read it apart from the table before it, so one after no table is numbered too.)"""
    found: list[tuple[int, int, str]] = []
    for i, token in enumerate(tokens):
        if token.type == "inline" and i and tokens[i - 1].type == "paragraph_open" and token.map:
            if _TARGET.search(token.content) is None:
                continue
            caption = _CAPTION.fullmatch(token.content)
            given = parse_attributes(caption.group(2)) if caption and caption.group(2) else None
            if given is not None and kind_of(given.id or "") == "tbl":
                found.append((token.map[0], token.map[1], str(given.id)))
                continue
            inline = parse_inline(token.content)
            shown = [c for c in inline.children or [] if not (c.type == "text" and not c.content.strip())]
            if len(shown) == 1 and shown[0].type == "image":
                figure_id = str(shown[0].attrGet("id") or "")
                if kind_of(figure_id) == "fig":
                    found.append((token.map[0], token.map[1], figure_id))
    return found


def inline_of(children: list[Token]) -> Token:
    """An inline token holding `children` (a table's caption, for a writer that takes one)."""
    from markdown_it.token import Token

    made = Token("inline", "", 0)
    made.children = children
    return made


def label(kind: str, number: str, bare: bool = False) -> str:
    """What a reference to a target reads: `Figure 3`, or `3` alone."""
    return number if bare else f"{NAMES[kind]}\u00a0{number}"
