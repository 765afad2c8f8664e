"""markdown-it's tokens, a flat list in which an opening token and its closing one bracket what is inside,
read as the tree they describe: where a token closes, a list's items, the plain text of inline tokens (as
Typst sets it, as a reader hears an image's alt text, as Word's contents copy a heading), and the image a
paragraph holds alone."""

from __future__ import annotations

from collections.abc import Iterator

from markdown_it.token import Token

# The inline tokens whose content is text a reader sees (a formula's: its TeX, as pandoc's `stringify`).
_TEXTS = ("text", "text_special", "code_inline", "math_inline", "math_display")


def plain_text(children: list[Token]) -> str:
    """The text of inline tokens, without their markup."""
    return "".join(c.content for c in children if c.type in _TEXTS)


def close_of(tokens: list[Token], i: int) -> int:
    """The index of the token that closes the one at `i` (itself, for a token that opens nothing)."""
    if tokens[i].nesting != 1:
        return i
    depth = 0
    for j in range(i, len(tokens)):
        depth += tokens[j].nesting
        if depth == 0:
            return j
    return len(tokens) - 1


def in_runs(tokens: list[Token], most: int) -> Iterator[list[Token]]:
    """A run of blocks' tokens in runs of at most `most` blocks each (one run, empty, if there are none)."""
    start, count, i = 0, 0, 0
    while i < len(tokens):
        i = close_of(tokens, i) + 1
        count += 1
        if count == most:
            yield tokens[start:i]
            start, count = i, 0
    if start < len(tokens) or not tokens:
        yield tokens[start:]


def list_items(inner: list[Token]) -> list[list[Token]]:
    """The list items among a list's tokens, each as the tokens inside it."""
    items, i = [], 0
    while i < len(inner):
        end = close_of(inner, i)
        if inner[i].type == "list_item_open":
            items.append(inner[i + 1 : end])
        i = end + 1
    return items


def spoken_text(token: Token) -> str:
    """The text of an inline token or an image, as a reader hears it."""
    return _inline_text(token, images=True)


def heading_text(inline: Token) -> str:
    """A heading's text as the body shows it and Word's contents copy it: no note's marker, no image."""
    return _inline_text(inline, images=False).strip()


def _inline_text(token: Token, *, images: bool) -> str:
    parts: list[str] = []
    for child in token.children or ():
        if child.type in (*_TEXTS, "html_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image" and images:
            parts.append(_inline_text(child, images=True))
    return "".join(parts)


def image_alone(inline: Token) -> Token | None:
    children = [
        c
        for c in inline.children or ()
        if not (c.type == "text" and not c.content.strip()) and c.type not in ("link_open", "link_close")
    ]
    return children[0] if len(children) == 1 and children[0].type == "image" else None
