"""pandoc's simple, multiline and grid tables (its manual's `simple_tables`, `multiline_tables`,
`grid_tables`), read as pandoc reads them, into the tokens markdown-it's pipe tables make, so that every
format sets them as it sets a pipe table, with its caption (`bindery.engine.crossrefs`).

      Right     Left     Center     Default            a simple table: a column's alignment is where its
    -------     ------ ----------   -------            header stands over the dashes (with no header,
         12     12        12            12             the first row's); it ends at a blank line, or
                                                       after a line of dashes (with no header, only so)

A multiline table opens with a line of dashes, and its rows, separated by blank lines, may run over several
lines each (joined as pandoc joins them, by a line break a renderer sets as a space); it closes with the
next line of dashes. (pandoc's table footer is a line of dashes, then "blank lines", the first of which is
that line's own line ending: what follows it need not be blank.)

A grid table is `bindery.engine.grid_tables`'; its cells hold blocks, which are set in the one line of text
a cell of every format holds: each block (a paragraph, a list's item behind its marker, a code block as
code) on a line of its own. A cell spanning columns or rows carries html's `colspan` and `rowspan`, and the
places it covers are cells of their own, hidden (markdown-it writes no hidden token), which say where they
are in the cell that covers them (`meta["covered"]`): the docx merges them into it (`bindery.engine.ooxml`),
and the pdf sets it as a Typst cell spanning them (`bindery.engine.pdf_tables`).

Column widths pandoc takes from the dashes are not kept: every format sizes a column as it sizes a pipe
table's. The work is linear in the manuscript: a table ends within MAX_TABLE_LINES lines (the cut holds
its windows open over as many, `bindery.manuscript`), and what each line is asked (where the next blank
line, dashed line or closing line is) is found once for a run of lines.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from bindery.engine import grid_tables
from bindery.engine.grid_tables import Cell, Grid

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import StateBlock

# The most lines a simple or multiline table may take, from its first dashes to its last: the cut keeps no
# fresh start within as many lines after a line of dashes (a multiline table's rows may begin in column 0
# after a blank line, and what reads as a table is known only at its closing dashes).
MAX_TABLE_LINES = 1000
# A line of dashes: runs of them, each with the spaces after it. (`- ` opens a list item, as in pandoc.)
DASHES = re.compile(r" {0,3}(?!- |-$)(-+ *)+")
_RUN = re.compile(r"-+ *")
_BULLET_OR_HEADING = re.compile(r" {0,3}(?:[-+*](?: |$)|#{1,6}(?: |$)|```|~~~|:::)")
_IN_CELL = "pandoc_table_cell"  # (env: a grid table's cell is being read; one inside it is text)


def install(md: MarkdownIt) -> None:
    md.block.ruler.after("table", "pandoc_table", pandoc_table)


def pandoc_table(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    if state.sCount[start] - state.blkIndent >= 4:
        return False
    text = _text(state, start)
    first = text.lstrip(" ")[:1]
    found: tuple[Grid, int] | None = None
    if first == "+":
        found = _grid(state, start, end)
    else:
        dashes = first == "-" and DASHES.fullmatch(text) is not None
        if dashes:
            found = _multiline(state, start, end, headed=True) or _simple(state, start, end, headed=False)
        if found is None and start + 1 < end:
            found = _simple(state, start, end, headed=True)
        if found is None and dashes:
            found = _multiline(state, start, end, headed=False)
    if found is None:
        return False
    if not silent:
        _emit(state, found[0], start, found[1])
    state.line = found[1]
    return True


def _text(state: StateBlock, line: int) -> str:
    return str(state.getLines(line, line + 1, state.blkIndent, False)).rstrip()


def _blank(state: StateBlock, line: int) -> bool:
    return line >= state.lineMax or state.isEmpty(line)


def _dashed(state: StateBlock, line: int) -> bool:
    return state.sCount[line] - state.blkIndent < 4 and DASHES.fullmatch(_text(state, line)) is not None


def _ends(state: StateBlock, line: int) -> bool:
    return _blank(state, line) or _dashed(state, line)


def _next(state: StateBlock, kind: str, line: int, end: int) -> int | None:
    """The first line from `line` on, before `end` and within MAX_TABLE_LINES, that is dashed, or blank or
    dashed (`kind`). Remembered for the run of lines looked through, per container being read, so that
    asking at every line of a run costs the run once."""
    limit = min(end, line + MAX_TABLE_LINES)
    test = _dashed if kind == "dashed" else _ends
    memo: dict[Any, list[Any]] = state.__dict__.setdefault("_pandoc_tables_next", {})
    key = (kind, end, state.blkIndent, state.level)
    seen = memo.get(key)
    if seen is not None and seen[0] <= line and (line <= seen[1] if seen[2] is None else seen[2] >= line):
        lo, n, hit = seen
        if hit is not None:
            return hit if hit < limit else None
    else:
        lo, n = line, line
    n = max(n, line)
    while n < limit and not test(state, n):
        n += 1
    hit = n if n < limit else None
    if len(memo) > 16:  # (containers read before this one)
        memo.clear()
    memo[key] = [lo, n, hit]
    return hit


def _pieces(text: str, runs: list[tuple[int, int]]) -> list[str]:
    """A line's text in each column: split where each run of dashes starts, the last to the line's end."""
    starts = [at for at, _ in runs]
    return [text[at : starts[k + 1]] if k + 1 < len(starts) else text[at:] for k, at in enumerate(starts)]


def _runs(text: str) -> list[tuple[int, int]]:
    """Each run of dashes' first column and length."""
    return [(m.start(), len(m.group().rstrip(" "))) for m in _RUN.finditer(text)]


