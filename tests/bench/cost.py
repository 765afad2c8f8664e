"""6. Cost per 1,000 exports of a ~1 MB book: DynamoDB's units and S3's requests counted from a recorded
lifecycle (tests/bench/ledger.py), Lambda's GB-seconds from the durations tests/bench/warm.py measured,
at us-east-1 list prices; and the same lifecycle priced as a Step Functions workflow."""

from __future__ import annotations

import time
from typing import Any

from tests.bench.report import record, say

LIFECYCLE_EXPORTS, POLLS = 10, 3


def _counted_lifecycle(live: Any, manuscript: str) -> dict[str, Any]:
    """On a table of its own: ten exports of one book, each from submit to its link's lapse and its bytes'
    unlinking, with every call booked to its phase by a Ledger: the cost's inputs, counted. The clock is a
    fake one started now, so that the sweeps find the links lapsed without waiting a day (DynamoDB Local's
    TTL sees only times to come). Also one run of each sweep with nothing to do: what the schedules cost
    when idle."""
    from tests.bench.ledger import Ledger
    from tests.services import wired

    now = [time.time()]  # (not tests.conftest's FakeClock: importing it clears the endpoints set above)
    ex = wired(live.settings, live.store, live.objects, lambda: now[0])
    settings = ex.settings
    book, _, _ = ex.books.create_book("cost-user", "Counted", manuscript)
    with Ledger(ex.store.client, ex.objects.client) as ledger:
        ids = []
        for _ in range(LIFECYCLE_EXPORTS):
            with ledger.phase("submit"):
                ids.append(ex.exports.submit("cost-user", book.id, "html", None)[0]["id"])
            with ledger.phase("poll"):
                ex.exports.read("cost-user", book.id, ids[-1])  # pending
            with ledger.phase("build"):
                ex.builds.build(book.id, ids[-1])
            with ledger.phase("poll"):
                for _ in range(POLLS - 1):
                    assert ex.exports.read("cost-user", book.id, ids[-1])["state"] == "ready"
        now[0] += settings.link_ttl_seconds + settings.lease_seconds + settings.retry_grace_seconds + 1
        with ledger.phase("sweeps"):
            gc = ex.schedules.collect_garbage()
            ex.schedules.fail_stale_exports()
        assert gc["expired"] == gc["unlinked"] == LIFECYCLE_EXPORTS, gc
        with ledger.phase("idle sweeps"):
            ex.schedules.collect_garbage()
            ex.schedules.fail_stale_exports()
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


def measure(live: Any, manuscript: str, *, submit_ms: float, poll_ms: float, build_s: float) -> None:
    """The cost's figures: `live` is a service on a table of its own, the durations are the warm run's."""
    phases = _counted_lifecycle(live, manuscript)
    _cost(phases, submit_ms=submit_ms, poll_ms=poll_ms, build_s=build_s, mb=len(manuscript.encode()) / 2**20)
