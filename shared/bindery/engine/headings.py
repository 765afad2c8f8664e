"""A heading's identifier, as pandoc gives it, so that a link written for pandoc (or GitHub, or Quarto,
which read the same) lands: `[see](#some-section)`.

- **Attributes** (pandoc's `header_attributes`): `# Title {#id .class key=value}` at the end of a heading
  gives it its id and classes, and leaves its text; `{-}` is `.unnumbered`. `install` reads them before a
  heading's inline content is parsed, onto its `heading_open` token. An `.unlisted` heading, and every
  heading under it, is marked `unlisted` in its token's meta: as pandoc's contents, no format's lists it
  (the html's and epub's contents, the pdf's contents and outline, the docx's contents field).
- **Identifiers** (pandoc's `auto_identifiers`, `Text.Pandoc.Shared.inlineListToIdentifier`): the heading's
  text with its formatting, links and images reduced to their words and its notes left out, lowercased;
  only letters, numbers, spaces, `_`, `-` and `.` kept; its words joined by `-`; everything before its
  first letter dropped; `section` if nothing is left. `Identifiers` makes each unique in the book as pandoc
  does, in the order the headings come: the second `intro` is `intro-1`, then `intro-2`, skipping any taken,
  an explicit id among them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the cut and a build's anchors import this module; markdown-it loads when one parses
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore
    from markdown_it.token import Token

# pandoc's attributes: `{#id .class key=value key="a value"}`, at the end of the heading's text. An id is
# pandoc's identifier: a letter, then letters, digits, `-`, `_`, `:` and `.` (so one is never `x<y` or `50%`).
ATTRIBUTE = r'(?:#[^\W\d_][\w:.-]*|\.[^\s{}#.="]+|[A-Za-z_][\w.-]*=(?:"[^"]*"|[^\s{}"]*)|-)'
ATTRIBUTES = re.compile(r"(?:^|(?<=\s))\{\s*(" + ATTRIBUTE + r"(?:\s+" + ATTRIBUTE + r")*)\s*\}\s*$")
_ONE = re.compile(ATTRIBUTE)
ATTRIBUTE_LIST = re.compile(r"\s*" + ATTRIBUTE + r"(?:\s+" + ATTRIBUTE + r")*\s*")  # what braces hold, whole
UNNUMBERED = "unnumbered"
UNLISTED = "unlisted"
# The ids Bindery gives what it writes around the text: a chapter's section (`ch-2`), a note and its
# citations (`fn-ch1-1`, `fnref-ch1-1`, `fnref-ch1-1:1`). No heading takes one, so none is on a page twice.
RESERVED = re.compile(r"(?:ch|fn-ch\d+|fnref-ch\d+)-\d+(?::\d+)?")
FALLBACK = "section"


def install(md: MarkdownIt) -> None:
    md.core.ruler.before("inline", "heading_attributes", _heading_attributes)


def _heading_attributes(state: StateCore) -> None:
    if "{" not in state.src:
        return  # no attributes anywhere (a substring search, not a walk of every token)
    tokens = state.tokens
    under: int | None = None  # the level of the unlisted heading those that follow stand under, if any
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and i + 1 < len(tokens):
            inline = tokens[i + 1]
            inline.content, found = split_attributes(inline.content)
            if found is not None:
                _set(token, found)
            # The chapter's title is its first token; a `#` heading after it stands under it, at 2.
            level = 1 if i == 0 and token.tag == "h1" else max(int(token.tag[1]), 2)
            if under is not None and level <= under:
                under = None
            if under is None and UNLISTED in str(token.attrGet("class") or "").split():
                under = level
            if under is not None:
                token.meta["unlisted"] = True


def split_attributes(content: str) -> tuple[str, str | None]:
    """A heading's text without the attributes that end it, and those attributes (`#id .class`), if any."""
    found = ATTRIBUTES.search(content) if content.endswith("}") else None
    if found is None:
        return content, None
    return content[: found.start()].rstrip(), found.group(1)


