"""The pieces of WordprocessingML a docx is written from: text as character data, a paragraph, a run, a
table, a paragraph's indentation and alignment. Every piece of the author's text reaches the XML through
`text()`, so it is only ever characters; what the pieces mean is the writer's (`bindery.engine.wordml`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it.token import Token

# The characters outside XML 1.0's Char production (C0 controls but tab and line feeds, lone surrogates,
# U+FFFE and U+FFFF) each become U+FFFD. (Named as the few it forbids: the class of all it allows takes
# 20 ms to compile, at every cold start.)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
QUOTE_INDENT = 567  # twips a block quote is set in on each side (docx_parts' BlockText), per level
LIST_INDENT = 720  # twips each list level is set in (docx_parts' numbering), its marker hanging 360
TEXT_W = 9070  # the text block's width in twips (docx_parts: A4 less its margins), which tables share
MAX_INDENT = TEXT_W * 2 // 3  # the furthest a quoted paragraph is set in
# A paragraph's outline level over its style's: body text, which Word's contents field and navigation leave
# out (an `.unlisted` heading keeps its heading style, and pandoc reads it back as a heading).
BODY_LEVEL = '<w:outlineLvl w:val="9"/>'


@dataclass
class RunState:
    """The inline state a run is written in: how deep in each emphasis, and the link it is in, if any."""

    bold: int = 0
    italic: int = 0
    strike: int = 0
    link: str | None = None  # the relationship id of the link being written (`#id`: to a bookmark)
    smallcaps: int = 0
    raised: int = 0  # superscripts open less subscripts open: above 0 raised, below lowered
    keys: int = 0  # inside `<kbd>`: a monospaced face
    marked: int = 0  # inside `<mark>`: highlighted
    styles: list[str] = field(default_factory=list)  # the spans' custom styles open (`docx_notes`)

    def mark(self, kind: str) -> None:
        """An element that changes how its runs look opens or closes (`MARKS`)."""
        name, step = MARKS[kind]
        setattr(self, name, getattr(self, name) + step)

    def properties(self, style: str = "") -> str:
        """The run's properties: its character style (`style`, the writer's; else a link's, else the custom
        style of the span it is in), then its emphasis (its language after them is the writer's)."""
        if not style and self.link is not None:
            style = '<w:rStyle w:val="Hyperlink"/>'
        elif not style and self.styles:
            style = f'<w:rStyle w:val="{self.styles[-1]}"/>'
        props = style + (_MONO if self.keys else "")
        props += ("<w:b/>" if self.bold else "") + ("<w:i/>" if self.italic else "")
        props += ("<w:strike/>" if self.strike else "") + ("<w:smallCaps/>" if self.smallcaps else "")
        props += '<w:highlight w:val="yellow"/>' if self.marked else ""
        if self.raised:
            props += f'<w:vertAlign w:val="{"superscript" if self.raised > 0 else "subscript"}"/>'
        return props


# Each token that opens or closes how runs look: the RunState field it moves, and by how much.
MARKS = {
    f"{kind}_{edge}": (name, sign * (1 if edge == "open" else -1))
    for kind, name, sign in (
        ("strong", "bold", 1), ("em", "italic", 1), ("s", "strike", 1), ("sup", "raised", 1),
        ("sub", "raised", -1), ("kbd", "keys", 1), ("mark", "marked", 1),
    )
    for edge in ("open", "close")
}  # fmt: skip
_MONO = '<w:rFonts w:ascii="Courier New" w:hAnsi="Courier New" w:cs="Courier New"/>'


def text(value: str) -> str:
    """`value` as XML character data (or an attribute's value): only ever characters."""
    return escape(_NOT_XML.sub("\ufffd", value), quote=True)


def paragraph(style: str, runs: str, *, rtl: bool = False, extra: str = "") -> str:
    bidi = "<w:bidi/>" if rtl else ""
    return f'<w:p><w:pPr><w:pStyle w:val="{style}"/>{extra}{bidi}</w:pPr>{runs}</w:p>'


def run(value: str, props: str = "") -> str:
    """A run of plain text: tabs as Word's tabs, line feeds as breaks, spaces kept."""
    if not value:
        return ""
    rpr = f"<w:rPr>{props}</w:rPr>" if props else ""
    if "\n" not in value and "\t" not in value:  # the usual run: one piece of text
        return f'<w:r>{rpr}<w:t xml:space="preserve">{text(value)}</w:t></w:r>'
    pieces = []
    for n, line in enumerate(value.split("\n")):
        if n:
            pieces.append("<w:br/>")
        for m, part in enumerate(line.split("\t")):
            if m:
                pieces.append("<w:tab/>")
            if part:
                pieces.append(f'<w:t xml:space="preserve">{text(part)}</w:t>')
    return f"<w:r>{rpr}{''.join(pieces)}</w:r>"


def indentation(quote: int, more: int, hanging: str = "") -> str:
    """The indentation of a paragraph `quote` quotes deep, set in `more` twips further (a list's); never
    more than two thirds of the text block, so that a quote 20 deep still leaves its text a column."""
    left = min(QUOTE_INDENT * quote + more, MAX_INDENT)
    return f'<w:ind w:left="{left}" w:right="{QUOTE_INDENT}"{hanging}/>'


def alignment(style: str) -> str:
    found = re.search(r"text-align:(left|center|right)", style)
    if found is None:
        return ""
    return f'<w:jc w:val="{ {"left": "left", "center": "center", "right": "right"}[found.group(1)] }"/>'


def table_cell(token: Token, written: str) -> str:
    """A table's cell (`written`, its paragraph) as a `w:tc`'s content, spanning the columns and rows its
    token says (`engine.pandoc_tables`): a place covered by a cell to its left is none (""), and one under
    a cell spanning rows continues its merge."""
    columns, rows, covered = token.attrGet("colspan"), token.attrGet("rowspan"), token.meta.get("covered")
    if covered is not None:
        below, right, width = covered
        if right or not below:
            return ""
        columns, rows = width, None
    span = f'<w:gridSpan w:val="{int(columns)}"/>' if columns and int(columns) > 1 else ""
    merge = '<w:vMerge w:val="restart"/>' if rows and int(rows) > 1 else "<w:vMerge/>" if covered else ""
    return f"<w:tcPr>{span}{merge}</w:tcPr>{written}" if span or merge else written


def table_xml(rows: list[tuple[bool, list[str]]]) -> str:
    """A table in the `Table` style; its header rows repeat at the top of every page it runs onto."""
    columns = max((len(cells) for _, cells in rows), default=1)
    grid = f'<w:gridCol w:w="{TEXT_W // columns}"/>' * columns
    out = [
        '<w:tbl><w:tblPr><w:tblStyle w:val="Table"/><w:tblW w:w="5000" w:type="pct"/>'
        '<w:tblLook w:firstRow="1" w:lastRow="0" w:firstColumn="0" w:lastColumn="0" w:noHBand="0" '
        f'w:noVBand="1"/></w:tblPr><w:tblGrid>{grid}</w:tblGrid>'
    ]
    for header, cells in rows:
        cells = cells + [paragraph("Compact", "")] * (columns - len(cells))
        props = "<w:trPr><w:tblHeader/></w:trPr>" if header else ""
        out.append(f"<w:tr>{props}" + "".join(f"<w:tc>{cell}</w:tc>" for cell in cells if cell) + "</w:tr>")
    out.append("</w:tbl>")
    return "".join(out)