def _align(lines: list[str], length: int) -> str:
    """pandoc's alignType: by the shortest of the header's lines in the column, against its dashes."""
    kept = sorted((line.rstrip() for line in lines if line.rstrip()), key=len)
    if not kept:
        return ""
    left, right = kept[0][0] in " \t", len(kept[0]) < length
    return {(True, False): "right", (False, True): "left", (True, True): "center"}.get((left, right), "")


def _table(aligns: list[str], head: list[str] | None, rows: list[list[str]]) -> Grid:
    """A table of one cell per column and row (a header of none but empty cells is none, as pandoc's)."""
    if head is not None and not any(head):
        head = None
    grid = ([head] if head is not None else []) + rows
    cells = [Cell(i, j, 1, 1, text) for i, row in enumerate(grid) for j, text in enumerate(row)]
    return Grid(len(aligns), aligns, 1 if head is not None else 0, 0, len(grid), cells, blocks=False)


def _simple(state: StateBlock, start: int, end: int, *, headed: bool) -> tuple[Grid, int] | None:
    """A simple table from `start`: a header line (`headed`) then dashes, its rows to a blank line or a line
    of dashes, which is its last (with no header, only the latter)."""
    ruled = start + 1 if headed else start
    if ruled + 1 >= end or not _dashed(state, ruled) or _ends(state, ruled + 1):
        return None
    if headed:
        header = _text(state, start)
        if _blank(state, start) or _BULLET_OR_HEADING.match(header) or len(_runs(_text(state, ruled))) < 2:
            return None  # (a bullet, a heading, or text over one run of dashes: a setext heading)
    last = _next(state, "ends", ruled + 1, end)
    last = last if last is not None else (end if end - ruled <= MAX_TABLE_LINES else None)
    if last is None:
        return None
    footer = last < end and _dashed(state, last)
    if not headed and not footer:
        return None
    closing = last + 1 if footer else last
    runs = _runs(_text(state, ruled))
    texts = [_text(state, n) for n in range(ruled + 1, last)]
    head = _pieces(_text(state, start), runs) if headed else None
    aligns = [
        _align([piece], length)
        for piece, (_, length) in zip(head or _pieces(texts[0], runs), runs, strict=True)
    ]
    rows = [[piece.strip() for piece in _pieces(text, runs)] for text in texts]
    return _table(aligns, [piece.strip() for piece in head] if head else None, rows), closing


def _multiline(state: StateBlock, start: int, end: int, *, headed: bool) -> tuple[Grid, int] | None:
    """A multiline table from `start`: dashes, its header's lines and dashes (`headed`; with no header, the
    dashes alone), then rows of lines separated by blank lines, to a line of dashes."""
    ruled = start
    if headed:
        if start + 1 >= end or _blank(state, start + 1):
            return None
        found = _next(state, "dashed", start + 1, end)
        if found is None:
            return None
        ruled = found
    if ruled + 1 >= end or _ends(state, ruled + 1):
        return None
    footer = _next(state, "dashed", ruled + 1, end)
    if footer is None or footer - start >= MAX_TABLE_LINES:
        return None
    runs = _runs(_text(state, ruled))
    header = [_pieces(_text(state, n), runs) for n in range(start + 1, ruled)]
    body: list[list[list[str]]] = [[]]
    for n in range(ruled + 1, footer):
        if _blank(state, n):
            if body[-1]:
                body.append([])
        else:
            body[-1].append(_pieces(_text(state, n), runs))
    rows = [_joined(lines, len(runs)) for lines in body if lines]
    sample = header if headed else [_pieces(_text(state, ruled + 1), runs)]
    aligns = [_align([line[j] for line in sample], length) for j, (_, length) in enumerate(runs)]
    head = _joined(header, len(runs)) if headed else None
    after = footer + 1
    return _table(aligns, head, rows), after


def _joined(lines: list[list[str]], columns: int) -> list[str]:
    """Each column's lines, trimmed and joined by line breaks (pandoc's unlines, read as inlines)."""
    return ["\n".join(kept for line in lines if (kept := line[j].strip())) for j in range(columns)]


