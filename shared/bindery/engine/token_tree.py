"""markdown-it's tokens, a flat list in which an opening token and its closing one bracket what is inside,
read as the tree they describe: where a token closes, a list's items, the plain text of inline tokens."""

from __future__ import annotations

from markdown_it.token import Token


def plain_text(children: list[Token]) -> str:
    """The text of inline tokens, without their markup."""
    return "".join(c.content for c in children if c.type in ("text", "text_special", "code_inline"))


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


def list_items(inner: list[Token]) -> list[list[Token]]:
    """The list items among a list's tokens, each as the tokens inside it."""
    items, i = [], 0
    while i < len(inner):
        end = close_of(inner, i)
        if inner[i].type == "list_item_open":
            items.append(inner[i + 1 : end])
        i = end + 1
    return items
