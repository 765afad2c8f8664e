"""4. Builds: peak RSS against the book's size, the largest upload's cut, the largest PDF.

A build's peak RSS does not grow with the book (a 200 MB book against a 2 MB one, an illustrated book
against the same, the largest docx against a 2 MB one), the largest manuscript the API takes is cut within
its limit, and the largest PDF and docx build within the worker's memory and time. Then the comparisons
against pandoc and WeasyPrint (tests/bench/against_pandoc.py), on the same servers.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from tests.bench import against_pandoc, against_weasyprint
from tests.bench.aws import PY, ROOT, Aws, build_servers
from tests.bench.books import (
    SMALL_CHAPTERS,
    SMALL_MB,
    build,
    make_book,
    make_book_timed,
    make_illustrated,
    together,
    write_manuscript,
)
from tests.bench.report import record, say

BIG_MB = float(os.environ.get("BINDERY_BENCH_BIG_MB", "200"))
BIG_CHAPTERS = int(os.environ.get("BINDERY_BENCH_BIG_CHAPTERS", "5000"))
# The illustrated book of the memory runs: this many images, of this many bytes each (200 MB in all).
IMAGES, IMAGE_BYTES = int(os.environ.get("BINDERY_BENCH_IMAGES", "500")), 400_000
MAX_UPLOAD_MB = float(os.environ.get("BINDERY_BENCH_MAX_UPLOAD_MB", "500"))
FORMATS = ("markdown", "html", "epub")


def _worker_memory_mb() -> int:
    from bindery_local.template import resources

    return int(resources()["BuildWorkerFunction"]["Properties"]["MemorySize"])


WORKER_MEMORY_MB = _worker_memory_mb()


def measure() -> None:
    say(
        f"\n4. Builds: peak RSS of a {BIG_MB:g} MB, {BIG_CHAPTERS}-chapter book against a {SMALL_MB:g} MB one"
    )
    with build_servers() as (aws, table), tempfile.TemporaryDirectory() as tmp:
        small, big, illustrated = _books(aws, table, Path(tmp))
        largest, pdf_mb = _largest_pdf_book(aws, table, Path(tmp))
        largest_docx, docx_mb = _largest_docx_book(aws, table, Path(tmp))
        # The largest PDF (two minutes and more on one core) builds while the memory runs go on beside it,
        # all at once: a peak RSS does not depend on what else runs, and the bench saves minutes. They run
        # niced, so the PDF's time (a figure with a budget) is its own; theirs are info. The timed
        # comparisons (against pandoc and WeasyPrint) run afterwards, alone.
        pdf_run = subprocess.Popen(
            [PY, str(ROOT / "tests/bench/build_probe.py"), largest, "pdf", table],
            env=aws.env(), text=True, cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        runs = together(
            {
                (fmt, size): partial(build, aws, table, book, fmt, nice=10)
                for fmt in FORMATS
                for size, book in (("small", small), ("big", big))
            }
            | {
                (fmt, "illustrated"): partial(build, aws, table, illustrated, fmt, nice=10)
                for fmt in ("html", "epub", "docx")
            }
            | {
                ("pdf", "small"): partial(build, aws, table, small, "pdf", nice=10),
                ("docx", "small"): partial(build, aws, table, small, "docx", nice=10),
                ("docx", "largest"): partial(build, aws, table, largest_docx, "docx", nice=10),
            }
        )
        _record_growth(runs)
        _record_largest_docx(runs, docx_mb)
        out, err = pdf_run.communicate()
        if pdf_run.returncode:  # the probe's last line says how its build ended (exit 1: not ready)
            raise RuntimeError(err[-2000:] + out[-500:])
        _record_largest_pdf(json.loads(out.strip().splitlines()[-1]), runs["pdf", "small"], pdf_mb)
        against_pandoc.measure(aws, table, Path(tmp))
    # Last, on an idle machine and servers of its own (not ones holding the books above): pdf ÷ WeasyPrint.
    against_weasyprint.alone()


def _books(aws: Aws, table: str, tmp: Path) -> tuple[str, str, str]:
    """The small, the big and the illustrated book; and the cuts of the big and of the largest upload."""
    small_md, big_md = tmp / "small.md", tmp / "big.md"
    write_manuscript(small_md, SMALL_MB, SMALL_CHAPTERS, features=True)
    write_manuscript(big_md, BIG_MB, BIG_CHAPTERS, features=True)
    small = make_book(aws, table, small_md)
    big, cut_seconds = make_book_timed(aws, table, big_md)
    illustrated = make_illustrated(aws, table, IMAGES, IMAGE_BYTES)
    record("builds", f"cut a {BIG_MB:g} MB upload into {BIG_CHAPTERS} chapters", f"{cut_seconds:.1f} s")
    # The largest manuscript the API takes, adopted within API Gateway's 30 s: the cut streams it once and
    # keeps it by a server-side copy (a CRLF upload costs a second, normalising pass).
    largest_md = tmp / "largest.md"
    write_manuscript(largest_md, MAX_UPLOAD_MB, BIG_CHAPTERS, features=True)
    _, largest_seconds = make_book_timed(aws, table, largest_md)
    largest_md.unlink()
    record(
        "builds",
        f"cut a {MAX_UPLOAD_MB:g} MB upload (the largest) into {BIG_CHAPTERS} chapters",
        f"{largest_seconds:.1f} s",
        "≤ 30 s (the API's limit)",
        largest_seconds <= 30,
    )
    return small, big, illustrated


def _largest_pdf_book(aws: Aws, table: str, tmp: Path) -> tuple[str, float]:
    """A book just under the largest manuscript a PDF build accepts, and that limit in MB."""
    from bindery.engine.pdf import MAX_MANUSCRIPT_BYTES

    pdf_md = tmp / "pdf.md"
    pdf_mb = MAX_MANUSCRIPT_BYTES / 2**20
    write_manuscript(pdf_md, pdf_mb * 0.98, max(1, int(pdf_mb * 25)))
    return make_book(aws, table, pdf_md), pdf_mb


def _largest_docx_book(aws: Aws, table: str, tmp: Path) -> tuple[str, float]:
    """A book just under the largest manuscript a docx build accepts, and that limit in MB."""
    from bindery.engine.docx import MAX_MANUSCRIPT_BYTES

    docx_md = tmp / "docx.md"
    docx_mb = MAX_MANUSCRIPT_BYTES / 2**20
    write_manuscript(docx_md, docx_mb * 0.98, max(1, int(docx_mb * 25)))
    book = make_book(aws, table, docx_md)
    docx_md.unlink()
    return book, docx_mb


def _record_largest_docx(runs: dict[tuple[str, str], dict[str, Any]], docx_mb: float) -> None:
    """The largest docx against the small book's: its memory does not grow; it builds in the worker's time."""
    a, b = runs["docx", "small"], runs["docx", "largest"]
    ratio = b["peak_rss"] / a["peak_rss"]
    record(
        "builds",
        f"docx: peak RSS {b['peak_rss'] / 2**20:.0f} MiB ({docx_mb:g} MB, the largest accepted) / "
        f"{a['peak_rss'] / 2**20:.0f} MiB ({SMALL_MB:g} MB)",
        f"{ratio:.2f}",
        "≤ 1.20",
        ratio <= 1.2,
    )
    record(
        "builds",
        f"docx: the largest accepted book ({docx_mb:g} MB): build time (niced, beside the others), "
        f"{b['size_bytes'] / 2**20:.0f} MiB artifact",
        f"{b['seconds']:.1f} s",
        "≤ 300 s (worker)",
        b["seconds"] <= 300,
    )


def _record_growth(runs: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Each format's peak RSS, big book over small and illustrated over small; the big builds' times."""
    for fmt in FORMATS:
        a, b = runs[fmt, "small"], runs[fmt, "big"]
        ratio = b["peak_rss"] / a["peak_rss"]
        record(
            "builds",
            f"{fmt}: peak RSS {b['peak_rss'] / 2**20:.0f} MiB / {a['peak_rss'] / 2**20:.0f} MiB",
            f"{ratio:.2f}",
            "≤ 1.20",
            ratio <= 1.2,
        )
    for fmt in ("html", "epub", "docx"):
        a, b = runs[fmt, "small"], runs[fmt, "illustrated"]
        ratio = b["peak_rss"] / a["peak_rss"]
        record(
            "builds",
            f"{fmt}: {IMAGES} images ({IMAGES * IMAGE_BYTES / 1e6:.0f} MB): peak RSS "
            f"{b['peak_rss'] / 2**20:.0f} MiB / {a['peak_rss'] / 2**20:.0f} MiB (2 MB)",
            f"{ratio:.2f}",
            "≤ 1.20",
            ratio <= 1.2,
        )
    for fmt in FORMATS:
        b = runs[fmt, "big"]
        record(
            "builds",
            f"{fmt}: {BIG_MB:g} MB build time (niced, beside the others), "
            f"{b['size_bytes'] / 2**20:.0f} MiB artifact",
            f"{b['seconds']:.1f} s",
        )


