"""The widest table a manuscript may hold: MAX_TABLE_COLUMNS columns.

A table's columns are its delimiter row's cells (`|---|:--:|`): a header row with as many makes it a table,
and its body rows are cut or padded to them. Every format sets a cell as an element of its own, and the pdf
sets a table wider than the page holds in bands, one under another, so none is lost; but a table of
thousands of one-character columns costs the pdf many times what as much prose does. So a manuscript is
refused, before anything is built, at a line that reads as a delimiter row of more cells than that: a line of
nothing but pipes, dashes, colons and blanks, after any block quote's `>` and a list item's marker, as the
line is read alone (one inside a fenced code block is counted too; no table has so many).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bindery import errors

MAX_TABLE_COLUMNS = 256

# What may open a line before a table: block quotes' markers and a list item's, with their spaces.
_CONTAINERS = re.compile(rb"[ \t]*(?:>[ \t]*|(?:[-+*]|[0-9]{1,9}[.)])[ \t]+)*")
_DELIMITER_ROW = re.compile(rb"[|:\- \t]*\r?\n?")


def refuse_wide_table(line: bytes, number: int) -> None:
    """Refuse line `number` (counted from 1) of a manuscript, if it is a delimiter row of more than
    MAX_TABLE_COLUMNS cells: 422 `table_too_wide`, with the line, its columns and the limit."""
    if line.count(b"|") < MAX_TABLE_COLUMNS - 1:
        return  # too few pipes for so many cells: most lines end here
    start = _CONTAINERS.match(line).end()  # type: ignore[union-attr]  # it matches anywhere, if only ""
    if not _DELIMITER_ROW.fullmatch(line, start) or b"-" not in line:
        return
    columns = sum(1 for cell in line[start:].strip().strip(b"|").split(b"|") if b"-" in cell)
    if columns > MAX_TABLE_COLUMNS:
        raise errors.Unprocessable(
            f"line {number:,} is the delimiter row of a table of {columns:,} columns; a table may have at "
            f"most {MAX_TABLE_COLUMNS:,} (a line of that shape is refused in a code block too)",
            code="table_too_wide",
            line=number,
            columns=columns,
            limit=MAX_TABLE_COLUMNS,
        )


def refuse_wide_tables(lines: Sequence[bytes], first_line: int) -> None:
    """`refuse_wide_table` for each of `lines`, the first of them line `first_line`: in one count of their
    pipes when, as in most manuscripts, they hold too few for one such row."""
    if sum(line.count(b"|") for line in lines) < MAX_TABLE_COLUMNS - 1:
        return
    for number, line in enumerate(lines, start=first_line):
        refuse_wide_table(line, number)
