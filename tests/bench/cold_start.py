"""2. Cold start: each handler's fresh process against bare boto3 making the same calls.

A handler's import and first invoke against the same AWS calls made with bare boto3 (the floor), and
Bindery's poll against the usual way's (tests/bench/usual_handler.py): in wall time, the median of a few
runs, and in instructions (tests/bench/aws.py's `instructions`), which the budgets hold.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bench.aws import PY, ROOT, child_env, instructions, local_service
from tests.bench.report import record, say

HANDLERS = ["submit", "poll", "build_worker", "expiry_gc", "stale_sweep"]
COLD_RUNS = int(os.environ.get("BINDERY_BENCH_COLD_RUNS", "7"))

# A handler's cold start over the floor's, a guard against regressions, counted in instructions: the wall
# time's ratio moved more from run to run than these budgets' margins (poll's 1.32-1.87 for the same code, its
# import's CPU time 307-463 ms), where a count is the same to a few parts in a million. The budgets are the
# ones first set on wall time, a sixth over what it measured then; the counts of 2026-12-06 sit under each
# (submit 1.49, poll 1.72, the worker 1.58, expiry_gc 1.53, stale_sweep 1.36), so any import a handler
# gains shows. Of submit's, the storage types' 29 frozen dataclasses are about 30 ms (Python 3.11 compiles
# each method apart). The floor loads no Powertools: the poll's resolver package brings asyncio (through its
# AppSync resolver), as the worker's batch utility does, and the worker's first invoke also imports and runs
# a renderer.
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


def measure() -> None:
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
        ex = local_service(endpoint, endpoint, max_live_exports=1_000_000)
        import boto3

        boto3.client("dynamodb").create_table(
            TableName="bindery-idempotency",  # the usual way's own table
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        env = child_env(
            AWS_ENDPOINT_URL=endpoint,
            BINDERY_TABLE=ex.settings.table,
            BINDERY_BUCKET=ex.settings.bucket,
            BINDERY_MAX_LIVE_EXPORTS="1000000",
            POWERTOOLS_SERVICE_NAME="bindery",
        )
        book, _, _ = ex.books.create_book("bench-user", "Cold", "# One\n\ntext\n\n# Two\n\nmore\n")
        ready = ex.exports.submit("bench-user", book.id, "html", None)[0]["id"]
        ex.builds.build(book.id, ready)
        poll = http_event("GET", f"/books/{book.id}/exports/{ready}", caller="bench-user")
        events: dict[str, Callable[[], dict[str, Any]]] = {
            "submit": lambda: http_event(
                "POST", f"/books/{book.id}/exports", caller="bench-user", body={"format": "html"}
            ),
            "poll": lambda: poll,
            # a new pending export each time: a first invoke that builds
            "build_worker": lambda: sqs_event_for(
                book.id, ex.exports.submit("bench-user", book.id, "html", None)[0]["id"]
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
        # Once each, counted: the handler, its floor, and a probe that does neither (the process's own start).
        probe = [PY, str(ROOT / "tests/bench/coldstart_probe.py")]
        commands = {"none": [*probe, "none"]}
        for name, module in modules.items():
            event = tmp / f"{name}-counted.json"
            event.write_text(json.dumps(events[name]()))
            commands[name] = [*probe, "handler", module, str(event)]
            commands[f"{name} floor"] = [*probe, "replay", str(tmp / f"{name}-calls.json")]
        counts = instructions(commands, env)
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
        )
        mine, bare = counts[name] - counts["none"], counts[f"{name} floor"] - counts["none"]
        ratio = mine / bare
        record(
            "cold start",
            f"{label}, in instructions: {mine / 1e6:.0f} million / bare boto3's {bare / 1e6:.0f} million",
            f"{ratio:.2f}",
            *(("", None) if name == "usual" else (f"≤ {COLD_BUDGET[name]:.2f}", ratio <= COLD_BUDGET[name])),
        )
    poll, usual = counts["poll"] - counts["none"], counts["usual"] - counts["none"]
    record(
        "cold start",
        "bindery poll / usual way poll, in instructions",
        f"{poll / usual:.2f}",
        "< 1",
        poll < usual,
    )
