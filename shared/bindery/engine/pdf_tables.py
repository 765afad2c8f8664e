"""A Markdown table as Typst source (`bindery.engine.typeset` writes the rest of a chapter): its cells in
bands of as many columns as the measure holds, and tables of at most MAX_TABLE_ROWS rows, one under another,
each with the header's cells above its own. And lists: a bullet or ordered list (`listed`), and a
definition list, as Typst's term list (`terms`). And a code block (`code`)."""

from __future__ import annotations

import re
import textwrap
from contextlib import AbstractContextManager
from typing import Protocol

from markdown_it.token import Token

from bindery.engine.breaks import widest
from bindery.engine.fancy_lists import label
from bindery.engine.literals import literal, text
from bindery.engine.measures import (
    BODY_PT,
    BULLET_INDENT,
    CODE_INSET,
    CODE_PT,
    DIGIT_INDENT,
    MAX_HEADER_LINES,
    MONO_EM,
    PRINTABLE_ASCII,
    TABLE_INSET,
    TABLE_PT,
    columns_held,
    points,
)
from bindery.engine.token_tree import list_items, plain_text


class Writer(Protocol):
    """What a table's cells are written by (`bindery.engine.typeset.Writer`)."""

    measure: float
    size: float

    def narrowed(self, measure: float) -> AbstractContextManager[None]: ...

    def inline(self, children: list[Token]) -> str: ...

    def blocks(self, tokens: list[Token]) -> str: ...

    def may_indent(self, indent: float) -> bool: ...


PARAGRAPH_BREAK = "\n\n"
TERMS_INDENT = 18.0  # a definition's indent under its term, in pt
MAX_TABLE_ROWS = 200  # Typst lays a table out in work that grows faster than its rows: more are several
_LITERAL = re.compile(r'#("(?:[^"\\]|\\.)*")')  # one string literal set as text (`literals.text`)


def listed(writer: Writer, token: Token, inner: list[Token]) -> str:
    """A bullet or ordered list, each item's blocks indented past its marker."""
    items = list_items(inner)
    tight = bool(inner) and len(inner) > 1 and inner[1].hidden
    start = token.attrGet("start")
    first = int(start) if start else 1
    ordered = token.type == "ordered_list_open"
    pattern = str(token.meta.get("numbering", "1."))
    indent = (len(label(pattern, first + len(items) - 1)) + 1) * DIGIT_INDENT if ordered else BULLET_INDENT
    if not writer.may_indent(indent):
        # Nested too deep to indent again: each item set as a paragraph, its marker before it.
        return "".join(
            text(label(pattern, first + n) + " " if ordered else "• ")
            + writer.blocks(item).rstrip("\n")
            + "\n\n"
            for n, item in enumerate(items)
        )
    with writer.narrowed(writer.measure - indent):
        written = [writer.blocks(item) for item in items]
    call = "enum" if ordered else "list"
    args = f"tight: {'true' if tight else 'false'}" + (f", start: {int(start)}" if start else "")
    if ordered and pattern != "1.":
        args += f", numbering: {literal(pattern)}"  # (a pattern `engine.fancy_lists` made)
    if not ordered and "task-list" in str(token.attrGet("class") or ""):
        args += ", marker: []"  # (a task's box is its marker: `engine/tasks.py`)
    return f"#{call}({args}, " + ", ".join(f"[{item}]" for item in written) + ")\n\n"


# A table's cell as `table` reads it: its alignment, its inline tokens, the columns and rows it spans, and,
# for a place a spanning cell covers (`engine.pandoc_tables`), how far below and right of that cell it is.
_Cell = tuple[str, list[Token], int, int, "tuple[int, int, int] | None"]
_Row = tuple[bool, list[_Cell]]


def table(writer: Writer, inner: list[Token]) -> str:
    found: list[_Row] = []
    for i, token in enumerate(inner):
        if token.type == "tr_open":
            found.append((False, []))
        elif token.type in ("th_open", "td_open"):
            style = str(token.attrs.get("style") or "")
            align = style.removeprefix("text-align:") if style.startswith("text-align:") else "left"
            spans = int(token.attrs.get("colspan") or 1), int(token.attrs.get("rowspan") or 1)
            children = inner[i + 1].children or []
            found[-1][1].append((align, children, *spans, token.meta.get("covered")))
            if token.type == "th_open":
                found[-1] = (True, found[-1][1])
    if not found:
        return ""
    columns = max(len(cells) for _, cells in found)
    found = [(head, cells + [("left", [], 1, 1, None)] * (columns - len(cells))) for head, cells in found]
    # More columns than the measure holds (each would be less than a character wide) are set in bands of
    # as many as it does, and more rows than MAX_TABLE_ROWS in tables of as many: one table under
    # another, each with the header's cells above its own.
    held = columns_held(writer.measure)
    out: list[str] = []
    head = [(at, row) for at, row in enumerate(found) if row[0]]  # (each row with its place in the table)
    body = [(at, row) for at, row in enumerate(found) if not row[0]]
    for n in range(0, columns, held):
        for m in range(0, max(1, len(body)), MAX_TABLE_ROWS):
            out.append(_band(writer, [head, body[m : m + MAX_TABLE_ROWS]], n, min(n + held, columns)))
    return "".join(out)