def _grid(state: StateBlock, start: int, end: int) -> tuple[Grid, int] | None:
    if state.env.get(_IN_CELL):
        return None  # a grid table inside a grid table's cell is its text (each level would read it again)
    indent = state.sCount[start] - state.blkIndent
    if indent:
        return None  # (pandoc 3.9 reads an indented one as text)
    lines: list[str] = []
    n = start
    while n < end and n - start < MAX_TABLE_LINES:
        text = _text(state, n)
        if state.sCount[n] - state.blkIndent != indent or text.lstrip(" ")[:1] not in ("+", "|"):
            break
        lines.append(text[indent:])
        n += 1
    bounded = n - start == MAX_TABLE_LINES
    while lines and not grid_tables.is_border(lines[-1]):
        lines.pop()  # (the table ends at its last closing line)
    if not lines:
        return None
    n = start + len(lines)
    grid = grid_tables.read(lines)
    if grid is None:
        return None
    # One that runs on past the bound goes on as another table, from its last line across: that line is
    # the one's last and the other's first.
    return grid, n - 1 if bounded and n - 1 > start else n


def _emit(state: StateBlock, grid: Grid, start: int, after: int) -> None:
    """The table's tokens, as markdown-it's pipe tables make them."""
    opened = state.push("table_open", "table", 1)
    opened.map = [start, after]
    by_row: dict[int, list[Cell]] = {}
    for cell in grid.cells:
        by_row.setdefault(cell.row, []).append(cell)
    covered: dict[tuple[int, int], Cell] = {}
    for cell in grid.cells:
        for i in range(cell.row, cell.row + cell.rows):
            for j in range(cell.column, cell.column + cell.columns):
                if (i, j) != (cell.row, cell.column):
                    covered[(i, j)] = cell
    parts = [
        ("thead", 0, grid.head),
        ("tbody", grid.head, grid.bands - grid.foot),
        ("tfoot", grid.bands - grid.foot, grid.bands),
    ]
    for tag, first, last in parts:
        if first >= last:
            continue
        state.push(f"{tag}_open", tag, 1).map = [start, after]
        cell_tag = "th" if tag == "thead" else "td"
        for i in range(first, last):
            state.push("tr_open", "tr", 1).map = [start, after]
            starts = {at.column: at for at in by_row.get(i, [])}
            for j in range(grid.columns):
                here = starts.get(j)
                hidden = here is None and (i, j) in covered  # a place a cell spanning it covers
                cell_open = state.push(f"{cell_tag}_open", cell_tag, 1)
                if grid.aligns[j]:
                    cell_open.attrs["style"] = f"text-align:{grid.aligns[j]}"
                if here is not None and here.columns > 1:
                    cell_open.attrs["colspan"] = str(here.columns)
                if here is not None and here.rows > 1:
                    cell_open.attrs["rowspan"] = str(here.rows)
                inline = state.push("inline", "", 0)
                inline.content = _inline_of(state, here.text, grid) if here is not None else ""
                inline.map, inline.children = [start, after], []
                cell_close = state.push(f"{cell_tag}_close", cell_tag, -1)
                cell_open.hidden = cell_close.hidden = hidden
                if hidden:  # (how far below and right of the cell that covers it, and that cell's width)
                    cover = covered[(i, j)]
                    cell_open.meta["covered"] = (i - cover.row, j - cover.column, cover.columns)
            state.push("tr_close", "tr", -1)
        state.push(f"{tag}_close", tag, -1)
    state.push("table_close", "table", -1)


def _inline_of(state: StateBlock, text: str, grid: Grid) -> str:
    """A cell's text as one line of inline markdown: a simple or multiline table's as it is, a grid
    table's blocks each on a line of its own (a hard break between them)."""
    if not grid.blocks or ("\n" not in text and not _BLOCKISH.match(text)):
        return text
    return _flattened(state, text)


_BLOCKISH = re.compile(r" {0,3}(?:[-+*#>]|\d{1,9}[.)]|```|~~~| {4})")


def _flattened(state: StateBlock, text: str) -> str:
    from markdown_it.token import Token

    env = {"references": state.env.get("references", {}), _IN_CELL: True}
    tokens: list[Token] = []
    state.md.block.parse(text, state.md, env, tokens)
    blocks: list[str] = []
    markers: list[list[int]] = []  # each open list's next number (0: a bullet list)
    pending = ""
    for token in tokens:
        if token.type == "bullet_list_open":
            markers.append([0])
        elif token.type == "ordered_list_open":
            markers.append([int(token.attrGet("start") or 1)])
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            markers.pop()
        elif token.type == "list_item_open" and markers:
            number = markers[-1][0]
            pending = "\u2022 " if number == 0 else f"{number}\\. "
            if number:
                markers[-1][0] += 1
        elif token.type == "inline" and token.content.strip():
            blocks.append(pending + token.content.strip())
            pending = ""
        elif token.type in ("fence", "code_block"):
            for part in token.content.rstrip("\n").split("\n"):
                ticks = "`" * (max((len(m) for m in re.findall(r"`+", part)), default=0) + 1)
                if part.strip():
                    blocks.append(f"{pending}{ticks} {part} {ticks}")
                    pending = ""
    return "\\\n".join(blocks)
