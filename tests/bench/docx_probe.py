"""The docx's figures for `make bench`: its peak memory at a 50 MB book against a 2 MB one (flat: at most
1.2x), its time against pandoc's docx on the bench's 25 MB book (at most 0.33), and what its renderer
costs a cold start against python-docx's.

Each build runs in a fresh process of its own (`--build`), which cuts the manuscript as the API does
(streaming, `bindery.manuscript.cut`; untimed, as a build finds it done), reads each chapter by its byte
range as a build reads it from S3,
and streams the package to a sink that counts and hashes the bytes, as the upload does: so its peak RSS is
the renderer's, not the book's. What S3 adds (the upload's parts, the reads) is the same for every format,
and `make bench`'s own builds (tests/bench/build_probe.py) measure it for docx as for the others.

`measure(tmp)` returns the figures as a dict, for the runner; run alone, this prints them:
`python -m tests.bench.docx_probe [--big-mb 50] [--pandoc-mb 25]`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
PARAGRAPH = (
    "The keeper trimmed the wick at dusk, at midnight and at four, and wrote the hour of each trimming "
    "in the log, with *the weather first*, as the keeper always put it.\n\n"
)  # the bench's book (tests/bench/__main__.py, _manuscript): the same paragraph, the same chapters


def write_manuscript(path: Path, megabytes: float, chapters: int) -> None:
    per = int(megabytes * 1024 * 1024 / chapters)
    body = (PARAGRAPH * (per // len(PARAGRAPH) + 1))[: max(0, per - 40)]
    with path.open("w") as out:
        for n in range(1, chapters + 1):
            out.write(f"# Chapter {n}\n\n{body}\n\n")


class _Upload:
    """What the build's upload does with the bytes, less the network: counts and hashes them."""

    def __init__(self) -> None:
        self.size = 0
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes, /) -> int:
        self.size += len(data)
        self.sha256.update(data)
        return len(data)


def _build_here(manuscript: Path) -> dict[str, Any]:
    """The child's side: one docx build of `manuscript`, its seconds and the process's peak RSS."""
    from bindery.engine import Source, Text, renderer_for
    from bindery.manuscript import cut

    with manuscript.open("rb") as data:
        sections = list(cut(data))  # done when the manuscript was uploaded: a build only reads the ranges
        started = time.perf_counter()

        def chapters() -> Any:
            for n, section in enumerate(sections, start=1):
                data.seek(section.offset)
                yield Text(n, section.title, data.read(section.length).decode("utf-8"))

        source = Source("bench0123456789abcdef", "Bench", 1, tuple(s.title for s in sections), time.time())
        sink = _Upload()
        report = renderer_for("docx").render(source, chapters(), sink)
    seconds = time.perf_counter() - started
    # VmHWM, not ru_maxrss: ru_maxrss survives fork+exec on Linux and would carry the parent's peak in.
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    return {"seconds": seconds, "peak_rss": peak, "size_bytes": sink.size, "skipped": len(report.skipped)}


