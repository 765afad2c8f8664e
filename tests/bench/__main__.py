"""`make bench`: every figure measured in one run, each beside its budget, written to docs/BENCHMARKS.md.

Timings are ratios taken in the same run (these machines are noisy); counts are exact.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
HANDLERS = ["submit", "poll", "build_worker", "expiry_gc", "stale_sweep"]
COLD_RUNS = int(os.environ.get("BINDERY_BENCH_COLD_RUNS", "10"))
BIG_MB = float(os.environ.get("BINDERY_BENCH_BIG_MB", "200"))
BIG_CHAPTERS = int(os.environ.get("BINDERY_BENCH_BIG_CHAPTERS", "5000"))
SMALL_MB, SMALL_CHAPTERS = 2.0, 50


@dataclass
class Figure:
    section: str
    name: str
    value: str
    budget: str
    verdict: str  # "pass", "FAIL" or "info"


FIGURES: list[Figure] = []


def record(section: str, name: str, value: str, budget: str = "", ok: bool | None = None) -> None:
    verdict = "info" if ok is None else ("pass" if ok else "FAIL")
    FIGURES.append(Figure(section, name, value, budget, verdict))
    print(f"  {name:<58} {value:>18}  {budget:<22} {verdict}", flush=True)


def _env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    return {
        **base,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


# ---- 1. round trips --------------------------------------------------------------------------------


def round_trips() -> None:
    print("\n1. AWS round trips per operation (exact; also asserted in tests/unit/test_round_trips.py)")
    os.environ.update(_env())
    import boto3
    from moto import mock_aws

    from bindery.config import Settings
    from bindery.exports import Exports
    from bindery.local.template import create_table
    from bindery.objects import Objects, artifact_key
    from bindery.states import FailureCode
    from bindery.storage import Claimed, Store
    from tests.calls import recording
    from tests.conftest import FakeClock

    with mock_aws():
        create_table(boto3.client("dynamodb"), "bench")
        boto3.client("s3").create_bucket(Bucket="bench")
        settings = Settings(table="bench", bucket="bench")
        clock = FakeClock()
        ex = Exports(settings, Store(settings), Objects(settings), clock=clock)
        clients = (ex.store.client, ex.objects.client)
        book, _ = ex.books.create_book("bench-user", "Bench", "# One\n\ntext\n")

        def count(act: Callable[[], Any], service: str | None = None) -> int:
            with recording(*clients) as calls:
                act()
            return sum(calls.count(service).values())

        rows: list[tuple[str, int, int]] = []
        rows.append(
            ("submit (TransactWriteItems)", count(lambda: ex.submit("bench-user", book.id, "html", "k1")), 1)
        )
        rows.append(
            ("replayed Idempotency-Key", count(lambda: ex.submit("bench-user", book.id, "html", "k1")), 1)
        )
        pending = ex.submit("bench-user", book.id, "html", None)[0]["id"]
        rows.append(("poll", count(lambda: ex.read("bench-user", book.id, pending)), 1))
        claimed: list[Any] = []
        rows.append(
            (
                "claim",
                count(
                    lambda: claimed.append(
                        ex.store.claim_build(book.id, pending, artifact_key(book.id, pending, "t"), clock())
                    )
                ),
                1,
            )
        )
        assert isinstance(claimed[0], Claimed)
        rows.append(
            (
                "finish",
                count(
                    lambda: ex.store.finish_export(
                        claimed[0].export, path="p", size_bytes=1, built_revision=1, now=clock()
                    )
                ),
                1,
            )
        )
        other = ex.submit("bench-user", book.id, "html", None)[0]["id"]
        c2 = ex.store.claim_build(book.id, other, artifact_key(book.id, other, "t"), clock())
        assert isinstance(c2, Claimed)
        rows.append(
            ("fail", count(lambda: ex.store.fail_export(c2.export, FailureCode.RENDER_FAILED, clock())), 1)
        )
        third = ex.submit("bench-user", book.id, "html", None)[0]["id"]
        rows.append(("cancel (pending)", count(lambda: ex.cancel("bench-user", book.id, third)), 1))
        for _ in range(3):
            ex.submit("bench-user", book.id, "html", None)
        clock.advance(settings.queue_grace_seconds + 1)
        with recording(*clients) as calls:
            ex.fail_stale_exports()
        rows.append(("each stale row swept (writes per row)", calls.count()["TransactWriteItems"] // 3, 1))
        clock.advance(settings.link_ttl_seconds + settings.lease_seconds + 1)
        ex.expire_lapsed_links()  # clear the rows above out of the GC's queues, so the figures below are
        ex.unlink_ended_artifacts()  # one link's alone
        built = ex.submit("bench-user", book.id, "markdown", None)[0]["id"]
        with recording(ex.objects.client) as s3calls:
            ex.build(book.id, built)
        rows.append(("S3 calls to build a small book (1 GET, 1 PUT)", sum(s3calls.count().values()), 2))
        clock.advance(settings.link_ttl_seconds + 1)
        with recording(*clients) as calls:
            assert ex.expire_lapsed_links().done == 1
            assert ex.unlink_ended_artifacts().done == 1
        rows.append(
            ("a lapsed link: expire + forget (DynamoDB writes)", calls.count("dynamodb")["UpdateItem"], 2)
        )
        rows.append(("a lapsed link: S3 deletes", calls.count("s3")["DeleteObject"], 1))
    for name, measured, minimum in rows:
        record("round trips", name, str(measured), f"minimum {minimum}", measured == minimum)


# ---- 2. cold start ---------------------------------------------------------------------------------


def _median_init(target: str) -> float:
    samples = []
    for _ in range(COLD_RUNS):
        out = subprocess.run(
            [PY, str(ROOT / "tests/bench/coldstart_probe.py"), target],
            env=_env(),
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(samples)


def cold_start() -> None:
    print(f"\n2. Cold start: init of a fresh process, median of {COLD_RUNS}")
    floor = _median_init("floor")
    record("cold start", "floor: import boto3; boto3.client('dynamodb')", f"{floor * 1000:.0f} ms")
    for name in HANDLERS:
        init = _median_init(f"functions.{name}.app")
        record("cold start", f"{name} / floor", f"{init / floor:.2f}", "≤ 1.25", init / floor <= 1.25)
    try:
        usual = _median_init("tests.bench.usual_handler")
    except subprocess.CalledProcessError as exc:
        record("cold start", "the usual way (could not import)", exc.stderr.strip().splitlines()[-1][:40])
        return
    poll = _median_init("functions.poll.app")
    record(
        "cold start",
        "usual way (Tracer, REST resolver + pydantic, idempotency) / floor",
        f"{usual / floor:.2f}",
    )
    record("cold start", "bindery poll / usual way", f"{poll / usual:.2f}", "< 1", poll < usual)


# ---- 4. builds: memory -----------------------------------------------------------------------------


def _manuscript(path: Path, megabytes: float, chapters: int) -> None:
    per = int(megabytes * 1024 * 1024 / chapters)
    paragraph = (
        "The keeper trimmed the wick at dusk, at midnight and at four, and wrote the hour of each trimming "
        "in the log, with *the weather first*, as the keeper always put it.\n\n"
    )
    body = (paragraph * (per // len(paragraph) + 1))[: max(0, per - 40)]
    with path.open("w") as out:
        for n in range(1, chapters + 1):
            out.write(f"# Chapter {n}\n\n{body}\n\n")


def _make_book(endpoint: str, table: str, manuscript: Path) -> str:
    """Create a book in a child process through the real upload path: presigned-upload key, then the
    streaming cut."""
    script = f"""
