"""A chapter of Markdown as Typst source in which the manuscript is only ever data.

Every word of the manuscript reaches Typst as a string literal (`#"…"`), never as markup or code: inside a
literal Typst reads nothing but `\\` and `"`, both escaped (`bindery.engine.literals`). So
`#read("/etc/passwd")`, `#import`, `#let` loops and unbalanced brackets in a book are printed as the text
they are. The only code in the source is what this module writes around the literals, calls into `book.typ`
and Typst's own elements, each with arguments it made itself (a formula's math too: `engine.formula_typst`).

Nesting is bounded before Typst sees it: the Markdown parser stops nesting blocks at its `maxNesting` (20)
and reads anything deeper as text, so a 100,000-deep list is one paragraph, not 100,000 levels of calls;
quotes nest at most MAX_QUOTE_DEPTH deep here, emphasis and links MAX_INLINE_DEPTH, and a footnote cited
in a footnote is cited by its number and set after it, not nested.

So is what each costs Typst where it grows faster than its input: a paragraph is set in bounded elements
(`engine.paragraphs`); a quote of many blocks, a table too wide or too long, as several, one under another.

Nothing is set past the page's edge. The writer keeps the measure each block is set in, at least (the text
block, less what the quotes and lists around it indent; a table cell's share; a note's, the whole block), and
stops indenting where that would leave less than MIN_MEASURE of the text block, so text is never squeezed to
nothing (the figures are `bindery.engine.measures`). Its text is set through `bindery.engine.breaks.fitted`,
which marks each run that offers no line break and may be wider than the measure, for Typst to measure and
break; a code block wraps at its last column, or, holding characters of other widths, is set by book.typ's
`code`, which measures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from markdown_it.token import Token

from bindery.engine import crossrefs, divs, formula_typst, highlighting, page_refs, pdf_tables, spans
from bindery.engine.anchors import Links, link_words
from bindery.engine.breaks import Run, fitted
from bindery.engine.figures import Figures, image_file
from bindery.engine.literals import literal, text
from bindery.engine.measures import (
    ASIDE_INDENT,
    BODY_PT,
    CODE_PT,
    HEADING_PT,
    MAX_IMAGE_HEIGHT,
    MIN_MEASURE,
    NOTE_MARK,
    PT_PER_MM,
    QUOTE_INDENT,
    Block,
    image_size,
)
from bindery.engine.navigation import GOTO, HERE
from bindery.engine.paragraphs import CLOSES, WRAPS, Paragraph
from bindery.engine.token_tree import close_of, in_runs, plain_text
from bindery.images import Asset

_SAFE_SCHEMES = ("http://", "https://", "mailto:")  # a link that leaves the book; the rest stay text
MAX_URL = 8000  # characters of a link's address: Typst refuses a longer one ("URL is too long")


@dataclass
class Chapter:
    """One chapter's Typst source, and the images it placed (their files must be in the compile's root)."""

    source: str
    images: dict[str, Asset] = field(default_factory=dict)
    anchor: str | None = None  # the id of the chapter's own heading (book.typ's `chapter` sets it)
    listed: bool = True  # whether the contents and outline list the chapter: its title is not `.unlisted`


MAX_QUOTE_DEPTH = 8  # Typst applies a few show rules at each quote and stops at 64 nested; Markdown nests 20
MAX_QUOTE_BLOCKS = 200  # a quote of many blocks costs Typst more a block than several: more are several


class Writer:
    """Markdown-it's tokens for one chapter, written out as Typst.

    Block tokens open and close Typst calls; inline children become literals inside them. Footnotes are
    set where they are referenced (Typst puts them at the foot of that page): their bodies are collected
    from the footnote block the parser appends, before the chapter is written."""

    def __init__(self, label: str, block: Block, figures: Figures | None, links: Links | None = None):
        self.label, self.block, self.figures, self.links = label, block, figures, links
        self.anchor: str | None = None
        self.listed = True  # the chapter's title is not `.unlisted`
        self.image_height = 0.0  # of the last image set, in pt (a figure's caption is under it)
        self.notes: dict[int, list[Token]] = {}
        self.numbers: dict[int, int] = {}  # each note set so far, or due to be: its number in the chapter
        self.pending: list[int] = []  # notes cited inside a note, to be set after it
        self.images: dict[str, Asset] = {}
        self.quotes = 0  # block quotes open around the block being written
        self.in_note = False  # writing a footnote's body
        self.measure = block.width_pt  # at least how wide the block being written is set, in pt
        self.run = Run()  # the run of text the inline text so far ends in
        self.size = BODY_PT  # of the text being written, in pt

    @contextmanager
    def narrowed(self, measure: float) -> Iterator[None]:
        """Write the blocks inside a quote, a list item, a table cell or a note `measure` pt wide."""
        outer, self.measure = self.measure, measure
        try:
            yield
        finally:
            self.measure = outer

    def may_indent(self, indent: float) -> bool:
        return self.measure - indent >= MIN_MEASURE * self.block.width_pt

    def chapter(self, tokens: list[Token]) -> str:
        tokens = self._take_notes(tokens)
        if tokens and tokens[0].type == "heading_open" and tokens[0].tag == "h1":
            # The chapter's own title (book.typ's): its spans' ids are placed where its text begins.
            marks = [self._span_mark(c) for c in tokens[1].children or [] if c.type == "span_open"]
            self.anchor, self.listed = self._next_id(), not tokens[0].meta.get("unlisted")
            tokens = tokens[3:]
            return "".join(f"#place({mark})\n\n" for mark in marks if mark) + self.blocks(tokens)
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
            end = close_of(tokens, i)
            inner = tokens[i + 1 : end]
            if token.hidden and i and tokens[i - 1].hidden and tokens[i - 1].type == "paragraph_close":
                out.append(text(" "))  # a tight definition's later paragraph (pandoc's Plain): not run in
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
            level = max(min(int(token.tag[1]), 6), 2)  # a second # heading inside a chapter sits under it
            self.size = HEADING_PT.get(level, 12.0)
            anchor = self._next_id()  # a named destination in the pdf: Typst makes one of a heading's label
            labelled = f" #label({literal(anchor)})" if anchor else ""
            said = f"level: {level}, outlined: false" if token.meta.get("unlisted") else f"level: {level}"
            try:
                return f"#heading({said})[{self.inline(inner[0].children or [])}]{labelled}\n\n"
            finally:
                self.size = BODY_PT
        if kind in ("bullet_list_open", "ordered_list_open"):
            return pdf_tables.listed(self, token, inner)
        if kind == "blockquote_open":
            if self.quotes >= MAX_QUOTE_DEPTH or not self.may_indent(QUOTE_INDENT):
                return self.blocks(inner)  # deeper still: its text, at the deepest quote's indent
            self.quotes += 1
            try:
                with self.narrowed(self.measure - QUOTE_INDENT):
                    runs = in_runs(inner, MAX_QUOTE_BLOCKS)
                    return "".join(f"#quote(block: true)[{self.blocks(run)}]\n\n" for run in runs)
            finally:
                self.quotes -= 1
        if kind in ("fence", "code_block"):
            language = (token.info or "").strip().split(" ")[0]
            lang = f", lang: {literal(language)}" if highlighting.eligible(token.content, language) else ""
            return pdf_tables.code(self.measure, token.content.rstrip("\n"), lang)
        if kind == "hr":
            return "#dinkus()\n\n"
        if kind == "figure_open" and inner:
            self.image_height = 0.0
            body = self.inline(inner[0].children or [])
            image = next((c for c in inner[0].children or [] if c.type == "image"), None)
            alt = self._set(plain_text(image.children or [])) if image is not None else ""
            return f"#align(center)[{body}]\n\n" + self._caption(token.meta["id"], alt, self.image_height)
        if kind == "dl_open":
            return pdf_tables.terms(self, inner)
        if kind == "div_open":
            placed = f"#place({mark})\n\n" if (mark := self._span_mark(token)) else ""  # its id (`divs`)
            if divs.aside(token) and self.may_indent(ASIDE_INDENT):
                with self.narrowed(self.measure - ASIDE_INDENT):
                    return f"{placed}#aside({literal(str(divs.aside(token)))})[{self.blocks(inner)}]\n\n"
            return placed + self.blocks(inner)
        if kind == "html_block":
            return pdf_tables.code(self.measure, token.content.rstrip())  # raw HTML is shown as text
        if kind == "table_open":
            words = self.inline(token.meta["caption"]) if "caption" in token.meta else None
            caption = self._caption(str(token.attrGet("id") or ""), words, 0.0) if words is not None else ""
            return caption + pdf_tables.table(self, inner)
        return self.blocks(inner) if inner else ""

    def _caption(self, target_id: str, said: str, up: float) -> str:
        """A figure's caption (under it, `up` pt high) or a table's (over it): its number, which links to
        itself, so that the join finds where it is (a named destination, `up` above it: `HERE`)."""
        number = self.links.caption(target_id) if self.links is not None and target_id else None
        if number is None:
            return f"#align(center)[{said}]\n\n" if said else ""
        here, kind = literal(f"{HERE}{up:.1f}#{quote(target_id)}"), crossrefs.kind_of(target_id) or ""
        numbered = f"#link({here})[{text(crossrefs.label(kind, number))}]"
        return f"#align(center)[{numbered}{text(': ') if said else ''}{said}]\n\n"

    def _span(self, token: Token, paragraph: Paragraph) -> None:
        """A bracketed span: small capitals for `.smallcaps`; where the book's index holds it, an empty link
        to itself before its words, where the join names a destination as its id (`HERE`)."""
        paragraph.open("#smallcaps[" if spans.SMALLCAPS in spans.classes(token) else "#[")
        if mark := self._span_mark(token):
            paragraph.element(f"#{mark}")

    def _span_mark(self, token: Token) -> str:
        span_id = token.meta.get("id")
        if not spans.claimable(span_id) or self.links is None or not self.links.owns(span_id):
            return ""
        return f"link({literal(f'{HERE}0.0#{quote(span_id)}')})[#box(width: 0pt, height: 1em)]"

    def _crossref(self, token: Token, paragraph: Paragraph) -> None:
        """`@fig-map`: "Figure 3", linked to it; one the book does not number, `?@fig-map`, and a warning."""
        target_id = token.meta["id"]
        number = self.links.number(target_id) if self.links is not None else None
        if number is None or self.links is None or self.links.target(target_id) is None:
            if self.figures is not None and self.links is not None:
                self.figures.unlanded(f"@{target_id}", token.content, token.meta.get("line"))
            paragraph.text(f"?@{target_id}")
            return
        paragraph.open(f"#link({literal(GOTO + '#' + quote(target_id))})[")
        paragraph.text(crossrefs.label(crossrefs.kind_of(target_id) or "", number, token.meta["bare"]))
        paragraph.close()
        if self.links.pages:  # "on page 41": set once every page is known (`bindery.engine.page_refs`)
            paragraph.text(" on page\u00a0")
            paragraph.element(page_refs.placeholder(target_id))

    def _paragraph(self, inner: list[Token], body: str) -> str:
        children = [c for c in (inner[0].children or []) if not (c.type == "text" and not c.content.strip())]
        if len(children) == 1 and children[0].type == "image":  # a figure: an image alone, centred
            return f"#align(center)[{body}]\n\n"
        return body + "\n\n"

    def inline(self, children: list[Token]) -> str:
        outer, self.run = self.run, Run()  # a note's body is written in the middle of the text citing it
        try:
            return self._inline(children)
        finally:
            self.run = outer

    def _broken(self) -> None:
        """A paragraph was cut in two: the next line starts afresh."""
        self.run = Run()

    def _set(self, value: str, *, code: bool = False) -> str:
        size = CODE_PT if code else self.size
        return fitted(value, self.measure, size, literal, code=code, run=self.run)

    def _inline(self, children: list[Token]) -> str:
        paragraph = Paragraph(lambda text, code: self._set(text, code=code), self._broken)
        for n, child in enumerate(children):
            kind = child.type
            if kind in ("text", "text_special", "html_inline"):
                paragraph.text(child.content)
            elif kind == "softbreak":
                paragraph.text(" ")
            elif kind == "code_inline":
                paragraph.code(child.content)
            elif kind in WRAPS:
                paragraph.open(WRAPS[kind])
            elif kind == "span_open":
                self._span(child, paragraph)
            elif kind == "link_open":
                paragraph.open(self._link(children, n))
            elif kind in CLOSES:
                paragraph.close()
            elif kind == "hardbreak":
                paragraph.element("#linebreak()")
                self.run = Run()
            elif kind in formula_typst.KINDS:
                formula_typst.typeset(child, paragraph, self.figures)
            elif kind == "image":
                paragraph.flush()
                paragraph.element(self._image(child))
            elif kind == "crossref":
                self._crossref(child, paragraph)
            elif kind == "footnote_ref":
                paragraph.flush()
                paragraph.element(self._note(child.meta["id"]))
                self._goes_on(NOTE_MARK)
        return paragraph.written()

    def _link(self, children: list[Token], n: int) -> str:
        """A link's opening: to a page outside the book, to a heading of the book (a placeholder the join
        points at its named destination: `bindery.engine.join`), or none (its words, and a note)."""
        href = str(children[n].attrGet("href") or "")
        target = self.links.resolve(href) if self.links is not None else None
        if self.links is not None and target is None:
            if self.figures is not None:
                self.figures.unlanded(href, link_words(children, n), children[n].meta.get("line"))
        elif href.startswith(_SAFE_SCHEMES) and len(href) <= MAX_URL:  # (past it Typst fails the run)
            return f"#link({literal(href)})["
        elif target is not None and target.startswith("#"):  # (an address is ASCII: the id encoded)
            return f"#link({literal(GOTO + '#' + quote(target[1:]))})["
        return "#["

    def _next_id(self) -> str | None:  # (a heading inside a note has none: the cut counts none there)
        return self.links.next_id() if self.links is not None and not self.in_note else None

    def _goes_on(self, width: float) -> None:
        """The run goes on through something `width` pt wide that is not text (a note's mark, an image)."""
        self.run.width += width
        self.run.last, self.run.spaced = "\ufffc", False

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
            with self.narrowed(self.block.width_pt):  # set at the foot of the page, the block's width
                return f"#footnote[{self.blocks(self.notes.get(note, [])).strip()}]{label}"
        finally:
            self.in_note = False

    def _image(self, token: Token) -> str:
        alt = "".join(c.content for c in token.children or [] if c.type in ("text", "code_inline"))
        src = str(token.attrGet("src") or "")
        found = self.figures.resolve(src, alt) if self.figures is not None else None
        if isinstance(found, Asset):
            self.images[found.object_id] = found
            width, height = image_size(
                found, self.measure / PT_PER_MM, self.block.height_mm * MAX_IMAGE_HEIGHT
            )
            self.image_height = height * PT_PER_MM
            self._goes_on(width * PT_PER_MM)  # a box: a line may break beside it, but not before a stop
            if not alt.strip():
                # Empty alt text says the image is decorative (as in HTML): an artifact, which a screen
                # reader passes over, and which PDF/UA allows without a text alternative.
                return f"#pdf.artifact(box(image({literal(image_file(found))}, width: {width:.2f}mm)))"
            return f"#box(image({literal(image_file(found))}, width: {width:.2f}mm, alt: {literal(alt)}))"
        label = self._set(f"[{alt or found or 'image'}]")
        # Not one of the book's (a link to it, never a fetch), or one it does not have (named in the notes).
        return f"#link({literal(src)})[{label}]" if found is None and src.startswith(_SAFE_SCHEMES) else label


Parse = Callable[[str, dict[str, Any]], list[Token]]


def chapter_source(
    parse: Parse, markdown: str, label: str, block: Block, figures: Figures | None, links: Links | None = None
) -> Chapter:
    """One chapter's body as Typst source; with `links`, its headings' ids and its links in the book."""
    writer = Writer(label, block, figures, links)
    env: dict[str, Any] = {} if links is None else {"references": links.labels}
    source = writer.chapter(parse(links.with_notes(markdown) if links is not None else markdown, env))
    return Chapter(source, writer.images, writer.anchor, writer.listed)
