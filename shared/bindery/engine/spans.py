"""Bracketed spans, as pandoc reads them (`bracketed_spans`): `[text]{#id .class key=value}`.

- Its words are set as they would be without the brackets, inside a `span_open`/`span_close` pair that
  carries the attributes: `class` on the token; its id, and pandoc's `key=value` pairs, in its `meta`.
- Its id is a target of the book (`targets`, which the cut reads, feeds `bindery.engine.anchors`), so a
  link to `#id` lands on it in every format, as pandoc's guide's links to `[...]{#option--reference-doc}`
  do. Only the span the book's index holds takes the id (`Links.owns`): the first of an id, in its chapter.
- `.smallcaps` is set in small capitals in every format; any other class reaches the html and epub as a
  class, and `custom-style="Name"` the docx as that character style (pandoc's reading:
  `bindery.engine.docx_notes.custom_style`; a div's is a paragraph style).

A span is tried before a link (as pandoc does): `[words]{.x}` is a span even where `[words]` names a
heading; `[words](url)` and `[words][ref]` are links, whose `]` is not followed by `{`.
"""

from __future__ import annotations

import re
from html import escape
from typing import TYPE_CHECKING, Any, TypeGuard

from bindery.engine.headings import ATTRIBUTE, RESERVED, parse_attributes

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_inline import StateInline
    from markdown_it.token import Token

# The attributes right after a span's `]`; each part stops at a brace, so a failed try reads no further.
_ATTRIBUTES = re.compile(r"\{\s*(" + ATTRIBUTE + r"(?:\s+" + ATTRIBUTE + r")*)\s*\}")
# A block's inline content that may hold a span with an id (a byte search first, then this).
_WITH_ID = re.compile(r"\]\{[^{}]*#")
SPAN_ID_LINE = re.compile(rb"\]\{[^{}\n]*#")  # a line the cut reads for a span's id
SMALLCAPS = "smallcaps"
CUSTOM_STYLE = "custom-style"


def install(md: MarkdownIt) -> None:
    md.inline.ruler.before("link", "bracketed_span", bracketed_span)


def bracketed_span(state: StateInline, silent: bool) -> bool:
    start = state.pos
    if state.src[start] != "[" or state.src[start + 1 : start + 2] == "^":
        return False  # (`[^1]` cites a note, as pandoc reads it)
    # (Its label's end is found even when silent: kept for the paragraph, it spares a link's walk.)
    end = state.md.helpers.parseLinkLabel(state, start, False)
    if silent or end < 0 or end + 1 >= state.posMax or state.src[end + 1] != "{":
        return False  # (silent: a link's label walks on through a span, which may stand in its words)
    found = _ATTRIBUTES.match(state.src, end + 1, state.posMax)
    if found is None:
        return False
    given = parse_attributes(found.group(1))
    values = dict(given.values)
    span_id = given.id or values.pop("id", None)  # (`id=x`, `class="a b"`: pandoc's id and classes)
    named = [*given.classes, *values.pop("class", "").split()]
    opened = state.push("span_open", "span", 1)
    if named:
        opened.attrSet("class", " ".join(named))
    opened.meta.update(id=span_id, values=values)
    maximum = state.posMax
    state.pos, state.posMax = start + 1, end
    state.md.inline.tokenize(state)
    state.posMax = maximum
    state.push("span_close", "span", -1)
    state.pos = found.end()
    return True


def claimable(span_id: str | None) -> TypeGuard[str]:
    """Whether a span may take this id: not one of Bindery's own (`ch-2`, a note's), which a page already
    holds, nor a numbered target's (`fig-`, `tbl-`, `sec-`), which is its figure's, table's or section's."""
    if not span_id or RESERVED.fullmatch(span_id):
        return False
    kind = span_id.split("-", 1)[0]
    return not (kind in ("fig", "tbl", "sec") and "-" in span_id)


def classes(token: Token) -> list[str]:
    return str(token.attrGet("class") or "").split()


def targets(tokens: list[Token], parse_inline: Any) -> list[tuple[int, int, str]]:
    """The ids of the spans of a block parse's tokens (the cut's, whose inline content is not parsed), as
    (first line, line after the last, id), in order: each block's inline content that may hold one is
    parsed. A span inside a footnote's definition is the note's, as its headings are: no target of the
    book's (the note is set in the chapter citing it)."""
    found: list[tuple[int, int, str]] = []
    in_note = False
    for token in tokens:
        if token.type in ("footnote_reference_open", "footnote_reference_close"):
            in_note = token.type == "footnote_reference_open"
        elif token.type == "inline" and not in_note and token.map and "]{" in token.content:
            if _WITH_ID.search(token.content) is None:
                continue
            for child in parse_inline(token.content).children or []:
                if child.type == "span_open" and claimable(child.meta.get("id")):
                    found.append((token.map[0], token.map[1], str(child.meta["id"])))
    return found


def html_attributes(token: Token, owned: bool) -> str:
    """A span's attributes as html writes them: its id (where the book's index holds this span), its
    classes, and each `key=value` as `data-key` (pandoc's html5), escaped."""
    out = [f' id="{escape(token.meta["id"])}"'] if owned and claimable(token.meta.get("id")) else []
    if token.attrGet("class"):
        out.append(f' class="{escape(str(token.attrGet("class")))}"')
    for key, value in token.meta.get("values", {}).items():
        key = key.lower()
        if key in _HTML_KEYS or key.startswith("data-"):
            out.append(f' {escape(key)}="{escape(value)}"')  # (as pandoc's html5 writes them)
        elif not key.startswith("on") and key != "style":
            out.append(f' data-{escape(key)}="{escape(value)}"')
    return "".join(out)


# The attributes a span's `key=value` gives the html as they are: no script, no style, no address.
_HTML_KEYS = frozenset({"lang", "dir", "title", "translate"})
