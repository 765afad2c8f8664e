"""3. Warm handler overhead, poll and submit against their raw boto3 calls; 6. the cost.

Against DynamoDB Local, median of 300 each; the cost per 1,000 exports (tests/bench/cost.py) is priced
from the durations measured here.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from tests.bench import cost
from tests.bench.aws import local_service, servers_here
from tests.bench.report import record, say


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


def measure() -> None:  # and cost
    import boto3

    from functions.poll import app as poll
    from functions.submit import app as submit
    from tests.conftest import FakeContext
    from tests.events import http_event

    with servers_here() as (ddb, s3):
        say("\n3. Warm handler overhead against DynamoDB Local: median of 300, handler / raw boto3")
        ex = local_service(ddb, s3, max_live_exports=1_000_000, max_live_exports_total=10**9)
        book, _, _ = ex.books.create_book("bench-user", "Warm", "# One\n\ntext\n")
        export_id = ex.exports.submit("bench-user", book.id, "html", None)[0]["id"]
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

        handler_ms, raw_ms = _paired_medians_ms(lambda: poll.handler(get, ctx, services=ex.api), raw_poll)
        poll_ms = handler_ms
        record(
            "warm",
            f"poll: {handler_ms:.2f} ms / raw TransactGetItems + GetItem {raw_ms:.2f} ms",
            f"{handler_ms / raw_ms:.2f}",
            "≤ 1.30",
            handler_ms / raw_ms <= 1.3,
        )
        post = http_event("POST", f"/books/{book.id}/exports", caller="bench-user", body={"format": "html"})

        # The raw side sends exactly the transaction the handler sends (captured), with a fresh id.
        captured: list[Any] = []

        def capture(params: dict[str, Any], **_: Any) -> None:
            captured.append(json.loads(json.dumps(params)))

        ex.store.client.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", capture)
        submit.handler(post, ctx, services=ex.api)
        ex.store.client.meta.events.unregister("provide-client-params.dynamodb.TransactWriteItems", capture)
        template_request = json.dumps(captured[0])
        seen_id = captured[0]["TransactItems"][1]["Put"]["Item"]["export_id"]["S"]

        def raw_submit() -> None:
            request = json.loads(template_request.replace(seen_id, uuid.uuid4().hex[:21]))
            request["ClientRequestToken"] = uuid.uuid4().hex  # as the handler sends: fresh each try
            raw.transact_write_items(**request)
            raw.get_item(TableName=table, Key=live)  # the RateLimit-* fields' read

        handler_ms, raw_ms = _paired_medians_ms(
            lambda: submit.handler(post, ctx, services=ex.api), raw_submit
        )
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
            build_id = ex.exports.submit("bench-user", big.id, "html", None)[0]["id"]
            started = time.perf_counter()
            ex.builds.build(big.id, build_id)
            builds.append(time.perf_counter() - started)
        cost.measure(
            local_service(ddb, s3),
            manuscript,
            submit_ms=handler_ms,
            poll_ms=poll_ms,
            build_s=statistics.median(builds),
        )