def build(manuscript: Path) -> dict[str, Any]:
    """One docx build in a fresh process."""
    run = subprocess.run(
        [PY, "-m", "tests.bench.docx_probe", "--build", str(manuscript)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    if run.returncode:
        raise RuntimeError(run.stderr[-2000:])
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def pandoc_docx(source: Path, out: Path) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of pandoc (pypandoc-binary's, as the bench's other comparisons) making
    a docx of `source` with a table of contents, under GNU time's measurement."""
    import pypandoc

    started = time.perf_counter()
    run = subprocess.run(
        ["/usr/bin/time", "-f", "%M", pypandoc.get_pandoc_path(), str(source), "-f", "markdown", "-t", "docx",
         "--standalone", "--toc", "-o", str(out)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return time.perf_counter() - started, int(run.stderr.strip().splitlines()[-1]) * 1024


def cold_import_ms(module: str, runs: int = 7) -> float:
    """The median milliseconds `module` adds to a cold start, beyond what a build has already imported
    (markdown-it, the engine's registry, Pillow, zipfile), by `python -X importtime`."""
    before = "import bindery.engine.markup, bindery.images, bindery.metadata, PIL, tempfile, zipfile"
    # Timed as deployed, from compiled bytecode (the first run writes it).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([PY, "-c", f"{before}; import {module}"], check=True, env=env, cwd=ROOT)
    times = []
    for _ in range(runs):
        run = subprocess.run(
            [PY, "-X", "importtime", "-c", f"{before}; import {module}"],
            capture_output=True, text=True, check=True, env=env, cwd=ROOT,
        )  # fmt: skip
        line = next(x for x in run.stderr.splitlines() if x.rstrip().endswith(f"| {module}"))
        times.append(int(line.split("|")[1]) / 1000)
    return statistics.median(times)


def measure(
    tmp: Path,
    *,
    small_mb: float = 2.0,
    small_chapters: int = 50,
    big_mb: float = 50.0,
    big_chapters: int = 1250,
    pandoc_mb: float = 25.0,
    pandoc_chapters: int = 1000,
) -> dict[str, Any]:
    """Every figure, measured in this run: each build alone, then pandoc alone, so neither shares the CPU."""
    small, big, same = tmp / "small.md", tmp / "big.md", tmp / "pandoc.md"
    write_manuscript(small, small_mb, small_chapters)
    write_manuscript(big, big_mb, big_chapters)
    write_manuscript(same, pandoc_mb, pandoc_chapters)
    a, b = build(small), build(big)
    ours = build(same)
    theirs_seconds, theirs_peak = pandoc_docx(same, tmp / "pandoc.docx")
    return {
        "small": a,
        "big": b,
        "memory_ratio": b["peak_rss"] / a["peak_rss"],
        "pandoc_book": ours,
        "pandoc_seconds": theirs_seconds,
        "pandoc_peak_rss": theirs_peak,
        "time_ratio": ours["seconds"] / theirs_seconds,
        "cold_import_ms": {"bindery.engine.docx": cold_import_ms("bindery.engine.docx")}
        | ({"docx (python-docx)": cold_import_ms("docx")} if _has("docx") else {}),
        "sizes": {"small_mb": small_mb, "big_mb": big_mb, "pandoc_mb": pandoc_mb},
    }


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def report(figures: dict[str, Any]) -> list[str]:
    """The figures as the bench's lines: what, the value, the budget."""
    a, b, ours = figures["small"], figures["big"], figures["pandoc_book"]
    sizes = figures["sizes"]
    mib = 2**20
    lines = [
        f"docx: peak RSS {b['peak_rss'] / mib:.0f} MiB ({sizes['big_mb']:g} MB) / "
        f"{a['peak_rss'] / mib:.0f} MiB ({sizes['small_mb']:g} MB): "
        f"{figures['memory_ratio']:.2f} (budget ≤ 1.20)",
        f"docx: {sizes['big_mb']:g} MB build {b['seconds']:.1f} s, {b['size_bytes'] / mib:.1f} MiB artifact",
        f"docx: bindery {ours['seconds']:.1f} s / pandoc {figures['pandoc_seconds']:.1f} s on a "
        f"{sizes['pandoc_mb']:g} MB book: {figures['time_ratio']:.2f} (budget ≤ 0.33)",
        f"docx: peak RSS bindery {ours['peak_rss'] / mib:.0f} MiB, "
        f"pandoc {figures['pandoc_peak_rss'] / mib:.0f} MiB",
    ]
    imports = figures["cold_import_ms"].items()
    lines += [f"cold import of {name}: {ms:.1f} ms (median)" for name, ms in imports]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--big-mb", type=float, default=50.0)
    parser.add_argument("--pandoc-mb", type=float, default=25.0)
    args = parser.parse_args()
    if args.build is not None:
        print(json.dumps(_build_here(args.build)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        chapters = max(1, int(args.big_mb * 25))  # 40 KB a chapter, as the 2 MB book's 50
        figures = measure(Path(tmp), big_mb=args.big_mb, big_chapters=chapters, pandoc_mb=args.pandoc_mb)
    print("\n".join(report(figures)))
    passed = figures["memory_ratio"] <= 1.2 and figures["time_ratio"] <= 0.33
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
