"""`make bench`: every figure measured in one run, each beside its budget, written to docs/BENCHMARKS.md.

Timings are ratios taken in the same run (these machines are noisy); counts are exact.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
HANDLERS = ["submit", "poll", "build_worker", "expiry_gc", "stale_sweep"]
COLD_RUNS = int(os.environ.get("BINDERY_BENCH_COLD_RUNS", "7"))
BIG_MB = float(os.environ.get("BINDERY_BENCH_BIG_MB", "200"))
BIG_CHAPTERS = int(os.environ.get("BINDERY_BENCH_BIG_CHAPTERS", "5000"))
SMALL_MB, SMALL_CHAPTERS = 2.0, 50


def _worker_memory_mb() -> int:
    from bindery_local.template import resources

    return int(resources()["BuildWorkerFunction"]["Properties"]["MemorySize"])


WORKER_MEMORY_MB = _worker_memory_mb()
# The illustrated book of the memory runs: this many images, of this many bytes each (200 MB in all).
IMAGES, IMAGE_BYTES = int(os.environ.get("BINDERY_BENCH_IMAGES", "500")), 400_000
MAX_UPLOAD_MB = float(os.environ.get("BINDERY_BENCH_MAX_UPLOAD_MB", "500"))


@dataclass
class Figure:
    section: str
    name: str
    value: str
    budget: str
    verdict: str  # "pass", "FAIL" or "info"


FIGURES: list[Figure] = []


def say(*parts: object, **kwargs: Any) -> None:
    """The bench's own output. The handlers' (EMF metrics, as Lambda would log them) goes to /dev/null."""
    print(*parts, **kwargs, file=sys.__stdout__, flush=True)


STARTED = time.perf_counter()


def record(section: str, name: str, value: str, budget: str = "", ok: bool | None = None) -> None:
    verdict = "info" if ok is None else ("pass" if ok else "FAIL")
    FIGURES.append(Figure(section, name, value, budget, verdict))
    say(
        f"  {name:<58} {value:>18}  {budget:<22} {verdict:<5} {time.perf_counter() - STARTED:6.0f} s",
    )


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
        # This tree's code first, whichever tree the venv was installed from (a worktree runs its own).
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "shared")]),
        **extra,
    }


# ---- 1. round trips --------------------------------------------------------------------------------


def round_trips() -> None:
    say("\n1. AWS round trips per operation (exact; also asserted in tests/unit/test_round_trips.py)")
    os.environ.update(_env())
    import boto3
    from moto import mock_aws

    from bindery.config import Settings
    from bindery.exports import Exports
    from bindery.limits import CallerClass
    from bindery.objects import Objects, artifact_key
    from bindery.states import FailureCode
    from bindery.storage import Claimed, Store
    from bindery_local.template import create_table
    from tests.calls import recording
    from tests.conftest import FakeClock

    with mock_aws():
        create_table(boto3.client("dynamodb"), "bench")
        boto3.client("s3").create_bucket(Bucket="bench")
        settings = Settings(table="bench", bucket="bench")
        clock = FakeClock()
        ex = Exports(settings, Store(settings), Objects(settings), clock=clock)
        clients = (ex.store.client, ex.objects.client)
        book, _, _ = ex.books.create_book("bench-user", "Bench", "# One\n\ntext\n")

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
            swept = ex.fail_stale_exports().done
        # Totals over the rows, not a quotient: a division would hide an extra call. (The key-1 export above
        # is still pending too, so the sweep finds four.)
        rows.append(
            (f"{swept} stale rows swept (TransactWriteItems)", calls.count()["TransactWriteItems"], swept)
        )
        clock.advance(settings.link_ttl_seconds + settings.lease_seconds + 1)
        ex.expire_lapsed_links()  # clear the rows above out of the GC's queues, so the figures below are
        ex.unlink_ended_artifacts()  # one link's alone
        copied = ex.submit("bench-user", book.id, "markdown", None)[0]["id"]
        with recording(ex.objects.client) as s3calls:
            ex.build(book.id, copied)
        rows.append(
            ("S3 calls to build markdown (1 server-side CopyObject)", sum(s3calls.count().values()), 1)
        )
        built = ex.submit("bench-user", book.id, "html", None)[0]["id"]
        with recording(ex.objects.client) as s3calls:
            ex.build(book.id, built)
        rows.append(("S3 calls to build a small html book (1 GET, 1 PUT)", sum(s3calls.count().values()), 2))
        clock.advance(settings.link_ttl_seconds + 1)
        with recording(*clients) as calls:
            assert ex.expire_lapsed_links().done == 2
            assert ex.unlink_ended_artifacts().done == 2
        writes = calls.count("dynamodb")
        rows.append(
            (
                "2 lapsed links: expire + forget (DynamoDB writes)",
                writes["UpdateItem"] + writes["TransactWriteItems"],
                4,
            )
        )
        # A forget reads its row first: whose usage the bytes leave, and how many (the index has neither).
        rows.append(("2 lapsed links: reads before the forgets", writes["GetItem"], 2))
        targets = [{"book_id": book.id, "format": "html"}] * 2
        rows.append(
            (
                "a batch of 2 (the books' owners, the cap's shards, one write)",
                count(lambda: ex.create_batch("bench-user", CallerClass.STANDARD, targets, None)),
                3,
            )
        )
        rows.append(("2 lapsed links: S3 deletes", calls.count("s3")["DeleteObject"], 2))
    for name, measured, minimum in rows:
        record("round trips", name, str(measured), f"minimum {minimum}", measured == minimum)


# ---- 2. cold start ---------------------------------------------------------------------------------


# A handler's cold start over the floor's, a guard against regressions: each budget sits about a sixth over
# what the handler measures (runs of this session: poll 1.42-1.58, the worker 1.38-1.61, the rest 1.1-1.45).
# The floor loads no Powertools: the poll's resolver package brings asyncio (through its AppSync resolver,
# 40 ms), as the worker's batch utility does, and the worker's first invoke also imports and runs a renderer.
COLD_BUDGET = {"submit": 1.5, "poll": 1.75, "build_worker": 1.9, "expiry_gc": 1.6, "stale_sweep": 1.5}


def _probe(*args: str, env: dict[str, str]) -> float:
    out = subprocess.run(
        [PY, str(ROOT / "tests/bench/coldstart_probe.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return float(out.stdout.strip().splitlines()[-1])


def cold_start() -> None:
    """Each handler's cold start, import and first invoke, against the same AWS calls made with bare boto3
    (the floor: what any handler doing this work must pay). The handlers run against moto's server, so a
    round trip costs both sides alike."""
    say(f"\n2. Cold start: a fresh process's import and first invoke, median of {COLD_RUNS}")
    from moto.server import ThreadedMotoServer

    from tests.events import http_event, sample, sqs_event_for
    from tests.servers import free_port

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    # As the layer ships it (shared/Makefile): compiled. Otherwise every probe compiles Bindery from source
    # (this machine sets PYTHONDONTWRITEBYTECODE), while boto3 came compiled by pip, an unfair floor.
    subprocess.run([PY, "-m", "compileall", "-q", "shared/bindery", "functions"], cwd=ROOT, check=True)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        ex = _local_service(endpoint, endpoint, max_live_exports=1_000_000)
        import boto3

        boto3.client("dynamodb").create_table(
            TableName="bindery-idempotency",  # the usual way's own table
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        env = _env(
            AWS_ENDPOINT_URL=endpoint,
            BINDERY_TABLE=ex.settings.table,
            BINDERY_BUCKET=ex.settings.bucket,
            BINDERY_MAX_LIVE_EXPORTS="1000000",
            POWERTOOLS_SERVICE_NAME="bindery",
        )
        book, _, _ = ex.books.create_book("bench-user", "Cold", "# One\n\ntext\n\n# Two\n\nmore\n")
        ready = ex.submit("bench-user", book.id, "html", None)[0]["id"]
        ex.build(book.id, ready)
        poll = http_event("GET", f"/books/{book.id}/exports/{ready}", caller="bench-user")
        events: dict[str, Callable[[], dict[str, Any]]] = {
            "submit": lambda: http_event(
                "POST", f"/books/{book.id}/exports", caller="bench-user", body={"format": "html"}
            ),
            "poll": lambda: poll,
            # a new pending export each time: a first invoke that builds
            "build_worker": lambda: sqs_event_for(
                book.id, ex.submit("bench-user", book.id, "html", None)[0]["id"]
            ),
            "expiry_gc": lambda: sample("expiry_gc_schedule.json"),
            "stale_sweep": lambda: sample("stale_sweep_schedule.json"),
            "usual": lambda: poll,
        }
        modules = {name: f"functions.{name}.app" for name in HANDLERS} | {
            "usual": "tests.bench.usual_handler"
        }
        tmp = Path(tempfile.mkdtemp(prefix="bindery-cold-"))
        samples: dict[str, list[float]] = {name: [] for name in modules}
        floors: dict[str, list[float]] = {name: [] for name in modules}
        calls_made: dict[str, int] = {}
        # Round-robin, so a slow spell of the machine lands on every target alike rather than on one.
        for run in range(COLD_RUNS):
            for name, module in modules.items():
                event, calls = tmp / f"{name}.json", tmp / f"{name}-calls.json"
                event.write_text(json.dumps(events[name]()))
                if run == 0:  # once, untimed: the calls the first invoke makes, for the floor to replay
                    _probe("handler", module, str(event), str(calls), env=env)
                    calls_made[name] = len(json.loads(calls.read_text()))
                    event.write_text(json.dumps(events[name]()))
                # One after the other, never at once: a pair run side by side disturbs its two sides unevenly
                # (the floor ends first and runs its whole life beside the handler), which biased the ratio.
                samples[name].append(_probe("handler", module, str(event), env=env))
                floors[name].append(_probe("replay", str(calls), env=env))
    finally:
        server.stop()
    for name in modules:
        ours, floor = statistics.median(samples[name]), statistics.median(floors[name])
        label = "usual way (Tracer, HTTP resolver + pydantic, idempotency) poll" if name == "usual" else name
        record(
            "cold start",
            f"{label}: {ours * 1000:.0f} ms / the same {calls_made[name]} calls in bare boto3 "
            f"{floor * 1000:.0f} ms",
            f"{ours / floor:.2f}",
            *(
                ("", None)
                if name == "usual"
                else (f"≤ {COLD_BUDGET[name]:.2f}", ours / floor <= COLD_BUDGET[name])
            ),
        )
    poll, usual = statistics.median(samples["poll"]), statistics.median(samples["usual"])
    record("cold start", "bindery poll / usual way poll", f"{poll / usual:.2f}", "< 1", poll < usual)


def layer() -> None:
    """The layer as `sam build` makes it (shared/Makefile, arm64 wheels), unzipped: what every function's
    cold start pulls from S3 and unpacks. Needs python3.12 (pyenv's, here) and the package index."""
    say("\n2. The layer, unzipped (shared/Makefile, as sam build runs it)")
    env = {**os.environ, "PYENV_VERSION": os.environ.get("PYENV_VERSION", "3.11.7:3.12.1")}
    with tempfile.TemporaryDirectory() as out:
        made = subprocess.run(
            ["make", "--no-print-directory", "-C", "shared", "build-BinderyLayer", f"ARTIFACTS_DIR={out}"],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if made.returncode:
            record("layer", "unzipped size (could not build it)", made.stderr.strip()[-60:])
            return
        python = Path(out) / "python"
        sizes: dict[str, int] = {}
        for path in python.rglob("*"):
            if path.is_file():
                top = path.relative_to(python).parts[0].split("-")[0].removesuffix(".libs")
                sizes[top] = sizes.get(top, 0) + path.stat().st_size
    total = sum(sizes.values())
    record(
        "layer",
        "the layer, unzipped",
        f"{total / 2**20:.1f} MiB",
        "< 250 MiB (Lambda's limit)",
        total < 250 * 2**20,
    )
    record("layer", "of which bindery", f"{sizes.get('bindery', 0) / 2**20:.1f} MiB")
    from bindery.engine.typefaces import FONT_PACKAGES

    fonts = [package for package, _, _ in FONT_PACKAGES]
    font_bytes = sum(sizes.get(package, 0) for package in fonts)
    record("layer", f"of which the PDF's fonts ({', '.join(fonts)})", f"{font_bytes / 2**20:.1f} MiB")
    shipped_dev = sorted(name for name in sizes if name.startswith("bindery_local"))
    record("layer", "development code shipped (bindery_local)", str(len(shipped_dev)), "0", not shipped_dev)
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    record("layer", "the largest parts", ", ".join(f"{k} {v / 2**20:.1f}" for k, v in largest) + " MiB")


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


@dataclass(frozen=True)
class Aws:
    """Where a child process finds S3 and DynamoDB."""

    s3: str
    dynamodb: str

    def env(self) -> dict[str, str]:
        return _env(AWS_ENDPOINT_URL=self.s3, AWS_ENDPOINT_URL_DYNAMODB=self.dynamodb)

    def client(self, service: str) -> Any:
        """A client for this process, with the children's credentials and region."""
        import boto3

        return boto3.session.Session(
            aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
        ).client(service, endpoint_url=self.dynamodb if service == "dynamodb" else self.s3)


def _make_book(aws: Aws, table: str, manuscript: Path) -> str:
    return _make_book_timed(aws, table, manuscript)[0]


def _make_book_timed(aws: Aws, table: str, manuscript: Path) -> tuple[str, float]:
    """Create a book in a child process through the real upload path: presigned-upload key, then the
    streaming cut. Returns the book and the seconds the adoption took (what the API call spends)."""
    script = f"""
import boto3, json, sys, time
from bindery.config import Settings
from bindery.exports import Exports
from bindery.objects import upload_key
ex = Exports.from_settings(Settings(table={table!r}, bucket={table!r}))
book, _, _ = ex.books.create_book("bench-user", "Bench", "")
upload = ex.books.create_upload("bench-user", book.id)
boto3.client("s3").upload_file({str(manuscript)!r}, {table!r}, upload_key(book.id, upload["upload_id"]))
started = time.perf_counter()
ex.books.replace_manuscript("bench-user", book.id, None, manuscript=None, upload_id=upload["upload_id"])
print(book.id, time.perf_counter() - started)
"""
    out = subprocess.run([PY, "-c", script], env=aws.env(), capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    book, seconds = out.stdout.strip().splitlines()[-1].split()
    return book, float(seconds)


def _make_illustrated(aws: Aws, table: str, images: int, image_bytes: int) -> str:
    probe = [PY, str(ROOT / "tests/bench/illustrated_probe.py"), table, str(images), str(image_bytes)]
    out = subprocess.run(probe, env=aws.env(), capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return out.stdout.strip().splitlines()[-1]


def _build(aws: Aws, table: str, book: str, fmt: str, nice: int = 0, keep: bool = False) -> dict[str, Any]:
    """One build in a fresh process. Its export is revoked afterwards (its bytes deleted), unless `keep`."""
    probe = [PY, str(ROOT / "tests/bench/build_probe.py"), book, fmt, table, *(["keep"] if keep else [])]
    out = subprocess.run(
        ["nice", "-n", str(nice), *probe],
        env=aws.env(),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:] + out.stdout[-500:])
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def build_memory() -> None:
    say(
        f"\n4. Builds: peak RSS of a {BIG_MB:g} MB, {BIG_CHAPTERS}-chapter book against a {SMALL_MB:g} MB one"
    )

    from bindery.engine.pdf import MAX_MANUSCRIPT_BYTES
    from bindery_local.template import create_table
    from tests.servers import dynamodb_local, free_port, wait_for_port

    # S3 is moto's server, in a process of its own; the table is DynamoDB Local's, whose transactions cost
    # what a real engine's do (moto copies every table to make each transaction undoable).
    ddb = contextlib.ExitStack()
    port = free_port()
    server = subprocess.Popen(
        [PY, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    table = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        wait_for_port(port, server)
        aws = Aws(s3=f"http://127.0.0.1:{port}", dynamodb=ddb.enter_context(dynamodb_local()))
        create_table(aws.client("dynamodb"), table)
        aws.client("s3").create_bucket(Bucket=table)
        with tempfile.TemporaryDirectory() as tmp:
            small_md, big_md = Path(tmp) / "small.md", Path(tmp) / "big.md"
            _manuscript(small_md, SMALL_MB, SMALL_CHAPTERS)
            _manuscript(big_md, BIG_MB, BIG_CHAPTERS)
            small = _make_book(aws, table, small_md)
            big, cut_seconds = _make_book_timed(aws, table, big_md)
            illustrated = _make_illustrated(aws, table, IMAGES, IMAGE_BYTES)
            record(
                "builds", f"cut a {BIG_MB:g} MB upload into {BIG_CHAPTERS} chapters", f"{cut_seconds:.1f} s"
            )
            # The largest manuscript the API takes, adopted within API Gateway's 30 s: the cut streams it once
            # and keeps it by a server-side copy (a CRLF upload costs a second, normalising pass).
            largest_md = Path(tmp) / "largest.md"
            _manuscript(largest_md, MAX_UPLOAD_MB, BIG_CHAPTERS)
            _, largest_seconds = _make_book_timed(aws, table, largest_md)
            largest_md.unlink()
            record(
                "builds",
                f"cut a {MAX_UPLOAD_MB:g} MB upload (the largest) into {BIG_CHAPTERS} chapters",
                f"{largest_seconds:.1f} s",
                "≤ 30 s (the API's limit)",
                largest_seconds <= 30,
            )
            pdf_md = Path(tmp) / "pdf.md"
            pdf_mb = MAX_MANUSCRIPT_BYTES / 2**20
            _manuscript(pdf_md, pdf_mb * 0.98, max(1, int(pdf_mb * 25)))
            largest = _make_book(aws, table, pdf_md)
            # The largest PDF (two minutes and more on one core) builds while the memory runs go on beside it,
            # all at once: a peak RSS does not depend on what else runs, and the bench saves minutes. They run
            # niced, so the PDF's time (a figure with a budget) is its own; theirs are info. The timed
            # comparisons (against pandoc and WeasyPrint) run afterwards, alone.
            pdf_run = subprocess.Popen(
                [PY, str(ROOT / "tests/bench/build_probe.py"), largest, "pdf", table],
                env=aws.env(), text=True, cwd=ROOT,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            formats = ("markdown", "html", "epub")
            runs = _together(
                {
                    (fmt, size): partial(_build, aws, table, book, fmt, nice=10)
                    for fmt in formats
                    for size, book in (("small", small), ("big", big))
                }
                | {
                    (fmt, "illustrated"): partial(_build, aws, table, illustrated, fmt, nice=10)
                    for fmt in ("html", "epub")
                }
                | {("pdf", "small"): partial(_build, aws, table, small, "pdf", nice=10)}
            )
            for fmt in formats:
                a, b = runs[fmt, "small"], runs[fmt, "big"]
                ratio = b["peak_rss"] / a["peak_rss"]
                record(
                    "builds",
                    f"{fmt}: peak RSS {b['peak_rss'] / 2**20:.0f} MiB / {a['peak_rss'] / 2**20:.0f} MiB",
                    f"{ratio:.2f}",
                    "≤ 1.20",
                    ratio <= 1.2,
                )
            for fmt in ("html", "epub"):
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
            for fmt in formats:
                b = runs[fmt, "big"]
                record(
                    "builds",
                    f"{fmt}: {BIG_MB:g} MB build time (niced, beside the others), "
                    f"{b['size_bytes'] / 2**20:.0f} MiB artifact",
                    f"{b['seconds']:.1f} s",
                )
            out, err = pdf_run.communicate()
            if pdf_run.returncode:
                raise RuntimeError(err[-2000:])
            p = json.loads(out.strip().splitlines()[-1])
            a = runs["pdf", "small"]
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
            _against_pandoc(aws, table, Path(tmp))
    finally:
        ddb.close()
        server.terminate()
        server.wait(timeout=20)


# ---- 3. warm overhead, 5. sweeps at scale, 6. cost (on DynamoDB Local) -----------------------------


def _local_service(ddb: str, s3: str, **settings_overrides: Any) -> Any:
    import boto3

    from bindery.config import Settings
    from bindery.exports import Exports
    from bindery_local.template import create_table

    os.environ.update(_env(AWS_ENDPOINT_URL_DYNAMODB=ddb, AWS_ENDPOINT_URL_S3=s3))
    name = f"bench-{uuid.uuid4().hex[:8]}"
    create_table(boto3.client("dynamodb"), name)
    boto3.client("s3").create_bucket(Bucket=name)
    return Exports.from_settings(Settings(table=name, bucket=name, **settings_overrides))


def _paired_medians_ms(
    ours: Callable[[], Any], raw: Callable[[], Any], runs: int = 300, warmup: int = 500
) -> tuple[float, float]:
    """Medians of the two, measured alternately, after a warm-up long enough for DynamoDB Local's JVM to
    have compiled its hot paths: drift in the server then falls on both sides alike."""
    for _ in range(warmup):
        ours()
        raw()
    a, b = [], []
    for _ in range(runs):
        for act, samples in ((ours, a), (raw, b)):
            started = time.perf_counter()
            act()
            samples.append(time.perf_counter() - started)
    return statistics.median(a) * 1000, statistics.median(b) * 1000


def warm_and_scale() -> None:  # and cost
    import boto3
    from moto.server import ThreadedMotoServer

    from functions.poll import app as poll
    from functions.submit import app as submit
    from tests.conftest import FakeContext
    from tests.events import http_event
    from tests.servers import dynamodb_local, free_port

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    s3.start()
    try:
        with dynamodb_local() as ddb:
            say("\n3. Warm handler overhead against DynamoDB Local: median of 300, handler / raw boto3")
            ex = _local_service(
                ddb, f"http://127.0.0.1:{port}", max_live_exports=1_000_000, max_live_exports_total=10**9
            )
            book, _, _ = ex.books.create_book("bench-user", "Warm", "# One\n\ntext\n")
            export_id = ex.submit("bench-user", book.id, "html", None)[0]["id"]
            ctx = FakeContext()
            get = http_event("GET", f"/books/{book.id}/exports/{export_id}", caller="bench-user")
            raw = boto3.client("dynamodb")
            table = ex.settings.table
            keys = [
                {"pk": {"S": f"BOOK#{book.id}"}, "sk": {"S": "BOOK"}},
                {"pk": {"S": f"BOOK#{book.id}"}, "sk": {"S": f"EXPORT#{export_id}"}},
            ]
            gets = [{"Get": {"TableName": table, "Key": k}} for k in keys]
            # Every answer reads the caller's live item too, for its RateLimit-* fields: so does the raw side.
            live = {"pk": {"S": "CALLER#bench-user"}, "sk": {"S": "LIVE"}}

            def raw_poll() -> None:
                raw.transact_get_items(TransactItems=gets)
                raw.get_item(TableName=table, Key=live)

            handler_ms, raw_ms = _paired_medians_ms(lambda: poll.handler(get, ctx, exports=ex), raw_poll)
            poll_ms = handler_ms
            record(
                "warm",
                f"poll: {handler_ms:.2f} ms / raw TransactGetItems + GetItem {raw_ms:.2f} ms",
                f"{handler_ms / raw_ms:.2f}",
                "≤ 1.30",
                handler_ms / raw_ms <= 1.3,
            )
            post = http_event(
                "POST", f"/books/{book.id}/exports", caller="bench-user", body={"format": "html"}
            )

            # The raw side sends exactly the transaction the handler sends (captured), with a fresh id.
            captured: list[Any] = []

            def capture(params: dict[str, Any], **_: Any) -> None:
                captured.append(json.loads(json.dumps(params)))

            ex.store.client.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", capture)
            submit.handler(post, ctx, exports=ex)
            ex.store.client.meta.events.unregister(
                "provide-client-params.dynamodb.TransactWriteItems", capture
            )
            template_request = json.dumps(captured[0])
            seen_id = captured[0]["TransactItems"][1]["Put"]["Item"]["export_id"]["S"]

            def raw_submit() -> None:
                request = json.loads(template_request.replace(seen_id, uuid.uuid4().hex[:21]))
                request["ClientRequestToken"] = uuid.uuid4().hex  # as the handler sends: fresh each try
                raw.transact_write_items(**request)
                raw.get_item(TableName=table, Key=live)  # the RateLimit-* fields' read

            handler_ms, raw_ms = _paired_medians_ms(lambda: submit.handler(post, ctx, exports=ex), raw_submit)
            record(
                "warm",
                f"submit: {handler_ms:.2f} ms / raw TransactWriteItems + GetItem {raw_ms:.2f} ms",
                f"{handler_ms / raw_ms:.2f}",
                "≤ 1.30",
                handler_ms / raw_ms <= 1.3,
            )

            manuscript = "".join(
                f"# Chapter {n}\n\n" + "Words upon words, *some* of them stressed. " * 120 + "\n\n"
                for n in range(1, 201)
            )  # about 1 MB
            big, _, _ = ex.books.create_book("bench-user", "Cost", manuscript)
            builds = []
            for _ in range(3):
                build_id = ex.submit("bench-user", big.id, "html", None)[0]["id"]
                started = time.perf_counter()
                ex.build(big.id, build_id)
                builds.append(time.perf_counter() - started)
            _cost(
                _counted_lifecycle(_local_service(ddb, f"http://127.0.0.1:{port}"), manuscript),
                submit_ms=handler_ms,
                poll_ms=poll_ms,
                build_s=statistics.median(builds),
                mb=len(manuscript.encode()) / 2**20,
            )
    finally:
        s3.stop()


def sweeps() -> None:
    from moto.server import ThreadedMotoServer

    from tests.servers import dynamodb_local, free_port

    say("\n5. Sweeps read the work, not the table: items read / due items, 100 due per queue")
    port = free_port()
    s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    s3.start()
    try:
        for rows in (1_000, 10_000, 100_000):
            # A fresh DynamoDB Local for each size: one that already holds a table writes ten times slower.
            with dynamodb_local() as ddb:
                _sweep_scale(ddb, f"http://127.0.0.1:{port}", rows)
    finally:
        s3.stop()


LIFECYCLE_EXPORTS, POLLS = 10, 3


def _counted_lifecycle(live: Any, manuscript: str) -> dict[str, Any]:
    """On a table of its own: ten exports of one book, each from submit to its link's lapse and its bytes'
    unlinking, with every call booked to its phase by a Ledger: the cost's inputs, counted. The clock is a
    fake one started now, so that the sweeps find the links lapsed without waiting a day (DynamoDB Local's
    TTL sees only times to come). Also one run of each sweep with nothing to do: what the schedules cost
    when idle."""
    from bindery.exports import Exports
    from tests.bench.ledger import Ledger

    now = [time.time()]  # (not tests.conftest's FakeClock: importing it clears the endpoints set above)
    ex = Exports(live.settings, live.store, live.objects, clock=lambda: now[0])
    settings = ex.settings
    book, _, _ = ex.books.create_book("cost-user", "Counted", manuscript)
    with Ledger(ex.store.client, ex.objects.client) as ledger:
        ids = []
        for _ in range(LIFECYCLE_EXPORTS):
            with ledger.phase("submit"):
                ids.append(ex.submit("cost-user", book.id, "html", None)[0]["id"])
            with ledger.phase("poll"):
                ex.read("cost-user", book.id, ids[-1])  # pending
            with ledger.phase("build"):
                ex.build(book.id, ids[-1])
            with ledger.phase("poll"):
                for _ in range(POLLS - 1):
                    assert ex.read("cost-user", book.id, ids[-1])["state"] == "ready"
        now[0] += settings.link_ttl_seconds + settings.lease_seconds + settings.retry_grace_seconds + 1
        with ledger.phase("sweeps"):
            gc = ex.collect_garbage()
            ex.fail_stale_exports()
        assert gc["expired"] == gc["unlinked"] == LIFECYCLE_EXPORTS, gc
        with ledger.phase("idle sweeps"):
            ex.collect_garbage()
            ex.fail_stale_exports()
    return dict(ledger.phases)


# List prices, us-east-1, as published by AWS in November 2024 (the latest we hold; check before relying).
PRICES = {
    "lambda_gb_s_arm64": 0.0000133334,
    "lambda_request": 0.20 / 1e6,
    "http_api_request": 1.00 / 1e6,
    "ddb_wru": 0.625 / 1e6,
    "ddb_rru": 0.125 / 1e6,
    "s3_put_class": 0.005 / 1e3,
    "s3_get_class": 0.0004 / 1e3,
    "sqs_request": 0.40 / 1e6,
    "pipes_request": 0.40 / 1e6,
    "sfn_transition": 0.025 / 1e3,
}
SWEEP_RUNS_A_MONTH = 2 * 30 * 24 * 12  # two schedules, every 5 minutes (template.yaml)


def _cost(phases: dict[str, Any], *, submit_ms: float, poll_ms: float, build_s: float, mb: float) -> None:
    """Dollars per 1,000 exports of a ~1 MB book: DynamoDB's units and S3's requests counted from a recorded
    lifecycle (above), Lambda's GB-seconds from the measured durations, and the queue's requests (made by
    the pipe and the event source mapping, which run in AWS, not here) at 3 SQS requests and 1 pipe event."""
    say(f"\n6. Cost per 1,000 exports of a {mb:.1f} MB book (html), us-east-1 list prices of 2024-11")
    from bindery_local.template import memory_gb

    each = {name: phases[name] / LIFECYCLE_EXPORTS for name in ("submit", "poll", "build", "sweeps")}
    wru = sum(p.wru for p in each.values())
    index_wru = sum(p.index_wru for p in each.values())
    rru = sum(p.rru for p in each.values())
    for name, p in each.items():
        record(
            "cost inputs (counted, per export)",
            f"{name}: DynamoDB calls / WRU (table + index) / RRU / S3 PUT-class / S3 GET-class",
            f"{p.calls - p.s3_put_class - p.s3_get_class:g} / {p.wru:g} + {p.index_wru:g} / {p.rru:g}"
            f" / {p.s3_put_class:g} / {p.s3_get_class:g}",
        )
    s3_put = sum(p.s3_put_class for p in each.values())
    s3_get = sum(p.s3_get_class for p in each.values()) + 1  # and the caller's download
    # Each function at the memory template.yaml gives it; the sweeps' share of one export is ~10 ms.
    gb_s = (
        submit_ms / 1000 * memory_gb("SubmitFunction")
        + POLLS * poll_ms / 1000 * memory_gb("PollFunction")
        + build_s * memory_gb("BuildWorkerFunction")
        + 0.01 * memory_gb("ExpiryGcFunction")
    )
    per_export = {
        "lambda": gb_s * PRICES["lambda_gb_s_arm64"] + (1 + POLLS + 1) * PRICES["lambda_request"],
        "api": (1 + POLLS) * PRICES["http_api_request"],
        "dynamodb": (wru + index_wru) * PRICES["ddb_wru"] + rru * PRICES["ddb_rru"],
        "s3": s3_put * PRICES["s3_put_class"] + s3_get * PRICES["s3_get_class"],
        "queue": 3 * PRICES["sqs_request"] + PRICES["pipes_request"],
    }
    total = sum(per_export.values()) * 1000
    for name, dollars in per_export.items():
        record("cost", f"{name} per 1,000 exports", f"${dollars * 1000:.4f}")
    record(
        "cost",
        f"Bindery per 1,000 exports ({gb_s:.3f} GB-s, {wru + index_wru:g} WRU, {rru:g} RRU each; "
        "us-east-1 list prices, 2024-11)",
        f"${total:.4f}",
    )
    idle = phases["idle sweeps"]
    idle_month = SWEEP_RUNS_A_MONTH / 2 * (
        (idle.wru + idle.index_wru) * PRICES["ddb_wru"]
        + idle.rru * PRICES["ddb_rru"]
        + idle.s3_put_class * PRICES["s3_put_class"]
        + idle.s3_get_class * PRICES["s3_get_class"]
    ) + SWEEP_RUNS_A_MONTH * (
        PRICES["lambda_request"] + 0.01 * memory_gb("ExpiryGcFunction") * PRICES["lambda_gb_s_arm64"]
    )
    record(
        "cost",
        f"the schedules alone, a month with no exports ({SWEEP_RUNS_A_MONTH:,} runs; a GC and a sweep: "
        f"{idle.wru + idle.index_wru:g} WRU, {idle.rru:g} RRU, {idle.s3_put_class} LIST)",
        f"${idle_month:.4f}",
    )
    # The same lifecycle as a Step Functions standard workflow, priced on its own: the execution holds the
    # timers, so there is no queue, no pipe, no sweep and no by_due index (the sweeps' reads and the index's
    # writes go; the expire and unlink writes stay, done by tasks), but each step is a task, a Lambda
    # invocation of its own (claim, build, finish, expire, unlink, forget), and each state entered is a
    # transition (start, the six tasks, the wait for the link to lapse, the end: 9).
    tasks, transitions = 6, 9
    sfn_each = {
        "lambda": gb_s * PRICES["lambda_gb_s_arm64"] + (1 + POLLS + tasks) * PRICES["lambda_request"],
        "api": per_export["api"],
        "dynamodb": wru * PRICES["ddb_wru"] + (rru - each["sweeps"].rru) * PRICES["ddb_rru"],
        "s3": per_export["s3"],
        "transitions": transitions * PRICES["sfn_transition"],
    }
    sfn = sum(sfn_each.values()) * 1000
    record(
        "cost",
        f"the same lifecycle on Step Functions standard ({transitions} transitions, {tasks} tasks)",
        f"${sfn:.4f}",
    )
    record("cost", "Bindery / Step Functions", f"{total / sfn:.2f}", "< 1", total < sfn)


def _sweep_scale(ddb: str, s3: str, rows: int) -> None:
    import boto3

    from tests.calls import recording

    ex = _local_service(ddb, s3)
    client = boto3.client("dynamodb")
    now = time.time()
    due = 100

    def item(n: int) -> dict[str, Any]:
        export = f"{n:021d}"
        base = {"pk": {"S": f"BOOK#b{n % 500:019d}"}, "sk": {"S": f"EXPORT#{export}"},
                "export_id": {"S": export}, "book_id": {"S": f"b{n % 500:019d}"}, "format": {"S": "html"},
                "requested_at": {"N": str(now - 7200)}, "counted_against": {"S": "bench-user"},
                "attempt": {"N": "0"}}  # fmt: skip
        if n < due:  # never claimed, past its queue grace: the stale sweep's work
            return {
                **base,
                "state": {"S": "pending"},
                "queue": {"S": "stale"},
                "due_at": {"N": str(now - 60)},
            }
        if n < 2 * due:  # ready, link lapsed: the GC's work
            return {
                **base,
                "state": {"S": "ready"},
                "queue": {"S": "expire"},
                "due_at": {"N": str(now - 60)},
                "expires_at": {"N": str(now - 60)},
                "path": {"S": f"artifacts/x/{export}/t"},
            }
        if n % 2:  # ready with a long way to go: in the index, not due
            return {
                **base,
                "state": {"S": "ready"},
                "queue": {"S": "expire"},
                "due_at": {"N": str(now + 86_400)},
                "expires_at": {"N": str(now + 86_400)},
            }
        return {**base, "state": {"S": "failed"}, "failure_code": {"S": "render_failed"}}  # not in the index

    def write(start: int) -> None:
        batch = [{"PutRequest": {"Item": item(n)}} for n in range(start, min(rows, start + 25))]
        while batch:
            left = client.batch_write_item(RequestItems={ex.settings.table: batch})["UnprocessedItems"]
            batch = left.get(ex.settings.table, [])

    from concurrent.futures import ThreadPoolExecutor

    started = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(0, rows, 25)))
    say(f"    ({rows:,} rows written in {time.perf_counter() - started:.1f} s)")
    scanned = {"n": 0}

    def count(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "Query":
            scanned["n"] += int(parsed.get("ScannedCount", 0))

    ex.store.client.meta.events.register("after-call.dynamodb.Query", count)
    with recording(ex.store.client):
        stale = ex.fail_stale_exports()
        expired = ex.expire_lapsed_links()
    done = stale.done + expired.done
    ratio = scanned["n"] / done if done else float("inf")
    record("sweeps", f"{rows:>7,} rows, {done} due: items read by stale_sweep + expiry_gc", str(scanned["n"]))
    record(
        "sweeps",
        f"{rows:>7,} rows: items read / due items",
        f"{ratio:.2f}",
        "≤ 1.10",
        ratio <= 1.1 and done == 2 * due,
    )


PANDOC_MB = float(os.environ.get("BINDERY_BENCH_PANDOC_MB", "25"))
PANDOC_CHAPTERS = int(os.environ.get("BINDERY_BENCH_PANDOC_CHAPTERS", "1000"))


def _pandoc(source: Path, fmt: str, out: Path) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of pandoc converting `source`, run under GNU time's measurement."""
    import pypandoc

    started = time.perf_counter()
    run = subprocess.run(
        ["/usr/bin/time", "-f", "%M", pypandoc.get_pandoc_path(), str(source), "-f", "markdown", "-t", fmt,
         "--standalone", "--toc", "-o", str(out)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return time.perf_counter() - started, int(run.stderr.strip().splitlines()[-1]) * 1024


def _together(runs: dict[Any, Callable[[], Any]]) -> dict[Any, Any]:
    """Start every run at once (threads, each starting a process of its own) and wait for all."""
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {name: pool.submit(run) for name, run in runs.items()}
        return {name: future.result() for name, future in futures.items()}


def _against_pandoc(aws: Aws, table: str, tmp: Path) -> None:
    """What a user would pick instead, on the same book in the same run: pandoc (pypandoc-binary)."""
    try:
        import pypandoc
    except ImportError:
        record("builds", "pandoc comparison (pypandoc-binary is not installed)", "skipped")
        return

    say(
        f"\n4. Builds against pandoc {pypandoc.get_pandoc_version()} on a {PANDOC_MB:g} MB, "
        f"{PANDOC_CHAPTERS}-chapter book"
    )
    source = tmp / "pandoc.md"
    _manuscript(source, PANDOC_MB, PANDOC_CHAPTERS)
    book = _make_book(aws, table, source)
    # Each side makes its html and its epub at once: pandoc works on one core, so each of its runs has a
    # core to itself, while each of our builds shares the two cores with the other and with the S3 server.
    builds = _together({f: partial(_build, aws, table, book, f) for f in ("html", "epub")})
    theirs: dict[str, tuple[float, int]] = {}

    def html_then_the_rest() -> None:
        theirs["html"] = _pandoc(source, "html", tmp / "pandoc.html")
        # pandoc's html ends long before its epub. The comparisons that remain run on the core it frees;
        # both sides of each share the machine with the same pandoc epub, so each compares like with like.
        _markdown_against_raw_upload(aws, table, book, source)
        _against_weasyprint(aws, table, tmp)
        _, small_peak = _pandoc(small, "html", tmp / "small.html")
        theirs["small"] = (0.0, small_peak)

    def epub() -> None:
        theirs["epub"] = _pandoc(source, "epub3", tmp / "pandoc.epub")

    small = tmp / "pandoc-small.md"
    _manuscript(small, SMALL_MB, SMALL_CHAPTERS)
    _together({"html": html_then_the_rest, "epub": epub})
    for fmt in ("html", "epub"):
        ours = builds[fmt]
        seconds, peak = theirs[fmt]
        ratio = ours["seconds"] / seconds
        record(
            "builds",
            f"{fmt}: bindery {ours['seconds']:.1f} s (upload included) / pandoc {seconds:.1f} s",
            f"{ratio:.2f}",
            "≤ 0.33",
            ratio <= 0.33,
        )
        record(
            "builds",
            f"{fmt}: peak RSS bindery {ours['peak_rss'] / 2**20:.0f} MiB, pandoc {peak / 2**20:.0f} MiB",
            f"{peak / ours['peak_rss']:.1f}× less",
        )
    record(
        "builds",
        f"pandoc html peak RSS {PANDOC_MB:g} MB / {SMALL_MB:g} MB book (it grows with the book)",
        f"{theirs['html'][1] / theirs['small'][1]:.1f}",
    )


def _markdown_against_raw_upload(aws: Aws, table: str, book: str, source: Path) -> None:

    ours = _build(aws, table, book, "markdown")
    s3 = aws.client("s3")
    started = time.perf_counter()
    s3.upload_file(str(source), table, "bench/raw-upload.md")
    raw = time.perf_counter() - started
    ratio = ours["seconds"] / raw
    record(
        "builds",
        f"markdown: bindery {ours['seconds']:.1f} s / raw upload of the same bytes {raw:.1f} s",
        f"{ratio:.2f}",
        "≤ 1.50",
        ratio <= 1.5,
    )


PDF_REF_MB = float(os.environ.get("BINDERY_BENCH_PDF_REF_MB", "0.5"))
PDF_REF_CHAPTERS = 20

WEASYPRINT = """
import sys, weasyprint
weasyprint.HTML(filename=sys.argv[1]).write_pdf(sys.argv[2])
"""


def _against_weasyprint(aws: Aws, table: str, tmp: Path) -> None:
    """The usual Python route to a PDF, on the same book in the same run: WeasyPrint typesetting Bindery's
    own html. It typesets better (it is a CSS engine on Pango), but needs Pango, Cairo's fonts and GLib,
    which no Lambda runtime carries. Bindery's Typst build is to take at most a fifth of its time."""
    try:
        import weasyprint
    except (ImportError, OSError) as missing:  # OSError: the package is there but Pango is not
        record("builds", f"pdf against WeasyPrint (cannot load it: {missing})", "skipped")
        return

    say(
        f"\n4. pdf against WeasyPrint {weasyprint.__version__} typesetting Bindery's html, "
        f"on a {PDF_REF_MB:g} MB, {PDF_REF_CHAPTERS}-chapter book"
    )
    source = tmp / "pdf-ref.md"
    _manuscript(source, PDF_REF_MB, PDF_REF_CHAPTERS)
    book = _make_book(aws, table, source)
    ours = _build(aws, table, book, "pdf")
    html = _build(aws, table, book, "html", keep=True)  # its bytes are WeasyPrint's input
    page = tmp / "pdf-ref.html"
    aws.client("s3").download_file(table, html["path"], str(page))
    started = time.perf_counter()
    run = subprocess.run(
        ["/usr/bin/time", "-f", "%M", PY, "-c", WEASYPRINT, str(page), str(tmp / "weasy.pdf")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    peak = int(run.stderr.strip().splitlines()[-1]) * 1024
    record(
        "builds",
        f"pdf: bindery {ours['seconds']:.1f} s (upload included) / WeasyPrint on its html {seconds:.1f} s",
        f"{ours['seconds'] / seconds:.2f}",
        "≤ 0.20",
        ours["seconds"] / seconds <= 0.2,
    )
    record(
        "builds",
        f"pdf: peak RSS WeasyPrint {peak / 2**20:.0f} MiB / bindery {ours['peak_rss'] / 2**20:.0f} MiB "
        "(Typst's process included)",
        f"{peak / ours['peak_rss']:.2f}",
    )


# 600 until the local stack's section: about 100 s more (its in-process limit, a start, two load windows).
BUDGET_SECONDS = 720


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


BY_HAND = "<!-- measured by hand: make bench keeps what follows -->"


# ---- 7. limits ------------------------------------------------------------------------------------

CAP_WRITERS, CAP_SUBMITS = 16, 40  # threads, and submits each: 640, across 16 callers


def _cap_contention(ddb: str, s3: str, shards: int) -> tuple[float, float, int]:
    """640 submits from 16 threads at once against one service, the global cap cut into `shards` counters.
    Returns (submits a second, the busiest counter's share of the cap's writes, submits accepted)."""
    import threading
    from collections import Counter

    import bindery.limits
    import bindery.storage.endings
    import bindery.storage.exports

    saved = bindery.limits.CAP_SHARDS
    patched = {m: m.shard_of for m in (bindery.storage.exports, bindery.storage.endings)}
    try:
        if shards == 1:  # every export counted in one counter: the hot item sharding avoids
            bindery.limits.CAP_SHARDS = 1
            for module in patched:
                module.shard_of = lambda _: 0  # type: ignore[attr-defined]
        ex = _local_service(ddb, s3, max_live_exports=1_000_000, max_live_exports_total=1_000_000)
        books = [ex.books.create_book(f"cap-{n}", "Cap", "# One\n\ntext\n")[0].id for n in range(CAP_WRITERS)]
        barrier, accepted = threading.Barrier(CAP_WRITERS), []

        def writer(n: int) -> None:
            barrier.wait()
            for _ in range(CAP_SUBMITS):
                accepted.append(ex.submit(f"cap-{n}", books[n], "markdown", None)[0]["id"])

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(CAP_WRITERS)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - started
        per_counter = Counter(bindery.storage.exports.shard_of(e) for e in accepted)
        return len(accepted) / seconds, max(per_counter.values()) / len(accepted), len(accepted)
    finally:
        bindery.limits.CAP_SHARDS = saved
        for module, real in patched.items():
            module.shard_of = real  # type: ignore[attr-defined]


# (files, MiB each): both over one part, so both are multipart uploads; the large is 16 times the bytes.
BUNDLE_SMALL, BUNDLE_LARGE = (4, 4), (16, 16)


def _bundle_growth(aws: Aws, bucket: str, files: int, mib: int) -> dict[str, Any]:
    s3 = aws.client("s3")
    keys = []
    for n in range(files):
        key = f"artifacts/bench/f{files}x{mib}-{n}/a"
        s3.put_object(Bucket=bucket, Key=key, Body=os.urandom(mib * 2**20))
        keys.append(key)
    probe = [PY, str(ROOT / "tests/bench/bundle_probe.py"), bucket, *keys]
    out = subprocess.run(probe, env=aws.env(), capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def limits() -> None:
    from moto.server import ThreadedMotoServer

    from tests.servers import dynamodb_local, free_port

    say("\n7. Limits: the global cap over 16 counters against one; a bundle's memory against its files")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    s3.start()
    try:
        with dynamodb_local() as ddb:
            endpoint = f"http://127.0.0.1:{port}"
            one_rate, one_share, one_done = _cap_contention(ddb, endpoint, shards=1)
            many_rate, many_share, many_done = _cap_contention(ddb, endpoint, shards=16)
        assert one_done == many_done == CAP_WRITERS * CAP_SUBMITS
        # DynamoDB takes about 1,000 writes a second on one item (a transactional write costs two), and
        # transactions on one item at once cancel each other: the figure that matters is how many of the
        # cap's writes land on its busiest item. DynamoDB Local runs one transaction at a time, so it
        # shows neither the conflicts nor the limit: its throughput is info only.
        record(
            "limits",
            f"{CAP_WRITERS} x {CAP_SUBMITS} submits at once: the busiest counter's share of the cap's writes "
            f"(one counter: {one_share:.0%})",
            f"{many_share:.1%}",
            "≤ 12.5% (2 / 16)",
            many_share <= 2 / 16,
        )
        record(
            "limits",
            f"the same on DynamoDB Local: 16 counters {many_rate:.0f} submits/s, one {one_rate:.0f}/s",
            f"{many_rate / one_rate:.2f}",
            "",
            None,
        )
        aws = Aws(s3=endpoint, dynamodb=endpoint)
        bucket = f"bench-bundle-{uuid.uuid4().hex[:6]}"
        aws.client("s3").create_bucket(Bucket=bucket)
        small = _bundle_growth(aws, bucket, *BUNDLE_SMALL)
        large = _bundle_growth(aws, bucket, *BUNDLE_LARGE)
        # The process's whole peak, as Lambda would bill it; its growth over the imports, for the record.
        ratio = large["peak"] / small["peak"]
        record(
            "limits",
            f"a bundle's peak RSS: {BUNDLE_LARGE[0]} x {BUNDLE_LARGE[1]} MiB {large['peak'] / 2**20:.0f} MiB"
            f" (+{large['growth'] / 2**20:.1f} over its imports) / {BUNDLE_SMALL[0]} x {BUNDLE_SMALL[1]} MiB"
            f" {small['peak'] / 2**20:.0f} MiB (+{small['growth'] / 2**20:.1f})",
            f"{ratio:.2f}",
            "≤ 1.10",
            ratio <= 1.10,
        )
        record(
            "limits",
            f"bundle of {BUNDLE_LARGE[0]} x {BUNDLE_LARGE[1]} MiB: MiB/s from S3 into S3",
            f"{large['size'] / 2**20 / large['seconds']:.0f}",
            "",
            None,
        )
    finally:
        s3.stop()


def local_stack() -> None:
    """The local stack at 64 and 8 clients against the handlers in-process (tests/bench/load_probe.py)."""
    from tests.bench import load_probe

    load_probe.measure(record, say)


def main() -> int:
    sections = {
        "round_trips": round_trips,
        "cold_start": cold_start,
        "layer": layer,
        "warm_and_cost": warm_and_scale,
        "sweeps": sweeps,
        "build_memory": build_memory,
        "limits": limits,
        "local_stack": local_stack,
    }
    chosen = sys.argv[1:] or list(sections)
    started = time.perf_counter()
    warnings.filterwarnings("ignore", "No application metrics to publish")
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        for name in chosen:
            sections[name]()
    seconds = time.perf_counter() - started
    say(f"\n{len(FIGURES)} figures in {seconds:.0f} s")
    if set(chosen) == set(sections):
        # The run's own budget is a figure like the others, and fails the run like them.
        record("run", "the whole run, s", f"{seconds:.0f}", f"< {BUDGET_SECONDS}", seconds < BUDGET_SECONDS)
        write(ROOT / "docs" / "BENCHMARKS.md", seconds)
    return 1 if any(f.verdict == "FAIL" for f in FIGURES) else 0


if __name__ == "__main__":
    sys.exit(main())
