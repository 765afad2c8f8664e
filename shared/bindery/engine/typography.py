"""Typography, as a typesetter sets a book's text: quotation marks as the book's language writes them
(English “ ” ‘ ’, German „ “ ‚ ‘, French « » with their narrow no-break spaces, ...), an apostrophe as ’,
`--` and `---` as en and em dashes, `...` as an ellipsis, as pandoc's `smart` extension reads them. In French,
the space an author types before `;`, `!`, `?` (a narrow no-break space) and `:` (a no-break space) does not
break either. Code, math, raw HTML and an autolink's address are left as typed.

`install` adds a core rule that does it to every inline token's text when the parser's options carry
quotes (`configure`: a build's, when its export's `typography` is on); the cut's parser carries none, so
what the book's index holds (titles, ids) is as written, and `plain` sets a title the same way.

Which quote is which is markdown-it's `smartquotes` reading (an opener after a space or punctuation and
before a word, a closer after a word, an apostrophe inside one; a closer matches the nearest opener of its
kind at its level), in work linear in the paragraph: markdown-it's rewrote the whole text at each quote
and scanned the openers of the other kind at each closer.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore
    from markdown_it.token import Token

Quotes = tuple[str, str, str, str]  # double open, double close, single open, single close
NNBSP, NBSP = "\u202f", "\u00a0"
# Each language's quotes, by its primary subtag (CLDR's delimiters): double open, close; single open, close.
_FRENCH = ("«" + NNBSP, NNBSP + "»", "‹" + NNBSP, NNBSP + "›")
QUOTES: dict[str, Quotes] = {
    "en": ("“", "”", "‘", "’"),
    "de": ("„", "“", "‚", "‘"),
    "cs": ("„", "“", "‚", "‘"),
    "sk": ("„", "“", "‚", "‘"),
    "sl": ("„", "“", "‚", "‘"),
    "is": ("„", "“", "‚", "‘"),
    "lt": ("„", "“", "‚", "‘"),
    "fr": _FRENCH,
    "es": ("«", "»", "“", "”"),
    "it": ("«", "»", "“", "”"),
    "pt": ("“", "”", "‘", "’"),
    "ca": ("«", "»", "“", "”"),
    "el": ("«", "»", "“", "”"),
    "nl": ("‘", "’", "“", "”"),
    "da": ("“", "”", "‘", "’"),
    "nb": ("«", "»", "‘", "’"),
    "nn": ("«", "»", "‘", "’"),
    "no": ("«", "»", "‘", "’"),
    "sv": ("”", "”", "’", "’"),
    "fi": ("”", "”", "’", "’"),
    "pl": ("„", "”", "«", "»"),
    "hu": ("„", "”", "»", "«"),
    "ro": ("„", "”", "«", "»"),
    "hr": ("„", "“", "‚", "‘"),
    "ru": ("«", "»", "„", "“"),
    "uk": ("«", "»", "„", "“"),
    "be": ("«", "»", "„", "“"),
    "bg": ("„", "“", "„", "“"),
    "tr": ("“", "”", "‘", "’"),
    "ja": ("「", "」", "『", "』"),
    "zh": ("“", "”", "‘", "’"),
    "ko": ("“", "”", "‘", "’"),
    "he": ("”", "”", "’", "’"),
    "ar": ("«", "»", "‹", "›"),
}
APOSTROPHE = "’"
_DASHES = re.compile(r"---|--|\.\.\.")
_SET = {"---": "—", "--": "–", "...": "…"}
# French: the space typed before high punctuation does not break (a narrow one before ; ! ?, a full one :).
_FRENCH_SPACE = re.compile(r" (?=[;!?:])")
_QUOTE = re.compile("['\"]")
_WANTED = re.compile("['\"]|--|\\.\\.\\.")  # what a paragraph must hold for this to change it
_FRENCH_WANTED = re.compile("['\"]|--|\\.\\.\\.| [;!?:]")
_OPTION = "bindery_quotes"


def quotes_for(language: str) -> Quotes:
    """The quotes of a BCP 47 language (`de-CH` is German's), English's for any this table lacks."""
    primary = language.split("-", 1)[0].lower()
    if language.lower().startswith("pt-pt"):
        return ("«", "»", "“", "”")
    return QUOTES.get(primary, QUOTES["en"])


def configure(md: MarkdownIt, quotes: Quotes | None) -> None:
    """Set the typography of what `md` renders from now on: these quotes, or (None) none at all."""
    md.options[_OPTION] = quotes


def setting(md: MarkdownIt) -> list[str] | None:
    """What a chapter's rendering depends on here (a built piece's key holds it)."""
    quotes = md.options.get(_OPTION)
    return list(quotes) if quotes else None


def install(md: MarkdownIt) -> None:
    md.core.ruler.push("typography", _typography)


def _typography(state: StateCore) -> None:
    quotes = state.md.options.get(_OPTION)
    if not quotes:
        return
    wanted = _FRENCH_WANTED if NNBSP in quotes[0] else _WANTED
    for token in state.tokens:
        # (a search of the block's text first: most paragraphs of most books hold no quote or dash)
        if token.type == "inline" and token.children and wanted.search(token.content):
            set_inline(token.children, quotes)


def plain(text: str, quotes: Quotes | None) -> str:
    """`text` (a title, say: no markup) set as `set_inline` sets a paragraph's text."""
    if not quotes or not any(c in text for c in "'\"-."):
        return text
    from markdown_it.token import Token

    token = Token("text", "", 0, content=text)
    set_inline([token], quotes)
    return token.content


