"""A chapter of Markdown as Typst source in which the manuscript is only ever data.

Every word of the manuscript reaches Typst as a string literal (`#"…"`), never as markup or code: inside
a literal Typst reads nothing but `\\` and `"`, and both are escaped here. So `#read("/etc/passwd")`,
`#import`, `#let` loops and unbalanced brackets in a book are printed as the text they are. The only code
in the source is what this module writes around the literals, calls into `book.typ` and Typst's own
elements, each with arguments it made itself.

Nesting is bounded before Typst sees it: the Markdown parser stops nesting blocks at its `maxNesting`
(20) and reads anything deeper as text, so a 100,000-deep list becomes one paragraph, not 100,000 levels
of calls; block quotes nest at most MAX_QUOTE_DEPTH deep here, emphasis and links MAX_INLINE_DEPTH, and a
footnote cited inside a footnote is cited by its number and set after it, not nested.
"""

from __future__ import annotations

import textwrap
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from markdown_it.token import Token

from bindery.engine.figures import Figures
from bindery.images import Asset

# Characters Typst's string literal gives meaning to, or that are better written as escapes.
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_LITERAL = str.maketrans(
    {**{chr(c): f"\\u{{{c:x}}}" for c in [*range(0x20), 0x7F]}, **_ESCAPES}  # controls, as \u{…}
)
_SAFE_SCHEMES = ("http://", "https://", "mailto:")  # a link that leaves the book; the rest stay text


def literal(text: str) -> str:
    """A Typst string literal holding exactly `text`."""
    return '"' + text.translate(_LITERAL) + '"'


def text(value: str) -> str:
    """`value` set as text in markup: a literal, so nothing in it is read as Typst."""
    return "#" + literal(value) if value else ""


def direction(sample: str) -> str:
    """`rtl` when the first strongly directional character is right-to-left (as HTML's dir="auto" reads
    it), else `ltr`."""
    for ch in sample:
        kind = unicodedata.bidirectional(ch)
        if kind in ("R", "AL"):
            return "rtl"
        if kind == "L":
            return "ltr"
    return "ltr"


@dataclass
class Block:
    """What the text block allows a figure or a code line, in the page size being set."""

    width_mm: float
    height_mm: float
    code_columns: int


@dataclass
class Chapter:
    """One chapter's Typst source, and the images it placed (their files must be in the compile's root)."""

    source: str
    images: dict[str, Asset] = field(default_factory=dict)


# Typst applies a few show rules at each quote and stops at 64 nested ones; Markdown may nest 20.
MAX_QUOTE_DEPTH = 8
# Emphasis, strong, strike and links nest without a bound in Markdown; Typst's parser stops at 256 deep.
MAX_INLINE_DEPTH = 32
IMAGE_DPI = 150  # an image no wider than the text block is set at this resolution; a wider one, to fit it
MAX_IMAGE_HEIGHT = 0.6  # of the text block's height, so a tall figure leaves room for its paragraph


def image_size(asset: Asset, width: float, height: float) -> tuple[float, float]:
    """The size in mm to set an image at: IMAGE_DPI, shrunk to fit `width` x `height`, never enlarged."""
    natural_w, natural_h = asset.width * 25.4 / IMAGE_DPI, asset.height * 25.4 / IMAGE_DPI
    scale = min(1.0, width / natural_w, height / natural_h)
    return natural_w * scale, natural_h * scale


def image_file(asset: Asset) -> str:
    """Where, under the compile's root, an asset's bytes are written for Typst to read: named by its
    object id, with the extension of its real type (an asset's own name may have none)."""
    return f"img/{asset.file_name}"