def _set(token: Token, attributes: str) -> None:
    given = parse_attributes(attributes)
    if given.id:
        token.attrSet("id", given.id)
    if given.classes:
        token.attrSet("class", " ".join(given.classes))
    if given.values:
        token.meta["attributes"] = given.values


@dataclass(frozen=True)
class Attributes:
    id: str | None = None
    classes: tuple[str, ...] = ()
    values: dict[str, str] = field(default_factory=dict)


def parse_attributes(attributes: str) -> Attributes:
    """`#id .class key=value` as pandoc reads them (the last id given is the one kept)."""
    found, classes, values = None, [], {}
    for attribute in _ONE.findall(attributes):
        if attribute.startswith("#"):
            found = attribute[1:]
        elif attribute.startswith("."):
            classes.append(attribute[1:])
        elif attribute == "-":
            classes.append(UNNUMBERED)
        else:
            key, value = attribute.split("=", 1)
            values[key] = value.strip('"')
    return Attributes(found, tuple(classes), values)


# pandoc reads markdown with `smart` on: these are dashes and an ellipsis in its text (so not in an id).
_SMART = re.compile(r"---|--|\.\.\.")
_SMARTENED = {"---": "\u2014", "--": "\u2013", "...": "\u2026"}


def words(children: list[Token]) -> str:
    """A heading's inline content as pandoc's `stringify` reads it: its text (its dashes and ellipses as
    pandoc's `smart` sets them), code and images' alt text, with line breaks as spaces, and no notes or raw
    HTML."""
    out = []
    for child in children:
        kind = child.type
        if kind == "text":
            out.append(_SMART.sub(lambda m: _SMARTENED[m[0]], child.content))
        elif kind in ("text_special", "code_inline", "math_inline", "math_display"):  # (math: its TeX)
            out.append(child.content)
        elif kind in ("softbreak", "hardbreak"):
            out.append(" ")
        elif kind == "image":
            out.append(words(child.children or []))
    return "".join(out)


def _kept(char: str) -> bool:
    """pandoc's `isAlphaNum c || isSpace c || c elem "_-."`: a letter or number of any script (Haskell's
    isAlpha and isNumber: general categories L and N; a combining mark is neither)."""
    return char in "_-." or char.isspace() or unicodedata.category(char)[0] in "LN"


def identifier(text: str) -> str:
    """pandoc's identifier for a heading whose words are `text` ("" when none is left: see FALLBACK)."""
    kept = "".join(c for c in text.lower() if _kept(c))
    joined = "-".join(kept.split())
    start = next((i for i, c in enumerate(joined) if unicodedata.category(c)[0] == "L"), len(joined))
    return joined[start:]


class Identifiers:
    """The book's identifiers so far, each given once: a heading's own (`{#id}`) as it is, another's as
    pandoc numbers it. An id given twice is the first heading's: a later one is numbered from its words
    (pandoc gives both the id, which no page may hold twice, and a link lands on the first); and one of
    Bindery's own (`RESERVED`) is numbered too (`## Ch 2` is `ch-2-1`)."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self._next: dict[str, int] = {}  # a base identifier -> the first number that may still be free

    def claim(self, explicit: str | None, text: str) -> str:
        if explicit and explicit not in self.used and not RESERVED.fullmatch(explicit):
            self.used.add(explicit)
            return explicit
        base = identifier(text) or FALLBACK
        if base not in self.used and not RESERVED.fullmatch(base):
            self.used.add(base)
            return base
        # The first number free, as pandoc looks for it from 1: numbers below the last one given were taken
        # then and still are (identifiers are only ever added), so the search goes on from there.
        number = self._next.get(base, 1)
        while f"{base}-{number}" in self.used or RESERVED.fullmatch(f"{base}-{number}"):
            number += 1
        self._next[base] = number + 1
        self.used.add(f"{base}-{number}")
        return f"{base}-{number}"


def explicit_and_words(tokens: list[Token], index: int) -> tuple[str | None, str]:
    """The explicit id and the words of the heading opened at `tokens[index]`."""
    explicit: Any = tokens[index].attrGet("id")
    return (str(explicit) if explicit else None), words(tokens[index + 1].children or [])