def _spanned(parts: list[list[tuple[int, _Row]]], first: int, last: int) -> list[_Row]:
    """The rows of `parts` (a header's, a run of the body's: each a run of rows) in columns `first` to
    `last`: a cell's span cut to its part and the band, a place it covers left out where it reaches, and
    set as an empty cell where the cell covering it is outside them."""
    rows: list[_Row] = []
    for part in parts:
        where = {at: k for k, (at, _) in enumerate(part)}
        for at, (head, cells) in part:
            kept: list[_Cell] = []
            for j in range(first, last):
                align, children, columns, down, covered = cells[j]
                if covered is None:
                    spans = min(columns, last - j), min(down, len(part) - where[at])
                    kept.append((align, children, *spans, None))
                elif not (j - covered[1] >= first and at - covered[0] in where):
                    kept.append((align, [], 1, 1, None))
            rows.append((head, kept))
    return rows


def _band(writer: Writer, parts: list[list[tuple[int, _Row]]], first: int, last: int) -> str:
    """A table of these rows, in columns `first` to `last`."""
    found = _spanned(parts, first, last)
    columns = last - first
    aligns = ", ".join(cell[0] for cell in next(row for part in parts for _, row in part)[1][first:last])
    # Typst shrinks auto columns that overflow to no less than an equal share of the width.
    cell_measure = writer.measure / columns - 2 * TABLE_INSET
    if any(
        widest(plain_text(cell[1]), BODY_PT) > MAX_HEADER_LINES * cell_measure
        for head, cells in found
        if head
        for cell in cells
    ):
        # A header repeats on every page, and so may not break across one: a long one is a first row.
        found = [(False, cells) for _, cells in found]
    writer.size = TABLE_PT
    try:
        with writer.narrowed(cell_measure):
            rows = [
                (head, [_spanning(_cell(writer, cell[1]), cell) for cell in cells]) for head, cells in found
            ]
    finally:
        writer.size = BODY_PT
    head = [", ".join(cells) for is_head, cells in rows if is_head]
    header = f"table.header({', '.join(head)}), " if head else ""
    rest = ", ".join(", ".join(cells) for is_head, cells in rows if not is_head)
    return f"#book-table(columns: {columns}, align: ({aligns},), {header}{rest})\n\n"


def _spanning(written: str, cell: _Cell) -> str:
    """A cell, as `_cell` writes it, in Typst's `table.cell` where it spans columns or rows."""
    columns, rows = cell[2], cell[3]
    if columns == 1 and rows == 1:
        return written
    return f"table.cell(colspan: {columns}, rowspan: {rows}, {written})"


def _cell(writer: Writer, cell: list[Token]) -> str:
    """A table's cell as Typst's table takes it: text alone as its string (a content block's cell costs
    Typst about twice); a word of printable ASCII that fits, the most common cell, at once."""
    alone = cell[0].content if len(cell) == 1 and cell[0].type == "text" else None
    if alone is not None and alone.isascii() and widest(alone, writer.size) <= writer.measure:
        return literal(alone)
    content = writer.inline(cell)
    return m[1] if (m := _LITERAL.fullmatch(content)) else f"[{content}]"


def terms(writer: Writer, inner: list[Token]) -> str:
    """A definition list as Typst's term list: each term, and its definitions' blocks, indented under it."""
    items: list[str] = []
    i = 0
    while i < len(inner):
        if inner[i].type == "dt_open":
            term = writer.inline(inner[i + 1].children or [])
            said: list[str] = []
            i += 3
            while i < len(inner) and inner[i].type == "dd_open":
                end = next(
                    j
                    for j in range(i, len(inner))
                    if inner[j].type == "dd_close" and inner[j].level == inner[i].level
                )
                with writer.narrowed(writer.measure - TERMS_INDENT):
                    said.append(writer.blocks(inner[i + 1 : end]).strip())
                i = end + 1
            items.append(f"terms.item([{term}], [{PARAGRAPH_BREAK.join(said)}])")  # (a paragraph each)
        else:
            i += 1
    return (
        f"#terms(hanging-indent: {TERMS_INDENT}pt, separator: [#linebreak()], {', '.join(items)})\n\n"
        if items
        else ""
    )


def code(measure: float, code: str, lang: str = "") -> str:
    """A code block `measure` pt wide. It keeps its lines, and one wider than the block wraps: one of
    printable ASCII at the block's last column (the code font sets each character 0.602 em wide), any
    other (a wide character, a tab) where book.typ's `code` measures it to end."""
    inner = measure - 2 * CODE_INSET
    if PRINTABLE_ASCII.fullmatch(code):
        columns = max(1, int(inner / (MONO_EM * CODE_PT)))
        code = "\n".join(
            wrapped
            for line in code.split("\n")
            for wrapped in textwrap.wrap(line, columns, drop_whitespace=False) or [""]
        )
        return f"#raw(block: true{lang}, {literal(code)})\n\n"
    raw = f"raw(block: true{lang}, {literal(code)})"
    if any(widest(line, CODE_PT, mono=True) > inner for line in code.split("\n")):
        return f"#code({points(measure)}, {raw})\n\n"
    return f"#{raw}\n\n"
