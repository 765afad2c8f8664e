"""64 concurrent clients against the local stack over real HTTP: mixed traffic (create books, submit with
and without keys, poll, download, cancel), bounded in count and in time, to 127.0.0.1 only.

`make test` runs a short smoke of it (BINDERY_LOAD_SECONDS, 5 s); `make reliability` runs it for 60 s and
publishes requests per second and p50 / p99 per route. Every connection is answered (no reset), no answer
is a 5xx, and the five promises hold once the builds it started have ended.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from bindery_local import tokens
from tests.e2e.stack import RunningStack, promises_broken, start
from tests.figures import record
from tests.servers import free_port

CLIENTS = 64
SECONDS = float(os.environ.get("BINDERY_LOAD_SECONDS", "5"))
MAX_REQUESTS_PER_CLIENT = 2_000
MANUSCRIPT = "# One\n\nfirst\n\n# Two\n\nsecond\n"


@pytest.fixture(scope="module")
def stack() -> Iterator[RunningStack]:
    running = start(free_port(), BINDERY_LOCAL_SWEEP_SECONDS="2")
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            running.stop()


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    resets: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    keyed: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    lock: threading.Lock = field(default_factory=threading.Lock)


def _client(api: str, n: int, window: dict[str, float], tally: Tally, barrier: threading.Barrier) -> None:
    user = f"load-{n}-{uuid.uuid4().hex[:6]}"
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {tokens.mint(user)}"

    def call(route: str, method: str, url: str, **kw: Any) -> requests.Response | None:
        started = time.perf_counter()
        try:
            answer = session.request(method, url, timeout=60, **kw)
        except requests.ConnectionError as exc:
            with tally.lock:
                tally.resets.append(f"{route}: {exc}")
            return None
        elapsed = time.perf_counter() - started
        with tally.lock:
            tally.latencies[route].append(elapsed)
            tally.statuses[answer.status_code] += 1
            if answer.status_code >= 500:
                tally.server_errors.append(f"{route} {answer.status_code} {answer.text[:200]}")
        return answer

    made = call("POST /books", "POST", f"{api}/books", json={"title": user, "manuscript": MANUSCRIPT})
    barrier.wait()  # every client has its book: the timed traffic starts together
    if made is None or made.status_code != 201:
        return
    book = made.json()["id"]
    exports: list[str] = []
    for i in range(MAX_REQUESTS_PER_CLIENT):
        if time.monotonic() > window["until"]:
            break
        step = (i + n) % 6  # the clients start at different steps, so every route is busy at once
        if step in (0, 1):
            key = f"{user}-{i // 12}" if step == 1 else None
            headers = {"Idempotency-Key": key} if key else {}
            answer = call(
                "POST /books/{id}/exports",
                "POST",
                f"{api}/books/{book}/exports",
                json={"format": "markdown" if i % 4 else "html"},
                headers=headers,
            )
            if answer is not None and answer.status_code == 202:
                exports.append(answer.json()["id"])
                if key:
                    with tally.lock:
                        tally.keyed[key].add(answer.json()["id"])
        elif step in (2, 3) and exports:
            polled = call("GET /books/{id}/exports/{id}", "GET", f"{api}/books/{book}/exports/{exports[-1]}")
            url = polled.json().get("download_url") if polled is not None and polled.ok else None
            if url:
                call("GET download", "GET", url)
        elif step == 4 and exports:
            call("DELETE /books/{id}/exports/{id}", "DELETE", f"{api}/books/{book}/exports/{exports.pop(0)}")
        else:
            call("GET /books/{id}", "GET", f"{api}/books/{book}")
    session.close()


def found_ids(found: list[str]) -> list[str]:
    return [word for line in found for word in line.split() if len(word) == 21 and word.startswith("1a")]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.slow(25)
def test_64_concurrent_clients_get_every_answer_no_5xx_and_the_promises_hold(stack: RunningStack) -> None:
    tally = Tally()
    window: dict[str, float] = {}

    def open_window() -> None:
        window["from"] = time.monotonic()
        window["until"] = window["from"] + SECONDS

    barrier = threading.Barrier(CLIENTS, action=open_window)
    threads = [
        threading.Thread(target=_client, args=(stack.api, n, window, tally, barrier), daemon=True)
        for n in range(CLIENTS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=SECONDS + 180)
    assert not any(t.is_alive() for t in threads), "a client never finished"
    elapsed = time.monotonic() - window["from"]

    total = sum(len(v) for v in tally.latencies.values())
    record(f"load, {CLIENTS} clients for {SECONDS:g} s: requests answered", total)
    record(f"load, {CLIENTS} clients: requests per second", round(total / elapsed, 1))
    record(f"load, {CLIENTS} clients: connections reset or refused", len(tally.resets))
    record(f"load, {CLIENTS} clients: 5xx answers", len(tally.server_errors))
    for route, values in sorted(tally.latencies.items()):
        p50, p99 = _percentile(values, 0.5) * 1000, _percentile(values, 0.99) * 1000
        record(f"load: {route}: requests, p50 / p99 ms", f"{len(values)}, {p50:.0f} / {p99:.0f}")
    print(
        f"\nload: {total} requests in {elapsed:.1f} s ({total / elapsed:.0f}/s), "
        f"statuses {dict(tally.statuses)}"
    )
    assert tally.resets == [] and tally.server_errors == []
    assert len(tally.latencies["POST /books"]) == CLIENTS  # every client was answered its book
    assert total >= 2 * CLIENTS  # and got at least one answer in the window

    # Once every build it started has ended, the promises hold.
    found = promises_broken(stack, key_answers=tally.keyed)
    record(f"load, {CLIENTS} clients: promises broken once its builds ended", len(found))
    retried = [line for line in stack.lines if "build will be retried" in line]
    record(f"load, {CLIENTS} clients: builds that asked for a retry", len(retried))
    stuck = [line for line in stack.lines if any(f in line for f in found_ids(found))]
    refused = [line for line in stack.lines if "claim refused" in line or "dropping a message" in line]
    assert found == [], "\n".join(
        [*found, "retries:", *retried[:10], "refusals:", *refused[:10], "their lines:", *stuck[:30]]
    )
