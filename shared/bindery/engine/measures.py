"""What a chapter is set in, and the room its blocks take: the text block of the page size, the sizes
book.typ sets text in, what nesting takes from the measure, and the size an image is set at.

`bindery.engine.typeset` keeps the measure each block is set in, at least, from these figures, and stops
indenting where that would leave less than MIN_MEASURE of the text block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bindery.engine.breaks import widest
from bindery.engine.literals import literal
from bindery.images import Asset

PT_PER_MM = 72 / 25.4


@dataclass
class Block:
    """The text block of the page size being set."""

    width_mm: float
    height_mm: float

    @property
    def width_pt(self) -> float:
        return self.width_mm * PT_PER_MM


# What nesting takes from the measure, at least (book.typ's design and Typst's defaults; measured at 10pt):
QUOTE_INDENT = 2 * 1.5 * 9.5  # a block quote: 1.5 em each side, its text 9.5pt
ASIDE_INDENT = 12.5  # an aside (book.typ's `aside`): its rule, 2.5pt, and 10pt of inset at its left
BULLET_INDENT = 12.0  # a bullet list: its marker and 0.5 em (10.5pt measured at the deepest marker)
DIGIT_INDENT = 5.0  # a numbered list: half an em for each character of its widest number and its dot,
# and one more for the body's indent ("1." is 11.9pt measured; "1000000000." 53.7pt)
TABLE_INSET = 4.0  # a table cell's inset, each side (book.typ)
TABLE_PT = 8.5  # a table's text (book.typ)
MAX_HEADER_LINES = 5  # a table's header, which repeats on each page, is at most this many lines
CODE_INSET = 5.0  # a code block's, each side (book.typ)
MIN_MEASURE = 0.5  # of the text block: a quote or list that would leave less is set without its indent

# The sizes book.typ sets a chapter's text in: the body 10pt (a quote, a table, a note smaller), a ##
# heading 12pt, a ### 10.5pt (a deeper one is taken as 12pt), code 8pt.
BODY_PT, HEADING_PT, CODE_PT = 10.0, {2: 12.0, 3: 10.5}, 8.0
MONO_EM = 0.602  # DejaVu Sans Mono: every character of printable ASCII
PRINTABLE_ASCII = re.compile("[\x20-\x7e\n]*")
NOTE_MARK = 3 * 1.05 * BODY_PT  # a note's number, cited inside a run: three digits


def columns_held(measure: float) -> int:
    """How many columns a table `measure` pt wide holds: each at least its insets and a character of
    printable ASCII at its widest (at most 1.05 em)."""
    return max(1, int(measure // (2 * TABLE_INSET + 1.05 * TABLE_PT)))


def points(value: float) -> str:
    return f"{max(value, 1.0):.2f}pt"


HEAD_PT = 8.0  # a running head's size


def head(title: str, block: Block) -> str:
    """A title as a running head sets it: on one line, so cut short (book.typ's `one-line`) if it may be
    wider than the text block. A running head on every page, it is measured only when it may be."""
    if widest(title, HEAD_PT) <= block.width_pt:
        return literal(title)
    return f"one-line({literal(title)}, {points(block.width_pt)})"


IMAGE_DPI = 150  # an image no wider than the text block is set at this resolution; a wider one, to fit it
MAX_IMAGE_HEIGHT = 0.6  # of the text block's height, so a tall figure leaves room for its paragraph


def image_size(asset: Asset, width: float, height: float) -> tuple[float, float]:
    """The size in mm to set an image at: IMAGE_DPI, shrunk to fit `width` x `height`, never enlarged."""
    natural_w, natural_h = asset.width * 25.4 / IMAGE_DPI, asset.height * 25.4 / IMAGE_DPI
    scale = min(1.0, width / natural_w, height / natural_h)
    return natural_w * scale, natural_h * scale
