"""9. Hostile input: every family of tests/books/hostile.py through the cut and each format's build, at
about 10 KB and about 1 MB: seconds per MB at 1 MB ÷ seconds per MB at 10 KB (≤ 2: the work grows
linearly), and, for the record, the 1 MB build's seconds ÷ as much prose's in the same format.

Each family and reader runs in a fresh process (tests/bench/hostile_probe.py), bounded in time: one that
does not finish fails its row. The unit tests that count each family's work are tests/unit/test_*_work.py.
"""

from __future__ import annotations

import json
import subprocess

from tests.bench.aws import PY, ROOT
from tests.bench.report import record, say
from tests.books.hostile import FAMILIES

SECTION = "hostile input"
SMALL, LARGE = 10_000, 1_000_000
READERS = ("cut", "markdown", "html", "epub", "docx", "pdf")
# A family past this in one reader has not finished: ten times prose's slowest (the pdf, about 3 s a MB).
TIMEOUT_SECONDS = 120
BUDGET = 2.0


def _seconds(reader: str, family: str) -> dict[int, float] | str | None:
    """{size in bytes: seconds} of one family through one reader, the code it is refused with before any
    build, or None if it ran past the timeout."""
    probe = [PY, "-m", "tests.bench.hostile_probe", reader, family, str(SMALL), str(LARGE)]
    try:
        out = subprocess.run(probe, capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode:
        raise RuntimeError(f"{reader} of {family}: {out.stderr[-2000:]}")
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    if "refused" in answer:
        return str(answer["refused"])
    return {int(size): seconds for size, seconds in answer.items()}


def measure() -> None:
    say(
        "\n9. Hostile input: each family's seconds per MB at 1 MB ÷ at 10 KB, through the cut and each format"
    )
    for reader in READERS:
        prose = _seconds(reader, "prose")
        assert isinstance(prose, dict), f"{reader} of prose: {prose or 'ran past the timeout'}"
        prose_large = prose[max(prose)] / max(prose) * LARGE
        for family in FAMILIES:
            seconds = _seconds(reader, family)
            if seconds is None:
                record(SECTION, f"{reader}: {family}", f"> {TIMEOUT_SECONDS} s", f"≤ {BUDGET}", False)
                continue
            if isinstance(seconds, str):
                record(SECTION, f"{reader}: {family}", f"refused: {seconds}", "before any build", True)
                continue
            (small, small_s), (large, large_s) = sorted(seconds.items())
            ratio = (large_s / large) / (small_s / small)
            per_prose = (large_s / large * LARGE) / prose_large
            record(
                SECTION,
                f"{reader}: {family} ({large / 1e6:.2f} MB in {large_s:.2f} s, {per_prose:.1f}× prose)",
                f"{ratio:.2f}",
                f"≤ {BUDGET}",
                ratio <= BUDGET,
            )
