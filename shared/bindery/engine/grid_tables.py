"""pandoc's grid tables, read as pandoc reads them (its manual's `grid_tables`): a table drawn with `+`,
`-`, `=` and `|`, whose cells may span columns and rows and hold blocks.

    +---------------+---------------+--------------------+
    | Fruit         | Price         | Advantages         |
    +==============:+:==============+:==================:+
    | Bananas       | $1.34         | - built-in wrapper |
    |               |               | - bright color     |
    +---------------+---------------+--------------------+

`read` finds the cells: the table's columns are where any line has a `+`, its bands of rows the lines that
hold one, and a cell the rectangle of slots between walls (`|` down, `-`, `=` or `:` across). A line of `=`
that crosses the whole table ends its header; a last run of rows enclosed by two such lines is its foot.
The colons of the header's line (or the top line, with no header) align the columns. A drawing that is no
such grid (a cell not a rectangle, a line wider than the top, no closing line) is no table, and reads as
the text it is.
The work is linear in the table's characters: each is looked at a bounded number of times.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from bindery.table_width import MAX_TABLE_COLUMNS

_BORDER = frozenset("-=:+")
_ACROSS = frozenset("-=:")


@dataclass(frozen=True)
class Cell:
    row: int  # its first band of rows
    column: int  # its first column
    rows: int  # how many bands of rows it spans
    columns: int  # how many columns it spans
    text: str  # what it holds, each line less the space that pads it


@dataclass(frozen=True)
class Grid:
    columns: int
    aligns: list[str]  # each column's: "left", "center", "right" or "" (the default)
    head: int  # how many bands of rows are the header's
    foot: int  # how many bands of rows are the foot's
    bands: int  # how many bands of rows in all
    cells: list[Cell]  # in reading order: by row, then column
    blocks: bool = True  # whether a cell holds blocks (a grid table's), or a line of text


def is_border(line: str) -> bool:
    """A line that may open or close a grid table: `+`, then runs of `-`, `=` or `:` each ending in `+`."""
    return len(line) >= 3 and line[0] == "+" and line[-1] == "+" and line[1] != "+" and set(line) <= _BORDER


def read(lines: list[str]) -> Grid | None:
    """The grid drawn by `lines` (each stripped of its line ending and trailing blanks), or None."""
    width = len(lines[0])
    if len(lines) < 3 or not is_border(lines[0]) or not is_border(lines[-1]) or len(lines[-1]) != width:
        return None
    # A line short of the top's ends in blanks, as pandoc reads it: a row's missing walls are none, and its
    # cell reaches on to the next wall, or to the table's right edge. One that goes on past a wall at that
    # edge is read to it. (One that crosses the edge with no wall there, pandoc reads wider: here, text.)
    lines = [line[:width] if line[width - 1 : width] in ("|", "+") else line.ljust(width) for line in lines]
    if any(len(line) != width or line[0] not in "+|" for line in lines):
        return None
    corners = [_corners(line) for line in lines]
    edges = sorted({x for found in corners for x in found})
    bounds = [y for y, found in enumerate(corners) if found]
    if any(after - before < 2 for before, after in itertools.pairwise(bounds)):
        return None  # two lines of walls with no line between: no row
    n_rows, n_cols = len(bounds) - 1, len(edges) - 1
    if n_cols > MAX_TABLE_COLUMNS:
        return None  # (one whose border says so is refused before a build: `bindery.table_width`)

    def wall_right(i: int, j: int) -> bool:  # between column j and j + 1, in band i
        x = edges[j + 1]
        return all(lines[y][x] == "|" for y in range(bounds[i] + 1, bounds[i + 1]))

    def wall_below(i: int, j: int) -> bool:  # between band i and i + 1, in column j
        line = lines[bounds[i + 1]]
        return all(line[x] in _ACROSS for x in range(edges[j] + 1, edges[j + 1]))

    owner = [[-1] * n_cols for _ in range(n_rows)]
    cells: list[Cell] = []
    for i in range(n_rows):
        for j in range(n_cols):
            if owner[i][j] >= 0:
                continue
            j2 = j
            while j2 + 1 < n_cols and not wall_right(i, j2):
                j2 += 1
            i2 = i
            while i2 + 1 < n_rows and not wall_below(i2, j):
                i2 += 1
            for y in range(i, i2 + 1):  # a rectangle, open inside and walled around, or no grid
                for x in range(j, j2 + 1):
                    if owner[y][x] >= 0:
                        return None
                    owner[y][x] = len(cells)
                    if (x < j2 and wall_right(y, x)) or (y < i2 and wall_below(y, x)):
                        return None
                    if (x == j2 < n_cols - 1 and not wall_right(y, x)) or (
                        y == i2 < n_rows - 1 and not wall_below(y, x)
                    ):
                        return None
            body = [lines[y][edges[j] + 1 : edges[j2 + 1]] for y in range(bounds[i] + 1, bounds[i2 + 1])]
            cells.append(Cell(i, j, i2 - i + 1, j2 - j + 1, _unpadded(body)))
    head, foot = _parts(lines, bounds)
    aligned = lines[bounds[head]] if head else lines[0]
    aligns = [_align(aligned[edges[j] + 1 : edges[j + 1]]) for j in range(n_cols)]
    cells.sort(key=lambda cell: (cell.row, cell.column))
    return Grid(n_cols, aligns, head, foot, n_rows, cells)


def _corners(line: str) -> list[int]:
    """Where a line's `+`s meet a wall: at either end, or beside a `-`, `=` or `:` (a `+` in a cell's
    text, `markdown+emoji`, is text)."""
    last = len(line) - 1
    return [
        x
        for x, char in enumerate(line)
        if char == "+" and (x in (0, last) or line[x - 1] in _ACROSS or line[x + 1] in _ACROSS)
    ]


def _parts(lines: list[str], bounds: list[int]) -> tuple[int, int]:
    """How many bands are the header's (those above the first full line of `=` but the last line), and how
    many the foot's (those between the last two, where the last line is one)."""
    full = [i for i, y in enumerate(bounds) if "=" in lines[y] and set(lines[y]) <= _BORDER]
    inner = [i for i in full if 0 < i < len(bounds) - 1]
    head = inner[0] if inner else 0
    foot = 0
    if len(bounds) - 1 in full:
        before = [i for i in inner if i > head]
        if before:
            foot = len(bounds) - 1 - before[-1]
    return head, foot


def _align(segment: str) -> str:
    left, right = segment.startswith(":"), segment.endswith(":")
    return "center" if left and right else "left" if left else "right" if right else ""


def _unpadded(body: list[str]) -> str:
    """A cell's lines less the one space that pads them from the wall on the left, and trailing blanks."""
    kept = [(line[1:] if line.startswith(" ") else line).rstrip() for line in body]
    while kept and not kept[-1]:
        kept.pop()
    while kept and not kept[0]:
        kept.pop(0)
    return "\n".join(kept)