class Writer:
    """Markdown-it's tokens for one chapter, written out as Typst.

    Block tokens open and close Typst calls; inline children become literals inside them. Footnotes are
    set where they are referenced (Typst puts them at the foot of that page): their bodies are collected
    from the footnote block the parser appends, before the chapter is written."""

    def __init__(self, label: str, block: Block, figures: Figures | None):
        self.label, self.block, self.figures = label, block, figures
        self.notes: dict[int, list[Token]] = {}
        self.numbers: dict[int, int] = {}  # each note set so far, or due to be: its number in the chapter
        self.pending: list[int] = []  # notes cited inside a note, to be set after it
        self.images: dict[str, Asset] = {}
        self.quotes = 0  # block quotes open around the block being written
        self.in_note = False  # writing a footnote's body

    def chapter(self, tokens: list[Token]) -> str:
        tokens = self._take_notes(tokens)
        if tokens and tokens[0].type == "heading_open" and tokens[0].tag == "h1":
            tokens = tokens[3:]  # the chapter's own title: book.typ sets it as the chapter's heading
        return self.blocks(tokens)

    def _take_notes(self, tokens: list[Token]) -> list[Token]:
        try:
            start = next(i for i, t in enumerate(tokens) if t.type == "footnote_block_open")
        except StopIteration:
            return tokens
        note: int | None = None
        for token in tokens[start:]:
            if token.type == "footnote_open":
                note = token.meta["id"]
                self.notes[note] = []
            elif token.type == "footnote_close":
                note = None
            elif note is not None and token.type != "footnote_anchor":
                self.notes[note].append(token)
        return tokens[:start]

    def blocks(self, tokens: list[Token]) -> str:
        out: list[str] = []
        i = 0
        while i < len(tokens):
            token = tokens[i]
            end = _close_of(tokens, i)
            inner = tokens[i + 1 : end]
            out.append(self._block(token, inner))
            i = end + 1
        return "".join(out)

    def _block(self, token: Token, inner: list[Token]) -> str:
        kind = token.type
        if kind == "paragraph_open":
            body = self.inline(inner[0].children or []) if inner else ""
            return body if token.hidden else self._paragraph(inner, body)
        if kind == "inline":
            return self.inline(token.children or [])
        if kind == "heading_open":
            level = min(int(token.tag[1]), 6)
            level = 2 if level == 1 else level  # a second # heading inside a chapter sits under it
            return f"#heading(level: {level})[{self.inline(inner[0].children or [])}]\n\n"
        if kind in ("bullet_list_open", "ordered_list_open"):
            items = [self.blocks(item) for item in _children(inner)]
            tight = bool(inner) and len(inner) > 1 and inner[1].hidden
            start = token.attrGet("start")
            call = "enum" if kind == "ordered_list_open" else "list"
            args = f"tight: {'true' if tight else 'false'}" + (f", start: {int(start)}" if start else "")
            return f"#{call}({args}, " + ", ".join(f"[{item}]" for item in items) + ")\n\n"
        if kind == "blockquote_open":
            if self.quotes >= MAX_QUOTE_DEPTH:
                return self.blocks(inner)  # deeper still: its text, at the deepest quote's indent
            self.quotes += 1
            try:
                return f"#quote(block: true)[{self.blocks(inner)}]\n\n"
            finally:
                self.quotes -= 1
        if kind in ("fence", "code_block"):
            language = (token.info or "").strip().split(" ")[0]
            code = "\n".join(self._wrapped(token.content.rstrip("\n")))
            lang = f", lang: {literal(language)}" if language.isascii() and language.isalnum() else ""
            return f"#raw(block: true{lang}, {literal(code)})\n\n"
        if kind == "hr":
            return "#dinkus()\n\n"
        if kind == "html_block":
            return f"#raw(block: true, {literal(token.content.rstrip())})\n\n"  # raw HTML is shown as text
        if kind == "table_open":
            return self._table(inner)
        return self.blocks(inner) if inner else ""

    def _paragraph(self, inner: list[Token], body: str) -> str:
        children = [c for c in (inner[0].children or []) if not (c.type == "text" and not c.content.strip())]
        if len(children) == 1 and children[0].type == "image":
            # A figure: an image alone in its paragraph (perhaps with spaces beside it), centred.
            return f"#align(center)[{body}]\n\n"
        return body + "\n\n"

    def _wrapped(self, code: str) -> list[str]:
        """Code keeps its lines, but one wider than the page wraps rather than running off its edge."""
        lines: list[str] = []
        for line in code.split("\n"):
            lines += textwrap.wrap(
                line, self.block.code_columns, drop_whitespace=False, replace_whitespace=False
            ) or [""]
        return lines

    def _table(self, inner: list[Token]) -> str:
        rows: list[tuple[bool, list[tuple[str, str]]]] = []
        for i, token in enumerate(inner):
            if token.type == "tr_open":
                rows.append((False, []))
            elif token.type in ("th_open", "td_open"):
                style = str(token.attrGet("style") or "")
                align = style.removeprefix("text-align:") if style.startswith("text-align:") else "left"
                rows[-1][1].append((align, self.inline(inner[i + 1].children or [])))
                if token.type == "th_open":
                    rows[-1] = (True, rows[-1][1])
        if not rows:
            return ""
        columns = max(len(cells) for _, cells in rows)
        first = rows[0][1]
        aligns = [first[n][0] if n < len(first) else "left" for n in range(columns)]
        head = [cells for is_head, cells in rows if is_head]
        body = [cells for is_head, cells in rows if not is_head]

        def cells(row: list[tuple[str, str]]) -> str:
            padded = [content for _, content in row] + [""] * (columns - len(row))
            return ", ".join(f"[{content}]" for content in padded)

        header = f"table.header({', '.join(cells(r) for r in head)}), " if head else ""
        rest = ", ".join(cells(r) for r in body)
        return f"#book-table(columns: {columns}, align: ({', '.join(aligns)},), {header}{rest})\n\n"

    def inline(self, children: list[Token]) -> str:
        out: list[str] = []
        run: list[str] = []  # adjacent text, joined into one literal

        def flush() -> None:
            if run:
                out.append(text("".join(run)))
                run.clear()

        wraps = {"em_open": "#emph[", "strong_open": "#strong[", "s_open": "#strike["}
        opened: list[bool] = []  # for each open wrapper, whether it was written (past the bound, not)
        for child in children:
            kind = child.type
            if kind in ("text", "text_special", "html_inline"):
                run.append(child.content)
            elif kind == "softbreak":
                run.append(" ")
                continue
            elif kind == "code_inline":
                flush()
                out.append(f"#raw({literal(child.content)})")
            elif kind in wraps or kind == "link_open":
                flush()
                opened.append(sum(opened) < MAX_INLINE_DEPTH)
                if not opened[-1]:
                    continue  # nested deeper than Typst parses: the words, without this emphasis
                href = str(child.attrGet("href") or "")
                if kind in wraps:
                    out.append(wraps[kind])
                else:
                    out.append(f"#link({literal(href)})[" if href.startswith(_SAFE_SCHEMES) else "#[")
            elif kind in ("em_close", "strong_close", "s_close", "link_close"):
                flush()
                written = opened.pop() if opened else False
                if written:
                    out.append("]")
            elif kind == "hardbreak":
                flush()
                out.append("#linebreak()")
            elif kind == "image":
                flush()
                out.append(self._image(child))
            elif kind == "footnote_ref":
                flush()
                out.append(self._note(child.meta["id"]))
        flush()
        return "".join(out)

    def _note(self, note: int) -> str:
        """A note where it is cited. Typst numbers notes in the order they are set, from 1 in each chapter
        (book.typ resets the counter), and so does this: `numbers` holds each note's number."""
        label = f"<{self.label}-fn{note}>"
        if self.in_note:
            # A note cited inside a note: Typst cannot nest them (a chain of notes would nest deep), so the
            # citation is its number, and the note itself is set right after the one being written.
            if note not in self.numbers:
                self.numbers[note] = len(self.numbers) + 1
                self.pending.append(note)
            return f"#super[{text(str(self.numbers[note]))}]"
        if note in self.numbers:
            return f"#footnote({label})"  # a note cited again: the same number, one body
        self.numbers[note] = len(self.numbers) + 1
        out = [self._note_body(note, label)]
        while self.pending:  # the notes its body cited, in the order it numbered them
            cited = self.pending.pop(0)
            out.append(self._note_body(cited, f"<{self.label}-fn{cited}>"))
        return "".join(out)

    def _note_body(self, note: int, label: str) -> str:
        self.in_note = True
        try:
            return f"#footnote[{self.blocks(self.notes.get(note, [])).strip()}]{label}"
        finally:
            self.in_note = False

    def _image(self, token: Token) -> str:
        alt = "".join(c.content for c in token.children or [] if c.type in ("text", "code_inline"))
        src = str(token.attrGet("src") or "")
        found = self.figures.resolve(src, alt) if self.figures is not None else None
        if isinstance(found, Asset):
            self.images[found.object_id] = found
            width, _ = image_size(found, self.block.width_mm, self.block.height_mm * MAX_IMAGE_HEIGHT)
            if not alt.strip():
                # Empty alt text says the image is decorative (as in HTML): an artifact, which a screen
                # reader passes over, and which PDF/UA allows without a text alternative.
                return f"#pdf.artifact(box(image({literal(image_file(found))}, width: {width:.2f}mm)))"
            return f"#box(image({literal(image_file(found))}, width: {width:.2f}mm, alt: {literal(alt)}))"
        label = text(f"[{alt or found or 'image'}]")
        # Not one of the book's (a link to it, never a fetch), or one it does not have (named in the notes).
        return f"#link({literal(src)})[{label}]" if found is None and src.startswith(_SAFE_SCHEMES) else label


def _close_of(tokens: list[Token], i: int) -> int:
    """The index of the token that closes the one at `i` (itself, for a token that opens nothing)."""
    if tokens[i].nesting != 1:
        return i
    depth = 0
    for j in range(i, len(tokens)):
        depth += tokens[j].nesting
        if depth == 0:
            return j
    return len(tokens) - 1


def _children(inner: list[Token]) -> list[list[Token]]:
    """The list items among a list's tokens, each as the tokens inside it."""
    items, i = [], 0
    while i < len(inner):
        end = _close_of(inner, i)
        if inner[i].type == "list_item_open":
            items.append(inner[i + 1 : end])
        i = end + 1
    return items


Parse = Callable[[str, dict[str, Any]], list[Token]]


def chapter_source(parse: Parse, markdown: str, label: str, block: Block, figures: Figures | None) -> Chapter:
    """One chapter's body as Typst source."""
    writer = Writer(label, block, figures)
    source = writer.chapter(parse(markdown, {}))
    return Chapter(source, writer.images)
