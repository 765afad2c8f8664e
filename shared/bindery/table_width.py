"""The widest table a manuscript may hold: MAX_TABLE_COLUMNS columns.

A pipe table's columns are its delimiter row's cells (`|---|:--:|`): a header row with as many makes it a
table, and its body rows are cut or padded to them. A simple or multiline table's are its line of dashes'
runs (`-----  ------`), and a grid table's the runs between the `+`s of its borders (`+---+---+`,
`bindery.engine.pandoc_tables`). Every format sets a cell as an element of its own, and the pdf sets a
table wider than the page holds in bands, one under another, so none is lost; but a table of thousands of
one-character columns costs the pdf many times what as much prose does. So a manuscript is refused, before
anything is built, at a line that reads as one of those of more columns than that, after any block quote's
`>` and a list item's marker, as the line is read alone: a line of nothing but pipes, dashes, colons and
blanks; of dashes and blanks; or a grid's border, `+` then runs of `-`, `=` or `:` each ending in `+` (one
inside a fenced code block is counted too; no table has so many). (A grid whose columns are set by `+`s on
several lines, none of them so many, is read as its text past the bound: `bindery.engine.grid_tables`.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bindery import errors

MAX_TABLE_COLUMNS = 256

# What may open a line before a table: block quotes' markers and a list item's, with their spaces.
_CONTAINERS = re.compile(rb"[ \t]*(?:>[ \t]*|(?:[-+*]|[0-9]{1,9}[.)])[ \t]+)*")
_DELIMITER_ROW = re.compile(rb"[|:\- \t]*\r?\n?")
_DASHES = re.compile(rb"-[- \t]*\r?\n?")
_RUN = re.compile(rb"-+")
_BORDER = re.compile(rb"\+(?:[-=:]+\+)+[ \t]*\r?\n?")
# A line of dashes of more runs than the bound holds as many characters of dashes and blanks, at least, in
# a row; a border of more columns as many of `+`, `-`, `=` and `:`. Mapped to one byte each (any other to a
# line feed), a batch of lines with neither is let through in two passes in C.
_WIDE = 2 * MAX_TABLE_COLUMNS + 1
_AS_DASHES = bytes(45 if byte in b"- \t" else 10 for byte in range(256))
_AS_BORDER = bytes(43 if byte in b"+-=:" else 10 for byte in range(256))


def refuse_wide_table(line: bytes, number: int) -> None:
    """Refuse line `number` (counted from 1) of a manuscript, if it is a pipe table's delimiter row, a
    line of dashes or a grid table's border of more than MAX_TABLE_COLUMNS columns: 422 `table_too_wide`,
    with the line, its columns and the limit."""
    columns, shape = 0, ""
    if line.count(b"|") >= MAX_TABLE_COLUMNS - 1:
        start = _CONTAINERS.match(line).end()  # type: ignore[union-attr]  # it matches anywhere, if only ""
        if _DELIMITER_ROW.fullmatch(line, start) and b"-" in line:
            columns = sum(1 for cell in line[start:].strip().strip(b"|").split(b"|") if b"-" in cell)
            shape = "the delimiter row of a table"
    if line.count(b"-") > MAX_TABLE_COLUMNS:
        start = _CONTAINERS.match(line).end()  # type: ignore[union-attr]
        if _DASHES.fullmatch(line, start):
            columns, shape = len(_RUN.findall(line, start)), "the line of dashes of a table"
    if line.count(b"+") > MAX_TABLE_COLUMNS:
        start = _CONTAINERS.match(line).end()  # type: ignore[union-attr]
        if _BORDER.fullmatch(line, start):
            columns, shape = line.count(b"+", start) - 1, "the border of a grid table"
    if columns > MAX_TABLE_COLUMNS:
        raise errors.Unprocessable(
            f"line {number:,} is {shape} of {columns:,} columns; a table may have at most "
            f"{MAX_TABLE_COLUMNS:,} (a line of that shape is refused in a code block too)",
            code="table_too_wide",
            line=number,
            columns=columns,
            limit=MAX_TABLE_COLUMNS,
        )


def refuse_wide_tables(lines: Sequence[bytes], first_line: int) -> None:
    """`refuse_wide_table` for each of `lines`, the first of them line `first_line`: in a few passes in C
    over their bytes when, as in most manuscripts, they hold too few pipes for one such row and no run of
    dashes and blanks, or of a border's characters, long enough for one."""
    if sum(line.count(b"|") for line in lines) < MAX_TABLE_COLUMNS - 1:
        batch = b"".join(lines)
        if b"-" * _WIDE not in batch.translate(_AS_DASHES) and b"+" * _WIDE not in batch.translate(
            _AS_BORDER
        ):
            return
    for number, line in enumerate(lines, start=first_line):
        refuse_wide_table(line, number)
