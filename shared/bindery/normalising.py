"""A manuscript as Bindery keeps it: normalised (`Normalised`), so that what a revision keeps is already its
markdown export, and checked as it is read for what no book may hold (a character XML 1.0 forbids, a
table wider than any page), by the line the caller's file has it on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from bindery.characters import check_lines
from bindery.table_width import refuse_wide_tables

BOM = b"\xef\xbb\xbf"
# Lines are checked for characters no book may hold (`bindery.characters`) this many at a time: a call a
# line would cost a 500 MB manuscript's millions of lines more than the check itself.
CHECK_LINES = 512


class Normalised:
    """The lines of a manuscript as Bindery keeps it: UTF-8 with no byte-order mark, every line ending in
    LF (CRLF and lone CR become LF), no blank lines before the first text or after the last, and a final
    newline. Nothing here changes what the markdown means: trailing spaces stay, since two of them are a
    hard line break, and blank lines inside the text stay as they are (they may be code). A manuscript
    that holds a character no book may hold, or a table wider than any page, is refused, by the line (and
    column) it has in the input (`_check`).

    Iterate it once; afterwards `size` is the normalised length, and `changed` says whether any byte
    differs from the input, i.e. whether the input could be kept as it is.
    """

    def __init__(self, lines: Iterable[bytes]):
        self._lines = lines
        self.size = 0
        self.changed = False

    def __iter__(self) -> Iterator[bytes]:
        blanks: list[bytes] = []  # blank lines held back until text follows them (trailing ones go)
        started = first = False
        unchecked: list[bytes] = []  # every line as given, so that a refusal names the caller's line
        checked = 0
        for line in self._lines:
            if not first:
                first = True
                if line.startswith(BOM):
                    line, self.changed = line[len(BOM) :], True
            unchecked.append(line)
            if len(unchecked) == CHECK_LINES:
                _check(unchecked, checked + 1)
                checked += CHECK_LINES
                unchecked.clear()
            if line.endswith(b"\n") and not line.endswith(b"\r\n"):
                kept = line  # the usual line: kept as it is, no copy
            else:
                kept = line.rstrip(b"\r\n") + b"\n"
                self.changed = True
            if not kept.strip():
                if started:
                    blanks.append(kept)
                else:
                    self.changed = True  # a leading blank line goes
                continue
            started = True
            if blanks:
                for blank in blanks:
                    self.size += len(blank)
                    yield blank
                blanks.clear()
            self.size += len(kept)
            yield kept
        _check(unchecked, checked + 1)
        if blanks:
            self.changed = True  # trailing blank lines go


def _check(lines: list[bytes], first_line: int) -> None:
    """Refuse a batch of a manuscript's lines, as the caller gave them, holding what no book may: a
    character XML 1.0 forbids, or a table wider than any page (`bindery.table_width`)."""
    check_lines(lines, first_line)
    refuse_wide_tables(lines, first_line)


def normalise(data: bytes) -> bytes:
    """A manuscript held in memory, normalised (see `Normalised`)."""
    return b"".join(Normalised(data.splitlines(keepends=True)))
