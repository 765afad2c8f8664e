"""`make bench`: every figure measured in one run, each beside its budget, written to docs/BENCHMARKS.md.

Timings are ratios taken in the same run (these machines are noisy); counts are exact. Each section is a
module of its own (its docstring says what it measures); `python -m tests.bench SECTION...` runs those
alone and prints their figures without writing the file (`--write SECTION...` replaces just their tables in
it, each headed by when it ran), `python -m tests.bench --list` names them.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from tests.bench import (
    against_pandoc,
    against_weasyprint,
    build_memory,
    cold_start,
    hostile,
    layer,
    limits,
    local_stack,
    reuse,
    round_trips,
    sweeps,
    warm,
    whole_book,
)
from tests.bench.aws import ROOT
from tests.bench.report import FIGURES, record, say

# The whole run, in this order (docs/BENCHMARKS.md's sections follow it): each module's `measure()`.
SECTIONS: dict[str, ModuleType] = {
    "round_trips": round_trips,
    "cold_start": cold_start,
    "layer": layer,
    "warm_and_cost": warm,
    "sweeps": sweeps,
    "build_memory": build_memory,
    "reuse": reuse,
    "limits": limits,
    "local_stack": local_stack,
    "hostile_input": hostile,
    "whole_book": whole_book,
}
# Parts of build_memory, each runnable alone (its `alone()`) on servers of its own.
ALONE: dict[str, ModuleType] = {"against_pandoc": against_pandoc, "against_weasyprint": against_weasyprint}

# 720 until the docx (its 100 MB book and pandoc's docx, about 260 s more: 978 s in the run of 2026-12-03
# 21:01 UTC); 2400 since the re-export section (two books, each format built cold and warm twice, and the
# largest pdf cold once: about 800 s of its own); 2700 since the instruction counts (valgrind runs a
# process about fifty times slower: the cold starts' and two short builds' counts add about 330 s).
BUDGET_SECONDS = 2700
BY_HAND = "<!-- measured by hand: make bench keeps what follows -->"


def write(path: Path, seconds: float) -> None:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    lines = [
        "# Benchmarks",
        "",
        f"Written by `make bench` on {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, on {machine}.",
        "Every figure below is from that one run: timings as ratios taken in the same run, counts exact.",
        f"The whole run took {seconds:.0f} s (budget: under {BUDGET_SECONDS // 60} minutes on a 2-core "
        "machine, checked: the last row).",
        os.environ.get("BINDERY_BENCH_NOTE", ""),
        "",
    ]
    section = None
    for f in FIGURES:
        if f.section != section:
            section = f.section
            lines += [
                "",
                f"## {section}",
                "",
                "| figure | measured | budget | verdict |",
                "|---|---|---|---|",
            ]
        lines.append(f"| {f.name} | {f.value} | {f.budget} | {f.verdict} |")
    # What was measured once, by hand, against a state of the code that is gone (the fonts before and after
    # issue 29), is kept below the run's own figures.
    kept = path.read_text() if path.exists() else ""
    by_hand = kept[kept.index(BY_HAND) :] if BY_HAND in kept else ""
    path.write_text("\n".join(lines) + "\n" + ("\n" + by_hand if by_hand else ""))


def write_sections(path: Path, command: str, sections: list[str]) -> None:
    """Replace in `path` the tables of the sections just measured (and only those), each headed by when and
    how it ran: a section run alone (`--write`) keeps what the last whole run measured of every other."""
    text = path.read_text()
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    for section in sections:
        table = [
            f"## {section}",
            "",
            f"Measured alone on {stamp} (`{command}`), after the whole run above.",
            "",
            "| figure | measured | budget | verdict |",
            "|---|---|---|---|",
            *(
                f"| {f.name} | {f.value} | {f.budget} | {f.verdict} |"
                for f in FIGURES
                if f.section == section
            ),
            "",
        ]
        heading = f"\n## {section}\n"
        if heading in text:
            start = text.index(heading) + 1
            end = text.find("\n## ", start)
            text = text[:start] + "\n".join(table) + text[end:]
        else:
            at = text.index("\n## run\n") + 1
            text = text[:at] + "\n".join(table) + "\n" + text[at:]
    path.write_text(text)


def listing() -> str:
    """Every section, with the first line of what its module measures."""

    def line(name: str, module: ModuleType) -> str:
        return f"  {name:<20} {(module.__doc__ or '').strip().splitlines()[0]}"

    return "\n".join(
        [
            "python -m tests.bench [SECTION...]: the whole run's sections, in order (all of them writes "
            "docs/BENCHMARKS.md):",
            *(line(name, module) for name, module in SECTIONS.items()),
            "parts of build_memory, runnable alone:",
            *(line(name, module) for name, module in ALONE.items()),
        ]
    )


def main() -> int:
    names = sys.argv[1:]
    alone = names[:1] == ["--write"]  # the sections named, measured and written into the file alone
    names = names[1:] if alone else names
    if names and names[0] in ("-h", "--help", "--list"):
        say(listing())
        return 0
    unknown = [name for name in names if name not in SECTIONS and name not in ALONE]
    if unknown:
        say(f"no such section: {', '.join(unknown)} (python -m tests.bench --list names them)")
        return 2
    chosen = names or list(SECTIONS)
    started = time.perf_counter()
    warnings.filterwarnings("ignore", "No application metrics to publish")
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        for name in chosen:
            if name in SECTIONS:
                SECTIONS[name].measure()
            else:
                ALONE[name].alone()
    seconds = time.perf_counter() - started
    say(f"\n{len(FIGURES)} figures in {seconds:.0f} s")
    if set(chosen) == set(SECTIONS):
        # The run's own budget is a figure like the others, and fails the run like them.
        record("run", "the whole run, s", f"{seconds:.0f}", f"< {BUDGET_SECONDS}", seconds < BUDGET_SECONDS)
        write(ROOT / "docs" / "BENCHMARKS.md", seconds)
    elif alone:
        command = "python -m tests.bench --write " + " ".join(chosen)
        write_sections(
            ROOT / "docs" / "BENCHMARKS.md", command, list(dict.fromkeys(f.section for f in FIGURES))
        )
    return 1 if any(f.verdict == "FAIL" for f in FIGURES) else 0


if __name__ == "__main__":
    sys.exit(main())
