"""What a docx chapter numbers apart from its text (`bindery.engine.wordml` writes the rest): its notes, in
the order Word will number them, the bookmarks a link lands on, and the ids that run through the document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

from bindery.engine import divs, spans
from bindery.engine.ooxml import RunState, text

if TYPE_CHECKING:
    from markdown_it.token import Token

    from bindery.engine.anchors import Links


@dataclass
class Counters:
    """Ids that run through the whole document."""

    note: int = 0
    num: int = 2  # 1 is the bullet list's; each ordered list gets its own, to start at its own number
    link: int = 0
    picture: int = 1
    bookmark: int = 0  # each heading's and numbered target's, where an internal link lands (`anchors`)
    styles: dict[str, tuple[str, str]] = field(default_factory=dict)  # custom styles: id -> (type, name)
    style_ids: dict[str, tuple[str, str]] = field(default_factory=dict)  # id lowercased -> (id, type)
    pending: str = ""  # a div's bookmark, for the next paragraph of the body to open with (`div_mark`)


NOTE_MARK = '<w:r><w:rPr><w:rStyle w:val="FootnoteReference"/></w:rPr><w:footnoteRef/></w:r>'


def span_edge(
    counters: Counters, links: Links | None, token: Token, state: RunState, opened: list[tuple[int, int]]
) -> str:
    """A bracketed span's start or end (`bindery.engine.spans`): a bookmark named as its id where the book's
    index holds this span (a link to it lands there), and small capitals for `.smallcaps`."""
    if token.type == "span_close":
        mark, small = opened.pop()
        state.smallcaps -= small % 2
        if small > 1:
            state.styles.pop()
        return f'<w:bookmarkEnd w:id="{mark}"/>' if mark else ""
    small = int(spans.SMALLCAPS in spans.classes(token))
    state.smallcaps += small
    styled = custom_style(counters, token, "character")
    if styled:
        state.styles.append(styled)
        small += 2  # (its custom style: closed with it)
    span_id = token.meta.get("id")
    if not spans.claimable(span_id) or links is None or not links.owns(span_id):
        opened.append((0, small))
        return ""
    counters.bookmark += 1
    opened.append((counters.bookmark, small))
    return f'<w:bookmarkStart w:id="{counters.bookmark}" w:name="{text(span_id)}"/>'


def custom_style(counters: Counters, token: Token, kind: str) -> str:
    """The id of the style a div's or span's `custom-style="Name"` names (pandoc's: a paragraph style for a
    div, a character style for a span), or else its first class that no format sets by its own style (not an
    aside's, nor `.smallcaps`): kept in `counters.styles` for the document's styles; or ""."""
    name = " ".join(str(token.meta.get("values", {}).get(spans.CUSTOM_STYLE, "")).split())[:100]
    if not name and not (kind == "paragraph" and divs.aside(token)):
        name = next((c for c in spans.classes(token) if c != spans.SMALLCAPS), "")[:100]
    style_id = re.sub(r"[^A-Za-z0-9]", "", name)[:60]
    if not style_id:
        return ""
    # Word names a style once, whatever its case, and for one type: a name a style of the other type holds
    # (a span's `.Note`, where Note is the asides' paragraph style) is made its pair, as Word pairs them.
    held = counters.style_ids.get(style_id.lower()) or _document_styles().get(style_id.lower())
    if held is not None and held[1] != kind:
        pair = " Char" if kind == "character" else " Para"
        name, style_id = name + pair, style_id + pair.strip()
        held = counters.style_ids.get(style_id.lower()) or _document_styles().get(style_id.lower())
        if held is not None and held[1] != kind:
            return ""  # (its pair's name taken by the other type too: no style)
    if held is not None:
        return held[0]  # the document's own, or one made before under another case
    counters.style_ids[style_id.lower()] = (style_id, kind)
    counters.styles[style_id] = (kind, name)
    return style_id


@cache
def _document_styles() -> dict[str, tuple[str, str]]:
    """The styles the document defines (`docx_parts.styles`), by their ids lowercased: (id, type)."""
    from bindery.engine.docx_parts import styles

    found = re.findall(r'<w:style w:type="(\w+)"[^>]*w:styleId="([^"]+)"', styles("en", False, False))
    return {style_id.lower(): (style_id, kind) for kind, style_id in found}


def custom_styles(made: dict[str, tuple[str, str]], known: str) -> str:
    """The styles `made` names that `known` (the document's styles part) does not define: each based on the
    document's Body Text (a paragraph's), so an editor restyles it in Word."""
    out = []
    for style_id, (kind, name) in made.items():
        if f'w:styleId="{style_id}"' not in known:
            based = '<w:basedOn w:val="BodyText"/>' if kind == "paragraph" else ""
            named = f'<w:name w:val="{text(name)}"/>{based}<w:qFormat/>'
            out.append(f'<w:style w:type="{kind}" w:customStyle="1" w:styleId="{style_id}">{named}</w:style>')
    return "".join(out)


def div_mark(counters: Counters, tokens: list[Token], i: int, links: Links | None) -> str:
    """The bookmark of the div opened at `tokens[i]`, named as its id, where the book's index holds it
    (`divs.targets`): a link to it lands there. Where a paragraph comes first in it, that paragraph opens
    with it (`pending`: pandoc reads no bookmark between paragraphs) and "" is returned; else it is
    returned, to stand before the div's first block (a table, a list, a heading...); or ""."""
    div_id = tokens[i].meta.get("id")
    if not spans.claimable(div_id) or links is None or not links.owns(div_id):
        return ""
    mark = bookmarked(counters, div_id, "")
    if i + 1 < len(tokens) and tokens[i + 1].type == "paragraph_open":
        counters.pending += mark
        return ""
    return mark


def bookmarked(counters: Counters, name: str, runs: str) -> str:
    """`runs` inside a bookmark named `name` (a heading's or a numbered target's id)."""
    counters.bookmark += 1
    mark = counters.bookmark
    return f'<w:bookmarkStart w:id="{mark}" w:name="{text(name)}"/>{runs}<w:bookmarkEnd w:id="{mark}"/>'


def note_numbers(tokens: list[Token], counters: Counters) -> tuple[dict[int, int], dict[int, list[int]]]:
    """Number the notes as Word will: in the order of their references in the body. A note's reference
    is its first citation from the body, wherever its definition stands (one before its citation, or
    one citing itself, is still referenced); the notes cited only from inside a note are referenced
    right after that note's, in the order they are cited (depth first: theirs after them)."""
    notes: dict[int, int] = {}  # markdown-it's note id in the chapter -> Word's
    follows: dict[int, list[int]] = {}  # a note cited in the body -> those cited only inside it, after it
    body: list[int] = []  # the notes the body cites, in order
    cites: dict[int, list[int]] = {}  # a note -> the notes its text cites
    owner: int | None = None  # the note whose text is being read
    for token in tokens:
        if token.type == "footnote_open":
            owner = token.meta["id"]
        elif token.type == "footnote_close":
            owner = None
        for child in token.children or ():
            if child.type == "footnote_ref":
                (body if owner is None else cites.setdefault(owner, [])).append(child.meta["id"])
    from_body = set(body)
    for first in body:
        stack = [first]
        while stack:  # (a stack, not recursion: notes may cite notes to any depth)
            note = stack.pop()
            if note in notes:
                continue
            counters.note += 1
            notes[note] = counters.note
            if note != first:
                follows.setdefault(first, []).append(note)
            inner = [n for n in cites.get(note, ()) if n not in from_body and n not in notes]
            stack.extend(reversed(inner))
    return notes, follows
