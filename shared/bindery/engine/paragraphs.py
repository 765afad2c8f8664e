"""A paragraph's inline content as Typst markup, in elements whose cost Typst bounds: emphasis and links
nested at most MAX_INLINE_DEPTH deep, at most MAX_PARAGRAPH_ELEMENTS elements a paragraph (one of more goes
on as several), and a long paragraph, or one dense with breaks, broken greedily. `bindery.engine.typeset`
writes every paragraph through one.
"""

from __future__ import annotations

from collections.abc import Callable

# Emphasis, strong, strike and links nest without a bound in Markdown; Typst's parser stops at 256 deep.
MAX_INLINE_DEPTH = 32

# For every glyph of a paragraph, Typst finds the element it came from by walking the paragraph's elements
# from its first (typst-layout's `SpanMapper::span_at`): a paragraph costs its characters times its
# elements. A paragraph of more is set as several (`_Paragraph`), so each costs at most this a character.
MAX_PARAGRAPH_ELEMENTS = 1000

# Typst's justified line breaking (Knuth-Plass) weighs each break of a line against the others a line may
# take, and over a long paragraph grows faster than its length, the more so the more breaks its lines hold:
# `a a a`, or backslashes (Unicode lets a line break between two). A paragraph of GREEDY_FROM characters or
# more, or of DENSE_FROM with at least DENSE_BREAKS of them breaks, is broken greedily (book.typ's
# `greedy`): still justified, each line filled in turn. Prose has a break in five or six characters, and
# few paragraphs of more than a few thousand.
GREEDY_FROM = 20_000
DENSE_FROM = 2000
DENSE_BREAKS = 0.3


# The inline wrappers a paragraph opens and closes, by the token that opens each.
WRAPS = {
    "em_open": "#emph[",
    "strong_open": "#strong[",
    "s_open": "#strike[",
    "sup_open": "#super[",
    "sub_open": "#sub[",
    "kbd_open": '#text(font: "DejaVu Sans Mono", size: 0.9em)[',
    "mark_open": "#highlight[",
    "small_open": "#text(size: 0.85em)[",
    "abbr_open": "#[",
}
# The tokens that close what a paragraph opened: each of WRAPS, a link and a span.
CLOSES = frozenset({*(kind.replace("_open", "_close") for kind in WRAPS), "link_close", "span_close"})
LINK = "#link("
# Typst 0.15 fails a pdf whose link holds a soft hyphen ("expected link ancestor in logical tree"): in a
# link it is left out, which loses a place the link's words may hyphenate and nothing a reader sees.
SOFT_HYPHEN = "\xad"


class Paragraph:
    """A paragraph's inline content as Typst markup, in as few elements as it can be, and as several
    paragraphs where one would hold more than MAX_PARAGRAPH_ELEMENTS.

    Adjacent text is one literal, across emphasis nested past MAX_INLINE_DEPTH (which is not written). Past
    MAX_PARAGRAPH_ELEMENTS, the paragraph ends after the next space in its text (or, with none, past twice
    the bound): the emphasis and links open there are closed, and opened again in the next paragraph, which
    book.typ's `continued` sets on without a first-line indent. A long paragraph, or one dense with breaks,
    is broken greedily (GREEDY_FROM)."""

    def __init__(self, set_text: Callable[[str, bool], str], broken: Callable[[], None]):
        self.set_text = set_text  # a run of text as Typst source (`Writer._set`)
        self.broken = broken  # told that a paragraph ended: a line starts afresh
        self.out: list[str] = []
        self.run: list[str] = []  # adjacent text, not yet set
        self.opened: list[str | None] = []  # each wrapper open: its markup, or None if past the depth
        self.depth = 0  # how many of them are written
        self.links = 0  # how many of those are links
        self.elements = 0  # in the paragraph being written
        self.due = False  # whether it ends before the next element
        self.continued = False  # whether it was cut, and `continued` is open
        self.characters = 0  # of text, and how many of them a line may break at (about)
        self.breaks = 0

    def text(self, value: str) -> None:
        self.run.append(value)

    def element(self, markup: str) -> None:
        """An element that is not text, made after `flush` (it may go on from the text before)."""
        self.flush()
        self._write(markup)

    def code(self, value: str) -> None:
        self.flush()
        self._write(text=value, code=True)

    def open(self, markup: str) -> None:
        if self.depth >= MAX_INLINE_DEPTH:
            self.opened.append(None)  # nested deeper than Typst parses: the words, without this emphasis
            return
        self.flush()
        self._write(markup)
        self.opened.append(markup)
        self.depth += 1
        self.links += markup.startswith(LINK)

    def close(self) -> None:
        if not self.opened or self.opened[-1] is None:
            self.opened[-1:] = []
            return
        self.flush()  # first: the text before it may end the paragraph, and this one open it again
        self.links -= self.opened.pop().startswith(LINK)  # type: ignore[union-attr]
        self.out.append("]")
        self.depth -= 1
        self.elements += 1

    def flush(self) -> None:
        """Set the text so far."""
        if not self.run:
            return
        value = "".join(self.run)
        self.run.clear()
        if self.elements >= MAX_PARAGRAPH_ELEMENTS and not self.due and (space := value.rfind(" ") + 1):
            self._write(text=value[:space])
            self.due, value = True, value[space:]
        if value:
            self._write(text=value)

    def written(self) -> str:
        self.flush()
        written = "".join(self.out) + ("]" if self.continued else "")
        dense = self.characters >= DENSE_FROM and self.breaks >= DENSE_BREAKS * self.characters
        if dense or self.characters >= GREEDY_FROM:
            return f"#greedy[{written}]"
        return written

    def _write(self, markup: str = "", *, text: str = "", code: bool = False) -> None:
        """Write an element, or `text` set, in the next paragraph if this one is due to end."""
        if self.due or self.elements >= 2 * MAX_PARAGRAPH_ELEMENTS:
            self.out.append("]" * self.depth + ("\n\n" if self.continued else "\n\n#continued["))
            self.out.extend(opener for opener in self.opened if opener is not None)
            self.elements, self.due, self.continued = self.depth, False, True
            self.broken()  # a paragraph's end is a break
        if text:
            text = text.replace(SOFT_HYPHEN, "") if self.links else text
            markup = self.set_text(text, code)
            self.characters += len(text)
            # a run marked for `long` may break anywhere (zero-width spaces, or Unicode's own breaks)
            self.breaks += len(text) if "#long(" in markup else text.count(" ")
        self.out.append(markup)
        self.elements += 1
