"""The pdf's page references: "Figure 3 on page 41", where the export asks (`reference_pages=on`).

A run is set before the pages of the runs after it are known, and as if it opened the book (so that a later
build reuses it wherever it falls: `bindery.engine.pdf`), so no run can know the page of what it refers to.
A reference's page is set as `#pageref("<id>", "000")` (`bindery.engine.typeset`), digits of one width
(book.typ's `pageref`). Once every run is set, each target's page is known (its named destination, in its
run: `bindery.engine.pieces`), and each run that refers to one is set again with the numbers (`number`):
as LaTeX does, until no run's pages change, at most PASSES times. A number of as many digits as the guess
sets the same lines; another may move a line, rarely a page, and then the pages after it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote, unquote

from bindery.engine.literals import literal
from bindery.engine.pieces import Piece

GUESS = "000"  # what a reference's page is set as before it is known
PASSES = 3
_PAGEREF = re.compile(r'#pageref\("([^"\\]*)", "([^"\\]*)"\)')


def placeholder(target_id: str) -> str:
    """Where a reference's page goes, to be set again once it is known (the id %-encoded: a plain literal)."""
    return f"#pageref({literal(quote(target_id, safe=''))}, {literal(GUESS)})"


def folios(runs: list[Piece]) -> dict[str, str]:
    """Each named destination's page number in the body (its first page is 1), by id."""
    found: dict[str, str] = {}
    first = 1
    for run in runs:
        for name, page, _ in run.destinations:
            found.setdefault(name, str(first + page))
        first += run.pages + run.blank_after
    return found


def numbered(source: str, pages: dict[str, str]) -> str:
    """`source` with each page reference set to its target's page (one the book lacks keeps the guess)."""
    if "#pageref(" not in source:
        return source
    return _PAGEREF.sub(
        lambda m: f"#pageref({literal(m.group(1))}, {literal(pages.get(unquote(m.group(1)), GUESS))})", source
    )


def number(runs: list[Piece], again: Callable[[Piece, str], Piece]) -> None:
    """Set again each run of `runs` whose references' pages are now known (in place), until none moves:
    each run's source is read beside its PDF."""
    for _ in range(PASSES):
        pages, moved = folios(runs), False
        for n, run in enumerate(runs):
            source = run.path.with_suffix(".typ").read_text()
            wanted = numbered(source, pages)
            if wanted != source:
                runs[n] = again(run, wanted)
                runs[n].blank_after = runs[n].pages % 2 == 1
                moved = moved or runs[n].pages != run.pages
        if not moved:
            return