def set_inline(tokens: list[Token], quotes: Quotes) -> None:
    """Quotes, dashes and ellipses in `tokens`' text (an inline token's children), in one pass."""
    shown = [t.type == "text" for t in tokens]
    depth = 0  # inside an autolink (its text is its address)
    for i, token in enumerate(tokens):
        if token.type == "link_open" and token.markup in ("autolink", "linkify"):
            depth += 1
        elif token.type == "link_close" and depth:
            depth -= 1
        elif depth:
            shown[i] = False
    before, after = _neighbours(tokens)
    placed = _quotes(tokens, shown, before, after, quotes)
    french = NNBSP in quotes[0]
    for i, token in enumerate(tokens):
        if not shown[i]:
            continue
        content = token.content
        marks = placed.get(i)
        if marks:
            content = "".join(marks.get(n, c) for n, c in enumerate(content))
        if "-" in content or "." in content:
            content = _DASHES.sub(lambda m: _SET[m[0]], content)
        if french and " " in content:
            content = _FRENCH_SPACE.sub(lambda m: NBSP if m.string[m.end()] == ":" else NNBSP, content)
        token.content = content


def _neighbours(tokens: list[Token]) -> tuple[list[str], list[str]]:
    """Each token's character before it and after it, across tokens (markdown-it's reading: a line break,
    or the paragraph's edge, is a space; a token without content, an emphasis's mark say, is skipped)."""
    before, last = [], " "
    for token in tokens:
        before.append(last)
        if token.type in ("softbreak", "hardbreak"):
            last = " "
        elif token.content:
            last = token.content[-1]
    after, first = [" "] * len(tokens), " "
    for i in range(len(tokens) - 1, -1, -1):
        after[i] = first
        token = tokens[i]
        if token.type in ("softbreak", "hardbreak"):
            first = " "
        elif token.content:
            first = token.content[0]
    return before, after


def _punct(char: str) -> bool:
    return unicodedata.category(char).startswith("P") or (
        char.isascii() and not char.isalnum() and char > " "
    )


def _quotes(
    tokens: list[Token], shown: list[bool], before: list[str], after: list[str], quotes: Any
) -> dict[int, dict[int, str]]:
    """Where each quote of the paragraph's text goes, and what it becomes: {token: {position: mark}}."""
    placed: dict[int, dict[int, str]] = {}
    stack: list[tuple[int, int, bool, int]] = []  # openers: (token, position, single, level)
    of_kind: tuple[list[int], list[int]] = ([], [])  # the stack's entries of each kind (double, single)

    def truncate(length: int) -> None:
        del stack[length:]
        for kind in of_kind:
            while kind and kind[-1] >= length:
                kind.pop()

    for i, token in enumerate(tokens):
        level = token.level
        top = len(stack)
        while top and stack[top - 1][3] > level:
            top -= 1
        truncate(top)
        if not shown[i] or ("'" not in token.content and '"' not in token.content):
            continue
        text = token.content
        for found in _QUOTE.finditer(text):
            at = found.start()
            single = found[0] == "'"
            last = text[at - 1] if at else before[i]
            following = text[at + 1] if at + 1 < len(text) else after[i]
            last_space, next_space = last.isspace(), following.isspace()
            last_punct, next_punct = _punct(last), _punct(following)
            can_open = not next_space and not (next_punct and not (last_space or last_punct))
            can_close = not last_space and not (last_punct and not (next_space or next_punct))
            if following == '"' and not single and last.isdigit():
                can_open = can_close = False  # 1"" : an inch
            if can_open and can_close:
                can_open, can_close = last_punct, next_punct
            if not can_open and not can_close:
                if single:
                    placed.setdefault(i, {})[at] = APOSTROPHE
                continue
            if can_close:
                kind = of_kind[single]
                if kind and stack[kind[-1]][3] == level:
                    j = kind[-1]
                    opener_token, opener_at = stack[j][0], stack[j][1]
                    placed.setdefault(opener_token, {})[opener_at] = quotes[2 if single else 0]
                    placed.setdefault(i, {})[at] = quotes[3 if single else 1]
                    truncate(j)
                    continue
            if can_open:
                of_kind[single].append(len(stack))
                stack.append((i, at, single, level))
            elif single:
                placed.setdefault(i, {})[at] = APOSTROPHE
    return placed