def _record_largest_pdf(p: dict[str, Any], a: dict[str, Any], pdf_mb: float) -> None:
    """The largest PDF (`p`) against the small book's (`a`), and against the worker's memory and time."""
    ratio = p["peak_rss"] / a["peak_rss"]
    record(
        "builds",
        f"pdf: peak RSS, Typst's process included: {p['peak_rss'] / 2**20:.0f} MiB ({pdf_mb:g} MB, "
        f"the largest accepted) / {a['peak_rss'] / 2**20:.0f} MiB ({SMALL_MB:g} MB)",
        f"{ratio:.2f}",
        "≤ 1.20",
        ratio <= 1.2,
    )
    record(
        "builds",
        f"pdf: the largest accepted book ({pdf_mb:g} MB): peak RSS",
        f"{p['peak_rss'] / 2**20:.0f} MiB",
        f"≤ {WORKER_MEMORY_MB} MiB (worker)",
        p["peak_rss"] <= WORKER_MEMORY_MB * 2**20,
    )
    record(
        "builds",
        f"pdf: the largest accepted book ({pdf_mb:g} MB): build time (the others niced), "
        f"{p['size_bytes'] / 2**20:.0f} MiB artifact",
        f"{p['seconds']:.1f} s",
        "≤ 300 s (worker)",
        p["seconds"] <= 300,
    )
