"""5. Sweeps read the work, not the table: items read over items due, up to 100,000 rows.

On tables of 1,000, 10,000 and 100,000 rows with 100 due per queue, the items the stale sweep and the GC
read over the items due.
"""

from __future__ import annotations

import time
from typing import Any

from tests.bench.aws import local_service
from tests.bench.report import record, say


def measure() -> None:
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


def _sweep_scale(ddb: str, s3: str, rows: int) -> None:
    import boto3

    from tests.calls import recording

    ex = local_service(ddb, s3)
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
        stale = ex.schedules.fail_stale_exports()
        expired = ex.schedules.expire_lapsed_links()
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
