"""Bare URLs as links, as pandoc's `autolink_bare_uris` reads them: an address with its scheme (`https://`,
`http://`, `ftp://`, `mailto:`) in a paragraph's text is a link to itself, as `<https://...>` is. A
sentence's punctuation after it (`.`, `,`, `;`, `:`, `!`, `?`, a quote, or a closing parenthesis with no
opening one inside the address) is not the address's. Text already in a link or code is left alone; one
search of each text, so linear work.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore
    from markdown_it.token import Token

_SCHEMES = ("http://", "https://", "ftp://", "mailto:")
# An address: its scheme (in any case), then what no space, angle bracket, quote or backtick ends; an
# apostrophe inside it is its own (`https://en.wikipedia.org/wiki/Ender's_Game`).
_URL = re.compile(
    r"(?<![\w@/.-])(?:https?://|ftp://|mailto:)(?:[^\s<>\"'`]|'(?=[^\s<>\"'`]))+", re.IGNORECASE
)
_TRAILING = ".,;:!?*_~"


def install(md: MarkdownIt) -> None:
    md.core.ruler.after("inline", "bare_urls", bare_urls)


def bare_urls(state: StateCore) -> None:
    if "://" not in state.src and "mailto:" not in state.src.lower():
        return
    for token in state.tokens:
        if token.type == "inline" and token.children and _has_scheme(token.content):
            token.children = _linked(state, token.children)


def _has_scheme(text: str) -> bool:
    lowered = text.lower()
    return any(scheme in lowered for scheme in _SCHEMES)


def _end(url: str) -> str:
    """The address without the sentence's punctuation after it, found in one walk back from its end (a
    walk that counted the parentheses again at each step was quadratic in `https://a.b/)))...`)."""
    opened, closed, end = url.count("("), url.count(")"), len(url)
    while end and (url[end - 1] in _TRAILING or (url[end - 1] == ")" and opened < closed)):
        closed -= url[end - 1] == ")"
        end -= 1
    return url[:end]


def _linked(state: StateCore, children: list[Token]) -> list[Token]:
    from markdown_it.token import Token

    out: list[Token] = []
    depth = 0  # inside a link: its words are not an address of their own
    for child in children:
        if child.type == "link_open":
            depth += 1
        elif child.type == "link_close":
            depth -= 1
        if child.type != "text" or depth or not _has_scheme(child.content):
            out.append(child)
            continue
        text, at = child.content, 0
        for found in _URL.finditer(text):
            url = _end(found[0])
            href = state.md.normalizeLink(url)
            if url.endswith(("//", ":")) or not state.md.validateLink(href):
                continue
            if found.start() > at:
                out.append(_text(Token, text[at : found.start()], child.level))
            opened = Token("link_open", "a", 1, level=child.level, markup="linkify", info="auto")
            opened.attrSet("href", href)
            out += [opened, _text(Token, url, child.level + 1)]
            out.append(Token("link_close", "a", -1, level=child.level, markup="linkify", info="auto"))
            at = found.start() + len(url)
        if at == 0:
            out.append(child)
        elif at < len(text):
            out.append(_text(Token, text[at:], child.level))
    return out


def _text(token_type: type[Token], content: str, level: int) -> Token:
    return token_type("text", "", 0, content=content, level=level)
