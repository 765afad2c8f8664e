"""`make reliability`: run the proofs and write docs/RELIABILITY.md from what they measured, this run."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITES = [
    "tests/unit/test_fault_matrix.py",
    "tests/unit/test_lost_answers.py",
    "tests/unit/test_iam.py",
    "tests/unit/test_stateful.py",
    "tests/integration/test_races.py",
    "tests/integration/test_feed_races.py",
    "tests/integration/test_hook_races.py",
    "tests/integration/test_duplicate_delivery.py",
    "tests/integration/test_limit_races.py",
    "tests/e2e/test_hostile_input.py",
    "tests/e2e/test_schemathesis.py",
    "tests/e2e/test_load.py",
    "tests/e2e/test_restarts.py",
]
FEED_TRIALS = "100"  # `make test` runs 10 trials of the feed race; this publishes the 100
BATCH_TRIALS = "100"  # and 2 of the 8-concurrent-batches race
LOAD_SECONDS = "60"  # `make test` runs the load test for 5 s; this publishes a minute of it
SCHEMATHESIS_EXAMPLES = "100"  # and schemathesis at 50 examples per operation
KILLS = "20"  # and 6 kills of a stack with BINDERY_DATA_DIR: this publishes the 20
# Figures every run must publish, by prefix: a suite that was skipped (DynamoDB Local or the IAM simulator
# missing) or stopped early publishes fewer, and the run fails rather than print a shorter table.
EXPECTED = {
    "fault matrix: ": 15,
    "stateful property test, shard ": 12,
    "IAM: ": 15,
    "race: ": 17 + 8,
    "duplicate delivery": 3,
    "hostile requests": 3,
    "schemathesis: ": 3,
    "load, 64 clients": 6,
    "restarts: ": 6,
}


def main() -> int:
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl", delete=False) as figures:
        # CI=true: a missing DynamoDB Local or IAM simulator fails its suites instead of skipping them.
        env = {
            **os.environ,
            "CI": "true",
            "BINDERY_FIGURES": figures.name,
            "BINDERY_LOAD_SECONDS": LOAD_SECONDS,
            "BINDERY_FEED_TRIALS": FEED_TRIALS,
            "BINDERY_BATCH_TRIALS": BATCH_TRIALS,
            "BINDERY_SCHEMATHESIS_EXAMPLES": SCHEMATHESIS_EXAMPLES,
            "BINDERY_KILLS": KILLS,
            # `make test` deals the fault kinds across the call points; this strikes each at every one.
            "BINDERY_MATRIX_EVERY_KIND": "1",
        }
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *SUITES], env=env, cwd=ROOT
        )
        rows = [json.loads(line) for line in Path(figures.name).read_text().splitlines() if line.strip()]
    missing = [
        f"{prefix}* ({sum(r['name'].startswith(prefix) for r in rows)} of {count})"
        for prefix, count in EXPECTED.items()
        if sum(r["name"].startswith(prefix) for r in rows) < count
    ]
    failed = run.returncode != 0 or bool(missing)
    summary = f"{'FAILED' if failed else 'passed'} (pytest exit {run.returncode})"
    if missing:
        summary += "; figures missing: " + ", ".join(missing)
    lines = [
        "# Reliability",
        "",
        f"Written by `make reliability` on {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, on "
        f"{platform.machine()}, {os.cpu_count()} cores. Every figure is what that run measured; the suites "
        f"{summary}.",
        os.environ.get("BINDERY_RELIABILITY_NOTE", ""),
        "",
        "The promises (tests/invariants.py). Every suite below runs the checker: the fault matrix, the",
        "stateful test, the duplicate deliveries and the load test at quiescence; the stateful test after",
        "every step that wrote anything too; the races, the hostile requests and schemathesis once their",
        "builds have ended, holding every promise but the eventual one (a pending export may still be",
        "pending); the IAM test checks roles, not state. tests/unit/test_invariants.py shows the checker",
        "naming each promise broken by hand.",
        "",
        "1. every accepted export has a row, and ends (ready, failed with a code, cancelled or expired);",
        "2. every ready export's object exists, every object under artifacts/ is named by a row that still",
        "   needs it, every manuscript and image under books/ is its book's current cut or image or one",
        "   waiting to be retired, and after the GC nothing else is left, multipart uploads included;",
        "3. each caller's live set is exactly that caller's pending exports;",
        "4. no Idempotency-Key answers with two exports, and the table holds at most one export per key",
        "   and window;",
        "5. a poll makes no write;",
        "6. every event in a caller's feed reached each endpoint that subscribed to it (enabled, and",
        "   registered before it happened) as exactly one delivery, and every delivery ended: acked, or",
        "   rejected, expired or withdrawn, the documented endings;",
        "7. each webhook endpoint's ledger counts equal its delivery rows, state by state;",
        "8. each caller's events feed holds exactly the events 1..head, each event id once;",
        "9. each batch's counts equal its targets' endings (targets_done, each ending's count, its bytes),",
        "   a batch is running exactly while a target is pending (or until the sweep settles it), only the",
        "   running ones hold a place among their caller's live batches, and one key made one batch;",
        "10. each caller's usage equals the bytes of its published files still stored;",
        "11. no cap is over: each of the global cap's shards counts exactly its pending exports, within its",
        "    cap, and no caller holds more live exports than its class allows.",
        "",
        "The fault matrix also checks two throughout its runs: after every step every ready row's object",
        "exists and every URL a poll returned downloads the artifact; and every answer a caller got is true",
        "(a 2xx means the change is there, a 4xx that nothing a caller can see changed). Its faults strike",
        "at every recorded call point, DynamoDB's and S3's, the webhook path's included (registration,",
        "ingest, claim, record, withdrawal, redelivery) and the batches' (creation, each target's ending,",
        "the settle, the bundle, the cancel), in five ways: four before the call is applied (a",
        "500, a throttle, a timeout, a crash) and one after (`applied_then_lost`: moto applies the request,",
        "its answer is lost, and botocore resends it).",
        "",
        "| figure | measured |",
        "|---|---|",
        *[f"| {row['name']} | {row['value']} |" for row in rows],
        "",
        "The races and duplicate deliveries run on DynamoDB Local (a real engine: moto's conditional writes",
        "are not atomic under threads); the fault matrix on moto in-process, where faults are injected with",
        "botocore's before-call and before-send hooks; the hostile requests, schemathesis and the load test",
        f"({LOAD_SECONDS} s of 64 clients) over real HTTP against the stack `make run` starts. The stateful",
        "test runs in four seeded shards and counts Hypothesis examples, replays while shrinking included.",
        f"The restarts: {KILLS} kills (`kill -9` of the process group) of a stack with BINDERY_DATA_DIR, at",
        "random moments, three in four under load and one in four while it starts; after each restart every",
        "caller's feed holds exactly one event per terminal transition the table records.",
        "",
    ]
    (ROOT / "docs" / "RELIABILITY.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
