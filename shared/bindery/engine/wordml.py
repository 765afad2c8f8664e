"""A chapter of Markdown as WordprocessingML (the XML inside a docx), in which the manuscript is only data.

Every piece of the author's text reaches the XML through `text()`, which escapes `&`, `<` and `>` and
replaces each character XML 1.0 forbids (most C0 controls, U+FFFE, U+FFFF) with U+FFFD: raw XML, `<w:p>`
and entities in a manuscript are characters in the document, never markup. Nothing here recurses over
the manuscript's nesting: blocks are walked as markdown-it's flat token stream (which `markup.parser`
already stops nesting at 20), inline formatting is a set of flags, and Word's nine list levels take any
deeper list at the ninth.

The writer names styles, never fonts or sizes: a heading is `Heading1`, a quote `BlockText`, code
`SourceCode`, a note's text `FootnoteText` (their look is in `docx_parts.STYLES`), so an editor restyles
the whole book by editing one style. What a chapter adds to the package beyond its body (its notes, the
numbering of its ordered lists, the targets of its links, the images it shows) is collected in the
`Chapter` and committed by the renderer only once the whole chapter has been written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from markdown_it.token import Token

from bindery.engine import crossrefs, divs, docx_notes, formulas, highlighting
from bindery.engine.anchors import Links, link_words
from bindery.engine.docx_notes import NOTE_MARK, Counters, bookmarked, custom_style, note_numbers, span_edge
from bindery.engine.figures import Figures
from bindery.engine.formula_word import word_formula
from bindery.engine.ooxml import (
    BODY_LEVEL,
    LIST_INDENT,
    MARKS,
    RunState,
    alignment,
    indentation,
    paragraph,
    run,
    table_cell,
    table_xml,
    text,
)
from bindery.engine.token_tree import heading_text, image_alone, spoken_text
from bindery.images import Asset
from bindery.language import text_direction

_SAFE_SCHEMES = ("http://", "https://", "mailto:")  # a link that leaves the book; the rest stay text
MAX_LEVEL = 8  # Word's list levels are 0 to 8
UNTITLED = "Untitled"  # an empty chapter heading's title, as bindery.manuscript names the chapter
_CODE = '<w:rStyle w:val="VerbatimChar"/>'


@dataclass
class Chapter:
    """One chapter's XML and what it adds to the package, its ids taken from the document's `Counters`."""

    body: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lists: list[tuple[int, int, int, str]] = field(default_factory=list)  # (num id, level, start, numbering)
    links: list[tuple[str, str]] = field(default_factory=list)  # (relationship id, target)
    # The links of its notes: a part's relationships are its own, and the notes are another part.
    note_links: list[tuple[str, str]] = field(default_factory=list)
    headings: list[tuple[int, str]] = field(default_factory=list)  # (level, text as the body shows it)


Image = Callable[[Asset, str], str]  # (an asset, its alt text) -> the run that shows it


class Writer:
    """Writes one chapter's tokens as WordprocessingML into a `Chapter`."""

    def __init__(
        self,
        chapter: Chapter,
        counters: Counters,
        figures: Figures,
        image: Image,
        *,
        base_rtl: bool,
        lang: str = "",
        title: str = UNTITLED,
        anchors: Links | None = None,
    ) -> None:
        self.out = chapter
        self.anchors = anchors  # the book's headings' ids: a heading's bookmark, an internal link's target
        self.title = title  # what an empty chapter heading shows (the chapter's title, as the TOC lists it)
        self.counters, self.figures, self.image, self.base_rtl = counters, figures, image, base_rtl
        self.lang = lang  # a <w:lang/> every run of the chapter carries, when its language is not the book's
        self.notes: dict[int, int] = {}  # markdown-it's note id in this chapter -> Word's
        # A note cited only from inside other notes (Word nests no notes) -> those referenced in the body
        # right after its citer's reference, so that their text is kept and numbered where they are cited.
        self.follows: dict[int, list[int]] = {}
        self._referenced: set[int] = set()  # the notes whose reference the body already holds
        self._first = True  # the next body paragraph is the first after a heading
        self._noted = True  # the note being written shows its number (False until its first paragraph)

    # ---- blocks -------------------------------------------------------------------------------------

    def chapter(self, tokens: list[Token]) -> None:
        self.notes, self.follows = note_numbers(tokens, self.counters)
        self.blocks(tokens, 0, len(tokens), self.out.body, note=False)

    def blocks(self, tokens: list[Token], start: int, end: int, out: list[str], *, note: bool) -> None:
        quote = defined = 0  # block quotes and definitions open around the block
        asides: list[str] = [""]  # the divs open around it: each an aside's style, or "" (not an aside)
        lists: list[tuple[int, bool]] = []  # (num id, first paragraph of the item still to come)
        cells: list[str] | None = None  # the row being gathered
        table: list[tuple[bool, list[str]]] = []  # (header row?, cells)
        head, i = False, start
        while i < end:
            token = tokens[i]
            kind = token.type
            if kind == "heading_open":
                level = min(int(token.tag[1]), 6)
                runs = self.inline(tokens[i + 1], note=note)
                shown = heading_text(tokens[i + 1])
                if level == 1 and token.level == 0 and not note and not shown:  # the chapter's title
                    shown = self.title
                    runs = self._text(shown) + runs
                if not note and shown and not token.meta.get("unlisted"):  # (nor an empty one, nor a note's)
                    self.out.headings.append((level, shown))
                given = self.anchors.next_id() if self.anchors is not None and not note else None
                if given is not None:  # where a link to it lands (as pandoc's docx)
                    runs = bookmarked(self.counters, given, runs)
                after = BODY_LEVEL if token.meta.get("unlisted") else ""  # (Word's own contents skip it too)
                out.append(self._para(f"Heading{level}", runs, tokens[i + 1].content, after=after))
                self._first = True
                i += 3
                continue
            if kind in ("paragraph_open", "figure_open"):
                inline = tokens[i + 1]
                alone = image_alone(inline)
                if note:
                    style = "FootnoteText"
                elif lists:
                    style = "ListParagraph"
                elif defined:
                    style = "Definition"
                elif quote:
                    style = "BlockText"
                elif asides[-1]:
                    style = asides[-1]
                elif alone is not None:
                    style = "Figure"
                else:
                    style = "FirstParagraph" if self._first else "BodyText"
                extra = ""
                numbered = lists and lists[-1][1]
                if numbered:
                    extra = f'<w:numPr><w:ilvl w:val="{min(len(lists) - 1, MAX_LEVEL)}"/>'
                    extra += f'<w:numId w:val="{lists[-1][0]}"/></w:numPr>'
                    lists[-1] = (lists[-1][0], False)
                indent = ""
                if quote and not note and (lists or quote > 1):
                    # Inside a quote, a list (or a quote in it) is set in as far again as the quote is.
                    level = min(len(lists), MAX_LEVEL + 1)
                    hanging = ' w:hanging="360"' if numbered else ""
                    indent = indentation(quote, LIST_INDENT * level, hanging)
                runs = self.inline(inline, note=note)
                if note and not self._noted:  # the note's number, at the head of its first paragraph
                    self._noted, runs = True, NOTE_MARK + run(" ") + runs
                elif not note:  # a div's bookmark, where one opened just before (`docx_notes.div_mark`)
                    runs, self.counters.pending = self.counters.pending + runs, ""
                out.append(self._para(style, runs, inline.content, extra=extra, indent=indent))
                if kind == "figure_open" and alone is not None:  # numbered (`engine.crossrefs`)
                    out.append(self._caption(token.meta["id"], self._text(spoken_text(alone))))
                elif alone is not None and (title := str(alone.attrGet("title") or "")):
                    out.append(self._para("Caption", self._text(title), title))
                if not (lists or quote or note):
                    self._first = False
                i += 3
                continue
            if kind in ("th_open", "td_open"):
                inline = tokens[i + 1]
                assert cells is not None
                props = alignment(str(token.attrGet("style") or ""))
                written = self._para("Compact", self.inline(inline, note=note), inline.content, after=props)
                cells.append(table_cell(token, written))  # (spanning, or a place a span covers)
                i += 3
                continue
            if kind in ("fence", "code_block"):
                code = token.content[:-1] if token.content.endswith("\n") else token.content
                deep = LIST_INDENT * min(len(lists), MAX_LEVEL + 1)
                indent = indentation(quote, deep) if quote and not note else ""
                runs = highlighting.word(code, token.info, self.lang) or run(code, _CODE + self.lang)
                out.append(paragraph("SourceCode", runs, extra=indent))
                self._first = False
            elif kind == "html_block":  # raw HTML is text, as in every format
                out.append(self._para("BodyText", self._text(token.content.rstrip("\n")), token.content))
            elif kind == "hr":
                out.append(paragraph("HorizontalRule", ""))
                self._first = True
            elif kind == "dt_open":  # a definition list's term, its words inline
                out.append(
                    self._para("DefinitionTerm", self.inline(tokens[i + 1], note=note), tokens[i + 1].content)
                )
                i += 3
                continue
            elif kind in ("dd_open", "dd_close"):
                defined += 1 if kind == "dd_open" else -1
            elif kind == "div_open":  # (its id, where the index holds it: a bookmark at its first block)
                out.append(docx_notes.div_mark(self.counters, tokens, i, None if note else self.anchors))
                asides.append(
                    custom_style(self.counters, token, "paragraph") or (divs.aside(token) or "").capitalize()
                )
            elif kind == "div_close" and len(asides) > 1:
                asides.pop()
            elif kind == "blockquote_open":
                quote += 1
            elif kind == "blockquote_close":
                quote -= 1
                self._first = True
            elif kind in ("bullet_list_open", "ordered_list_open"):
                if kind == "bullet_list_open":
                    num = 1
                else:
                    self.counters.num += 1
                    num = self.counters.num
                    start_at, numbering = int(token.attrGet("start") or 1), token.meta.get("numbering", "1.")
                    self.out.lists.append((num, min(len(lists), MAX_LEVEL), start_at, numbering))
                lists.append((num, False))
            elif kind in ("bullet_list_close", "ordered_list_close"):
                lists.pop()
                self._first = not lists
            elif kind == "list_item_open":
                lists[-1] = (lists[-1][0], True)
            elif kind == "table_open":
                table = []
                if "caption" in token.meta:  # over the table, as Word sets a table's caption
                    said = self.inline(crossrefs.inline_of(token.meta["caption"]), note=note)
                    out.append(self._caption(str(token.attrGet("id") or ""), said))
            elif kind == "thead_open":
                head = True
            elif kind == "thead_close":
                head = False
            elif kind == "tr_open":
                cells = []
            elif kind == "tr_close":
                assert cells is not None
                table.append((head, cells))
                cells = None
            elif kind == "table_close":
                out.append(table_xml(table))
                self._first = True
            elif kind == "footnote_block_open":
                self.footnotes(tokens, i)
                return
            i += 1

    def footnotes(self, tokens: list[Token], start: int) -> None:
        """Each note of the chapter as a Word footnote, its paragraphs in FootnoteText."""
        i = start
        while i < len(tokens):
            token = tokens[i]
            if token.type == "footnote_open":
                close = next(j for j in range(i, len(tokens)) if tokens[j].type == "footnote_close")
                number = self.notes.get(token.meta["id"])
                if number is not None:  # markdown-it lists only the notes cited; this is one
                    body: list[str] = []
                    self._noted = False
                    self.blocks(tokens, i + 1, close, body, note=True)
                    if not self._noted:  # a note with no paragraph of its own still shows its number
                        body.insert(0, paragraph("FootnoteText", NOTE_MARK))
                    self.out.notes.append(f'<w:footnote w:id="{number}">{"".join(body)}</w:footnote>')
                i = close
            i += 1

    def inline(self, token: Token, *, note: bool = False) -> str:
        state = RunState()
        out: list[str] = []
        opened = 0  # where the link being written began in `out`
        spans_open: list[tuple[int, int]] = []  # each span open: its bookmark's number (0: none), small caps
        links = self.out.note_links if note else self.out.links  # the relationships of the part it is in
        children = token.children or []
        for index, child in enumerate(children):
            kind = child.type
            if kind in ("text", "text_special", "html_inline"):
                out.append(self._styled(child.content, state))
            elif kind == "code_inline":
                out.append(self._styled(child.content, state, _CODE))
            elif kind == "softbreak":
                out.append(self._styled(" ", state))
            elif kind == "hardbreak":
                out.append(self._wrap("<w:r><w:br/></w:r>", state))
            elif kind in MARKS:
                state.mark(kind)
            elif kind in ("span_open", "span_close"):
                out.append(span_edge(self.counters, self.anchors, child, state, spans_open))
            elif kind == "link_open":
                href = str(child.attrGet("href") or "")
                target = (
                    self.anchors.resolve(href) if self.anchors is not None and state.link is None else None
                )
                if self.anchors is not None and state.link is None and target is None:
                    # To an id no heading has, or to a file the book does not hold: its words, and a note.
                    self.figures.unlanded(href, link_words(children, index), child.meta.get("line"))
                elif href.startswith("#") and target is not None:
                    state.link = target  # inside the book: to the bookmark named as the id (not %-encoded)
                    opened = len(out)
                elif href.startswith(_SAFE_SCHEMES) and state.link is None:
                    self.counters.link += 1
                    state.link = f"rIdL{self.counters.link}"
                    links.append((state.link, href))
                    opened = len(out)
            elif kind == "link_close":
                if state.link is not None and not state.link.startswith("#") and not any(out[opened:]):
                    # A link that shows nothing (`[](...)`) leaves no relationship that nothing uses.
                    links.pop()
                    self.counters.link -= 1
                elif state.link is not None:  # one hyperlink around all its runs (pandoc reads one link)
                    between = "</w:hyperlink>" + self._wrap("", state, opening=True)
                    out[opened:] = ["".join(out[opened:]).replace(between, "")]
                state.link = None
            elif kind in formulas.KINDS:  # a Word equation, or its TeX as code where it does not convert
                made = word_formula(child, self.figures, lambda tex: self._styled(tex, state, _CODE))
                out.append(self._wrap(made, state) if made.startswith("<m:") else made)  # (in its link)
            elif kind == "image":
                out.append(self._figure(child, state, links))
            elif kind == "footnote_ref":
                out.append(self._note_ref(child, note))
            elif kind == "crossref":
                out.append(self._crossref(child, state))
        return "".join(out)

    def _figure(self, token: Token, state: RunState, links: list[tuple[str, str]]) -> str:
        alt = spoken_text(token)
        src = str(token.attrGet("src") or "")
        found = self.figures.resolve(src, alt)
        if isinstance(found, Asset):
            return self._wrap(self.image(found, alt), state)  # a linked picture is a link, as in Word
        # Missing (named in the build's notes), or not one of the book's: its alt text, never a fetch; an
        # image elsewhere is a link to it.
        if found is None and src.startswith(_SAFE_SCHEMES) and state.link is None:
            self.counters.link += 1
            links.append((rel := f"rIdL{self.counters.link}", src))
            return self._styled(f"[{alt or 'image'}]", replace(state, link=rel))
        return self._styled(f"[{alt or (found if isinstance(found, str) else '') or 'image'}]", state)

    def _caption(self, target_id: str, runs: str) -> str:
        """A numbered figure's or table's caption, a bookmark named as its id, where a reference lands."""
        number = self.anchors.caption(target_id) if self.anchors is not None and target_id else None
        if number is None:
            return self._para("Caption", runs, "")
        numbered = self._text(crossrefs.label(crossrefs.kind_of(target_id) or "", number) + ": ")
        return self._para("Caption", bookmarked(self.counters, target_id, numbered + runs), "")

    def _crossref(self, token: Token, state: RunState) -> str:
        """`@fig-map`: "Figure 3", a link to its bookmark; one the book does not number, `?@fig-map`."""
        target_id = token.meta["id"]
        number = self.anchors.number(target_id) if self.anchors is not None else None
        if number is None or self.anchors is None or self.anchors.target(target_id) is None:
            if self.anchors is not None:
                self.figures.unlanded(f"@{target_id}", token.content, token.meta.get("line"))
            return self._styled(f"?@{target_id}", state)
        said = crossrefs.label(crossrefs.kind_of(target_id) or "", number, token.meta["bare"])
        return self._styled(said, replace(state, link=f"#{target_id}"))

    def _note_ref(self, token: Token, in_note: bool) -> str:
        cited = token.meta["id"]
        number = self.notes.get(cited)
        if number is None:
            return ""
        props = f'<w:rPr><w:rStyle w:val="FootnoteReference"/>{self.lang}</w:rPr>'
        if in_note or cited in self._referenced:
            # Word cites a note once, and never from inside a note: any other citation is its number.
            return f"<w:r>{props}<w:t>{number}</w:t></w:r>"
        self._referenced.add(cited)
        return "".join(
            f'<w:r>{props}<w:footnoteReference w:id="{self.notes[n]}"/></w:r>'
            for n in [cited, *self.follows.get(cited, ())]
        )

    def _text(self, value: str) -> str:
        return self._styled(value, RunState())

    def _styled(self, value: str, state: RunState, style: str = "") -> str:
        props = state.properties(style)
        if text_direction(value) == "rtl":
            props += "<w:rtl/>"
        props += self.lang
        return self._wrap(run(value, props), state)

    @staticmethod
    def _wrap(runs: str, state: RunState, *, opening: bool = False) -> str:
        """`runs` in the hyperlink being written, if any (`opening`: that hyperlink's opening tag alone)."""
        if state.link is None or not (runs or opening):
            return runs
        if state.link.startswith("#"):
            tag = f'<w:hyperlink w:anchor="{text(state.link[1:])}">'
        else:
            tag = f'<w:hyperlink r:id="{state.link}">'
        return tag if opening else f"{tag}{runs}</w:hyperlink>"

    def _para(
        self, style: str, runs: str, sample: str, *, extra: str = "", indent: str = "", after: str = ""
    ) -> str:
        # A paragraph set against the book's direction says so; the rest take the document's default. `after`
        # the indentation, as Word orders a paragraph's properties: its alignment, or its outline level.
        rtl = text_direction(sample) == "rtl"
        bidi = "" if rtl == self.base_rtl else "<w:bidi/>" if rtl else '<w:bidi w:val="0"/>'
        return f'<w:p><w:pPr><w:pStyle w:val="{style}"/>{extra}{bidi}{indent}{after}</w:pPr>{runs}</w:p>'