import boto3, json, sys
from bindery.config import Settings
from bindery.exports import Exports
from bindery.objects import upload_key
ex = Exports.from_settings(Settings(table={table!r}, bucket={table!r}))
book, _ = ex.books.create_book("bench-user", "Bench", "")
upload = ex.books.create_upload("bench-user", book.id)
boto3.client("s3").upload_file({str(manuscript)!r}, {table!r}, upload_key(book.id, upload["upload_id"]))
ex.books.replace_manuscript("bench-user", book.id, None, manuscript=None, upload_id=upload["upload_id"])
print(book.id)
"""
    out = subprocess.run(
        [PY, "-c", script], env=_env(AWS_ENDPOINT_URL=endpoint), capture_output=True, text=True, cwd=ROOT
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return out.stdout.strip().splitlines()[-1]


def _build(endpoint: str, table: str, book: str, fmt: str) -> dict[str, Any]:
    out = subprocess.run(
        [PY, str(ROOT / "tests/bench/build_probe.py"), book, fmt, table],
        env=_env(AWS_ENDPOINT_URL=endpoint),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:] + out.stdout[-500:])
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def build_memory() -> None:
    print(
        f"\n4. Builds: peak RSS of a {BIG_MB:g} MB, {BIG_CHAPTERS}-chapter book against a {SMALL_MB:g} MB one"
    )
    import boto3

    from bindery.engine.pdf import MAX_MANUSCRIPT_BYTES
    from bindery.local.template import create_table
    from tests.servers import free_port, wait_for_port

    # moto's server in a process of its own: it holds every byte uploaded, and the builds are measured alone.
    port = free_port()
    server = subprocess.Popen(
        [PY, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    endpoint = f"http://127.0.0.1:{port}"
    wait_for_port(port, server)
    table = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        session = boto3.session.Session(
            aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
        )
        create_table(session.client("dynamodb", endpoint_url=endpoint), table)
        session.client("s3", endpoint_url=endpoint).create_bucket(Bucket=table)
        with tempfile.TemporaryDirectory() as tmp:
            small_md, big_md = Path(tmp) / "small.md", Path(tmp) / "big.md"
            _manuscript(small_md, SMALL_MB, SMALL_CHAPTERS)
            _manuscript(big_md, BIG_MB, BIG_CHAPTERS)
            started = time.perf_counter()
            small = _make_book(endpoint, table, small_md)
            big = _make_book(endpoint, table, big_md)
            record(
                "builds",
                f"cut a {BIG_MB:g} MB upload into {BIG_CHAPTERS} chapters (with the 2 MB one)",
                f"{time.perf_counter() - started:.1f} s",
            )
            for fmt in ("markdown", "html", "epub"):
                a = _build(endpoint, table, small, fmt)
                b = _build(endpoint, table, big, fmt)
                ratio = b["peak_rss"] / a["peak_rss"]
                record(
                    "builds",
                    f"{fmt}: peak RSS {b['peak_rss'] / 2**20:.0f} MiB / {a['peak_rss'] / 2**20:.0f} MiB",
                    f"{ratio:.2f}",
                    "≤ 1.20",
                    ratio <= 1.2,
                )
                record(
                    "builds",
                    f"{fmt}: {BIG_MB:g} MB build time, {b['size_bytes'] / 2**20:.0f} MiB artifact",
                    f"{b['seconds']:.1f} s",
                )
            pdf_md = Path(tmp) / "pdf.md"
            pdf_mb = MAX_MANUSCRIPT_BYTES / 2**20
            _manuscript(pdf_md, pdf_mb * 0.98, max(1, int(pdf_mb * 25)))
            largest = _make_book(endpoint, table, pdf_md)
            p = _build(endpoint, table, largest, "pdf")
            record(
                "builds",
                f"pdf: the largest accepted book ({pdf_mb:g} MB): peak RSS",
                f"{p['peak_rss'] / 2**20:.0f} MiB",
                "≤ 1024 MiB (worker)",
                p["peak_rss"] <= 1024 * 2**20,
            )
            record(
                "builds",
                f"pdf: the largest accepted book ({pdf_mb:g} MB): build time",
                f"{p['seconds']:.1f} s",
                "≤ 300 s (worker)",
                p["seconds"] <= 300,
            )
    finally:
        server.terminate()
        server.wait(timeout=20)


def write(path: Path) -> None:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    lines = [
        "# Benchmarks",
        "",
        f"Written by `make bench` on {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, on {machine}.",
        "Every figure below is from that one run: timings as ratios taken in the same run, counts exact.",
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
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    sections = {"round_trips": round_trips, "cold_start": cold_start, "build_memory": build_memory}
    chosen = sys.argv[1:] or list(sections)
    started = time.perf_counter()
    for name in chosen:
        sections[name]()
    print(f"\n{len(FIGURES)} figures in {time.perf_counter() - started:.0f} s")
    if set(chosen) == set(sections):
        write(ROOT / "docs" / "BENCHMARKS.md")
    return 1 if any(f.verdict == "FAIL" for f in FIGURES) else 0


if __name__ == "__main__":
    sys.exit(main())
