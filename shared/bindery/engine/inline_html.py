"""A safe subset of inline HTML, read as what it means in every format: `<sub>`, `<sup>`, `<br>`, `<kbd>`,
`<mark>`, `<small>`, `<abbr title="...">` and `<span class="...">`. Each becomes the tokens Markdown's own
syntax gives (`H<sub>2</sub>O` is `H~2~O`; `<br>` a hard break; `<span class="x">` a bracketed span's), so
no raw HTML ever reaches a page: every other tag, an attribute outside these, and a tag left unclosed or
closed across another element's end is shown as the text it is.
"""

from __future__ import annotations

import re
from html import unescape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore
    from markdown_it.rules_inline import StateInline
    from markdown_it.token import Token

PAIRED = ("sub", "sup", "kbd", "mark", "small", "abbr", "span")
_TAG = re.compile(
    r"<(?:(sub|sup|kbd|mark|small)|abbr(?:\s+title=\"([^\"<>]*)\")?|span\s+class=\"([\w -]*)\")\s*>"
    r"|</(sub|sup|kbd|mark|small|abbr|span)\s*>|<br\s*/?>",
    re.IGNORECASE,
)


def install(md: MarkdownIt) -> None:
    md.inline.ruler.before("html_inline", "html_subset", html_subset)
    md.core.ruler.after("inline", "html_balance", html_balance)


def html_subset(state: StateInline, silent: bool) -> bool:
    """A tag of the subset, as a token of no nesting yet: `html_balance` pairs them once the paragraph is
    read (markdown-it keeps a list of emphasis marks for each element open, which a tag never closed would
    leave unread)."""
    found = _TAG.match(state.src, state.pos, state.posMax)
    if found is None:
        return False
    if not silent:
        said = found[0]
        if said[1:3].lower() == "br":
            token = state.push("hardbreak", "br", 0)
        elif found[4]:  # a closer
            tag = found[4].lower()
            token = state.push(f"{tag}_close", tag, 0)
        else:
            tag = (found[1] or ("abbr" if said[1:5].lower() == "abbr" else "span")).lower()
            token = state.push(f"{tag}_open", tag, 0)
            if found[2]:
                token.attrSet("title", unescape(found[2]))
            if found[3] is not None and found[3].strip():
                token.attrSet("class", " ".join(found[3].split()))
            token.meta.update(id=None, values={})  # (as a bracketed span's, which the renderers read)
        token.markup, token.info = said, "html"
    state.pos = found.end()
    return True


def html_balance(state: StateCore) -> None:
    """Pair the subset's tags: one closed inside the element it opened in becomes an element (nesting, and
    one level more for what it holds); one left open, or closing what is not open, is shown as its text."""
    if "<" not in state.src:
        return
    for token in state.tokens:
        if token.type == "inline" and token.children and "<" in token.content:
            _balance(token.children)


def _balance(children: list[Token]) -> None:
    opened: list[Token] = []  # every element open, Markdown's and the subset's
    paired: set[int] = set()  # the subset's tags that pair (by id)
    for child in children:
        if child.info != "html" or child.type == "hardbreak":
            if child.nesting == 1:
                opened.append(child)
            elif child.nesting == -1:
                while opened and opened[-1].info == "html":
                    opened.pop()  # left open inside an element that ends here: text
                if opened:
                    opened.pop()
        elif child.type.endswith("_open"):
            opened.append(child)
        elif opened and opened[-1].info == "html" and opened[-1].tag == child.tag:
            paired.update((id(opened.pop()), id(child)))
    depth = 0
    for child in children:
        if child.info != "html" or child.type == "hardbreak":
            child.level += depth
        elif id(child) not in paired:
            child.type, child.tag, child.content, child.attrs, child.info = "text", "", child.markup, {}, ""
            child.level += depth
        elif child.type.endswith("_open"):
            child.nesting, child.level = 1, child.level + depth
            depth += 1
        else:
            depth -= 1
            child.nesting, child.level = -1, child.level + depth
