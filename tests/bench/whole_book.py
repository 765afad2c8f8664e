"""11. The book as one document (issue 47): what its index costs a book that uses none of it, and what
renaming a heading many chapters link to costs a re-export.

A cold build of the 1,200-chapter book (6 MB, no link, note or reference across chapters), in each format,
with this tree's code and with the code of BEFORE (the last commit before the book's index: headings' ids,
labels, notes and numbers read against the whole book), each in a fresh process, no cache: this tree's ÷
BEFORE's. Held to ≤ 1.05 in instructions (cachegrind: the same to a thousandth from run to run, where CPU
seconds of builds of a second moved 1.03 to 1.06 between runs of the same code): the whole book for html,
epub and docx, and for the pdf, whose work is mostly its typesetter's child, the worker's process on a tenth
of the book (120 of its chapters). CPU seconds shown beside, the least of RUNS each, taken in turn. The
cut's too (it now reads every heading, definition and numbered target of the book), shown.

Then a book of the same size in which 100 of the 1,200 chapters link to a heading in the first
(`[the harbour light](#the-harbour-light)`), built with its cache of built pieces, and its heading renamed:
the chapters the re-export sets again (the 100 and the renamed one, and no more: rendered, for html and epub;
parsed into Typst, for the pdf, whose runs holding one are set again too), and the re-export ÷ a cold build
of the renamed book, for html, epub and pdf (docx keeps no cache).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.bench.aws import PY, ROOT, instructions
from tests.bench.books import write_manuscript
from tests.bench.report import record, say

SECTION = "the book as one document"
BEFORE = "221729f"  # the commit before issue 47's first (88bef0d, comments), on 2026-12-07
FORMATS = ("html", "epub", "docx", "pdf")
RUNS = {"html": 3, "epub": 3, "docx": 3, "pdf": 2}
LINKED = 100  # of the 1,200 chapters, those that link to the first's heading
PARAGRAPH = (
    "The keeper trimmed the wick at dusk, at midnight and at four, and wrote the hour of each trimming "
    "in the log, with *the weather first*, as the keeper always put it.\n\n"
)


def _env(tree: Path) -> dict[str, str]:
    return {"PYTHONPATH": f"{tree / 'shared'}:{tree}", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}


def _counted(trees: dict[str, Path], fmt: str, book: Path) -> dict[str, int]:
    """The instructions a fresh process runs to cut `book` and build it in `fmt`, with each tree's code
    (counted side by side: a count does not depend on what else runs)."""

    def command(tree: Path) -> list[str]:
        probe = ROOT / "tests/bench/anchors_probe.py"
        start = (
            f"import sys, runpy; sys.path[:0] = [{str(tree / 'shared')!r}, {str(tree)!r}]; "
            f"sys.argv = [{str(probe)!r}, {fmt!r}, {str(book)!r}]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')"
        )
        return [PY, "-c", start]

    return instructions({side: command(tree) for side, tree in trees.items()}, _env(ROOT))


def _probe(tree: Path, *args: str) -> dict[str, Any]:
    env = _env(tree)
    run = subprocess.run(
        [PY, str(ROOT / "tests/bench/anchors_probe.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if run.returncode:
        raise RuntimeError(run.stderr[-2000:])
    found: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return found


def _linked_book(path: Path, renamed: Path) -> None:
    body = PARAGRAPH * 30
    every = 1200 // LINKED
    chapters = [
        f"# Chapter {n}\n\n"
        + ("## The harbour light\n\nIt stands on the breakwater.\n\n" if n == 1 else "")
        + body
        + ("See [the harbour light](#the-harbour-light), as ever.\n\n" if n % every == 0 else "")
        for n in range(1, 1201)
    ]
    text = "".join(chapters)
    path.write_text(text)
    renamed.write_text(text.replace("## The harbour light", "## The breakwater light"))


def measure() -> None:
    say(f"\n{SECTION}")
    with tempfile.TemporaryDirectory(prefix="bindery-whole-book-") as tmp:
        here = Path(tmp)
        before = here / "before"
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(before), BEFORE], cwd=ROOT, check=True
        )
        try:
            book, tenth = here / "many.md", here / "tenth.md"
            write_manuscript(book, 6, 1200)
            write_manuscript(tenth, 0.6, 120)
            cuts: dict[str, list[float]] = {"now": [], "before": []}
            for fmt in FORMATS:
                builds: dict[str, list[float]] = {"now": [], "before": []}
                for _ in range(RUNS[fmt]):  # in turn, so a spell of the machine's falls on both
                    for side, tree in (("now", ROOT), ("before", before)):
                        found = _probe(tree, fmt, str(book))
                        builds[side].append(found["build"])
                        cuts[side].append(found["cut"])
                now, then = min(builds["now"]), min(builds["before"])
                record(
                    SECTION,
                    f"1,200-chapter book (6 MB): {fmt} cold build ÷ the same before the book's index "
                    f"(CPU seconds, least of {RUNS[fmt]}: {now:.2f} / {then:.2f})",
                    f"{now / then:.3f}",
                )
                counted = tenth if fmt == "pdf" else book
                counts = _counted({"now": ROOT, "before": before}, fmt, counted)
                ours, theirs = counts["now"], counts["before"]
                where = (
                    "on a tenth of it, 120 of its chapters, the worker's process: " if fmt == "pdf" else ""
                )
                record(
                    SECTION,
                    f"1,200-chapter book (6 MB): {fmt} cold build ÷ the same before the book's index, in "
                    f"instructions ({where}{ours / 1e9:.2f} / {theirs / 1e9:.2f} billion, cut included)",
                    f"{ours / theirs:.3f}",
                    "≤ 1.05",
                    ours / theirs <= 1.05,
                )
            now, then = min(cuts["now"]), min(cuts["before"])
            record(
                SECTION,
                f"1,200-chapter book (6 MB): its cut ÷ the same before the book's index (CPU seconds, least "
                f"of {len(cuts['now'])}: {now:.3f} / {then:.3f}; an upload's, not a build's)",
                f"{now / then:.2f}",
            )
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=False)
        linked, renamed = here / "linked.md", here / "renamed.md"
        _linked_book(linked, renamed)
        for fmt in ("html", "epub", "pdf"):
            found = _probe(ROOT, fmt, str(linked), "rename", str(renamed))
            name = f"1,200-chapter book (6 MB), {LINKED} chapters linking to a heading in the first"
            record(
                SECTION,
                f"{name}: {fmt} chapters set again after the heading is renamed (of 1,200)",
                str(found["set_again"]),
                f"{LINKED + 1} (the {LINKED} and the renamed one)",
                found["set_again"] == LINKED + 1,
            )
            if found["runs"]:
                record(
                    SECTION,
                    f"{name}: {fmt} runs set again after the rename (every run holds a linking chapter)",
                    f"{found['runs_set']} of {found['runs']}",
                )
            ratio = found["warm"] / found["cold"]
            record(
                SECTION,
                f"{name}: {fmt} re-export after the rename ÷ cold ({found['warm']:.2f} / {found['cold']:.2f} "
                "CPU seconds)",
                f"{ratio:.3f}",
            )
            record(SECTION, f"{name}: {fmt} that re-export is the cold one's bytes", str(found["same"]),
                   "True", bool(found["same"]))  # fmt: skip
