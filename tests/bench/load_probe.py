"""The local stack under load (issue 29, item 5), against the same handlers called in-process.

The workload: each client is its own caller (a token of its own) with a book of its own, and goes round
one cycle as fast as it is answered: create an html export, poll it until it is ready (every POLL_EVERY
seconds, as Bindery's client does), read the book, list its exports. Its requests go over HTTP to
`make run`'s stack (python -m bindery_local), each client on a kept-alive connection of its own, to
127.0.0.1 only. Books are made before the clock starts, and the first
WARM_SECONDS of traffic are not counted: that is when the functions' instances start and the first wave
of exports (every client's at once) is built, and what is measured is the stack once it is past them.

The in-process limit: one process, one thread, moto in-process (`mock_aws`, no HTTP, with the same
patches as the embedded AWS), and the same handlers called directly with the events the stack gives them:
the API events the gateway builds (`gateway.to_event`, after the same token check) for submit and poll,
both pipes stepped in-process, and every queue's messages handed to its function (the build worker, the
webhook ingest) as the event source mapping hands them. It goes round the same cycle over as many books,
one at a time, polling once the build is done: every handler's work with nothing around it, on one core.
Its requests per second are this machine's limit for those handlers, one at a time; the stack, with its
instances side by side on both cores, must reach at least half of it.

`python -m tests.bench.load_probe` runs it alone and prints the figures; `make bench` runs it as its
"local stack" section. BINDERY_BENCH_LOAD_SECONDS sets each measured window (default 20).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SECONDS = float(os.environ.get("BINDERY_BENCH_LOAD_SECONDS", "20"))
# 4 s left the first wave of 64 builds inside an 8 s window: 2 requests/s, an artefact of the start.
WARM_SECONDS = float(os.environ.get("BINDERY_BENCH_WARM_SECONDS", "10"))
MANY, FEW = 64, 8
# A pending export is polled again after this long, as Bindery's own client polls (`Bindery.wait`, which
# `bindery export --wait` and `make demo` use). Polled with no pause, 64 callers' polls are a flood that
# measures how the stack shares itself out, not a caller's workload (docs/BENCHMARKS.md says what it did).
POLL_EVERY = float(os.environ.get("BINDERY_BENCH_POLL_SECONDS", "1.0"))
MANUSCRIPT = "# One\n\nThe first chapter.\n\n# Two\n\nThe second chapter.\n"
ROUTES = (
    "POST /books/{id}/exports",
    "GET /books/{id}/exports/{id}",
    "GET /books/{id}",
    "GET /books/{id}/exports",
)
Record = Callable[..., None]


@dataclass
class Load:
    clients: int
    seconds: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    exports_ready: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values())

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile_ms(self, route: str, q: float) -> float:
        ordered = sorted(self.latencies[route])
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- over HTTP, against `make run`'s stack ----------------------------------------------------------


class _Caller:
    """One client: its own token, its own book, its own kept-alive connection."""

    def __init__(self, port: int) -> None:
        from bindery_local import tokens

        self.port = port
        key = tokens.secret(f"http://127.0.0.1:{port}")  # BINDERY_JWT_SECRET, or the one the stack keeps
        self.auth = f"Bearer {tokens.mint(f'load-{uuid.uuid4().hex[:10]}', key=key)}"
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        made = self.call("POST", "/books", {"title": "Load", "manuscript": MANUSCRIPT})
        self.book = str(made["id"])

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": self.auth, "Content-Type": "application/json"}
        self.conn.request(method, path, body=payload, headers=headers)
        answer = self.conn.getresponse()
        data = answer.read()
        if answer.status >= 300:
            raise RuntimeError(f"{method} {path}: {answer.status} {data[:200]!r}")
        found: dict[str, Any] = json.loads(data) if data else {}
        return found


def _cycles(caller: _Caller, load: Load, window: dict[str, float], lock: threading.Lock) -> None:
    def timed(route: str, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        started = time.monotonic()
        answer = caller.call(method, path, body)
        ended = time.monotonic()
        if window["from"] <= started and ended <= window["until"]:
            with lock:
                load.latencies[route].append(ended - started)
        return answer

    book = f"/books/{caller.book}"
    try:
        while time.monotonic() < window["until"]:
            export = timed(ROUTES[0], "POST", f"{book}/exports", {"format": "html"})
            state = export.get("state")
            while state not in ("ready", "failed") and time.monotonic() < window["until"]:
                state = timed(ROUTES[1], "GET", f"{book}/exports/{export['id']}").get("state")
                if state not in ("ready", "failed"):
                    time.sleep(POLL_EVERY)
            if state == "failed":
                raise RuntimeError(f"export {export['id']} failed")
            timed(ROUTES[2], "GET", book)
            timed(ROUTES[3], "GET", f"{book}/exports")
            if state == "ready" and time.monotonic() <= window["until"]:
                with lock:
                    load.exports_ready += 1
    except Exception as exc:
        with lock:
            load.failures.append(repr(exc))


def drive(port: int, clients: int, seconds: float) -> Load:
    """`clients` callers at once for WARM_SECONDS, then `seconds` counted."""
    load, lock = Load(clients), threading.Lock()
    callers = [_Caller(port) for _ in range(clients)]
    now = time.monotonic()
    window = {"from": now + WARM_SECONDS, "until": now + WARM_SECONDS + seconds}
    threads = [threading.Thread(target=_cycles, args=(c, load, window, lock)) for c in callers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WARM_SECONDS + seconds + 180)
    load.seconds = seconds
    for caller in callers:
        caller.conn.close()
    return load


class _Stack:
    """`make run`'s stack on free ports, its output kept aside (one line a request)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.log = tempfile.NamedTemporaryFile("w+", prefix="bindery-load-", suffix=".log")  # noqa: SIM115
        env = {**os.environ, "PORT": str(self.port), "BINDERY_MOTO_PORT": "0"}
        env = {k: v for k, v in env.items() if not k.startswith("AWS_ENDPOINT_URL")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bindery_local"],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while "Ctrl-C stops everything." not in Path(self.log.name).read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError("the stack did not start:\n" + Path(self.log.name).read_text()[-3000:])
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.log.close()


# ---- in-process, without HTTP -----------------------------------------------------------------------


def _in_process(seconds: float, books: int) -> Load:
    """The handlers called directly, one at a time, in this process, against moto in-process."""
    import boto3
    from moto import mock_aws

    from bindery_local import aws, resources, template, tokens
    from bindery_local.context import LambdaContext
    from bindery_local.gateway import to_event
    from bindery_local.pipes import from_template

    for key, value in template.global_environment().items():
        os.environ.setdefault(key, value)
    os.environ.update(BINDERY_TABLE="bindery", BINDERY_BUCKET="bindery-artifacts")
    # In-process moto serves DynamoDB Streams at its regional endpoint, not at an account's.
    os.environ["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"
    load = Load(books)
    with mock_aws():
        aws.records_are_not_copied()
        aws.transactions_undo_their_own_items()
        aws.dynamodb_answers_are_dumped_as_they_are()
        aws.streams_read_the_live_table()
        urls = resources.ensure("bindery", "bindery-artifacts")
        for variable, queue in template.queue_environment().items():
            os.environ[variable] = urls[queue]
        import importlib

        handlers = {n: importlib.import_module(f"functions.{n}.app").handler for n in template.functions()}
        routes = {(r.method, r.path): r for r in template.routes()}
        key = tokens.secret_for_this_run()
        pipes = from_template("bindery", urls["BuildQueue"], None, lambda line: None)
        sqs = boto3.client("sqs")
        consumers = [(c, urls[c.queue]) for c in template.queue_consumers()]

        def api(method: str, pattern: str, path: str, auth: str, body: dict[str, Any] | None) -> Any:
            route = routes[method, pattern]
            params = route.match(method, path) or {}
            claims = tokens.verify(auth, key)  # the gateway's check, as the stack makes it
            raw = json.dumps(body).encode() if body is not None else b""
            headers = {"authorization": auth, "content-type": "application/json", "host": "127.0.0.1"}
            event = to_event(route, params, method, path, headers, raw, claims, "127.0.0.1")
            answer = handlers[route.function](event, LambdaContext(route.function, timeout_ms=300_000))
            if int(answer["statusCode"]) >= 300:
                raise RuntimeError(f"{method} {path}: {answer['statusCode']} {answer.get('body', '')[:200]}")
            return json.loads(answer.get("body") or "{}")

        def deliver() -> None:
            """Both pipes, then every queue's messages to its function, until nothing is left to hand on."""
            moved = True
            while moved:
                moved = False
                for pipe in pipes:
                    pipe.step()
                for consumer, url in consumers:
                    messages = sqs.receive_message(
                        QueueUrl=url, MaxNumberOfMessages=consumer.batch_size, AttributeNames=["All"]
                    ).get("Messages", [])
                    if not messages:
                        continue
                    moved = True
                    records = [
                        {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                         "attributes": m.get("Attributes", {}), "messageAttributes": {},
                         "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs", "eventSourceARN": url,
                         "awsRegion": "us-east-1"}
                        for m in messages
                    ]  # fmt: skip
                    context = LambdaContext(consumer.function, timeout_ms=300_000)
                    result = handlers[consumer.function]({"Records": records}, context)
                    failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
                    for m in messages:
                        if m["MessageId"] not in failed:
                            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

        callers = []
        for _ in range(books):
            auth = f"Bearer {tokens.mint(f'load-{uuid.uuid4().hex[:10]}', key=key)}"
            made = api("POST", "/books", "/books", auth, {"title": "Load", "manuscript": MANUSCRIPT})
            callers.append((auth, f"/books/{made['id']}"))
        deliver()

        def timed(route: str, *call: Any) -> Any:
            started = time.monotonic()
            answer = api(*call)
            if counting:
                load.latencies[route].append(time.monotonic() - started)
            return answer

        counting, started, n = False, time.monotonic(), 0
        while time.monotonic() < started + WARM_SECONDS + seconds:
            counting = time.monotonic() >= started + WARM_SECONDS
            auth, book = callers[n % books]
            n += 1
            export = timed(
                ROUTES[0], "POST", "/books/{bookId}/exports", f"{book}/exports", auth, {"format": "html"}
            )
            deliver()  # the pipe, the build worker, the events' pipe and the webhook ingest
            path = f"{book}/exports/{export['id']}"
            state = timed(ROUTES[1], "GET", "/books/{bookId}/exports/{exportId}", path, auth, None)["state"]
            if state != "ready":
                raise RuntimeError(f"export {export['id']} is {state} after its build")
            timed(ROUTES[2], "GET", "/books/{bookId}", book, auth, None)
            timed(ROUTES[3], "GET", "/books/{bookId}/exports", f"{book}/exports", auth, None)
            load.exports_ready += counting
        load.seconds = time.monotonic() - started - WARM_SECONDS
    return load


def in_process(seconds: float, books: int) -> Load:
    """`_in_process` in a process of its own (its handlers' logs to /dev/null), as a Load."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
        env.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                   AWS_REGION="us-east-1", POWERTOOLS_METRICS_DISABLED="true")  # fmt: skip
        probe = [sys.executable, "-m", "tests.bench.load_probe", "in-process", str(seconds), str(books)]
        subprocess.run([*probe, out.name], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        found = json.loads(Path(out.name).read_text())
    load = Load(books, found["seconds"], defaultdict(list, found["latencies"]), found["exports_ready"])
    return load


# ---- moto's transaction, before and after `transactions_undo_their_own_items` ----------------------

TABLE_ITEMS, TRANSACTIONS = 1_000, 100


def _transaction_ms(undo_own_items: bool) -> float:
    """A 3-item TransactWriteItems on a table of TABLE_ITEMS items, in-process moto, ms each."""
    import boto3
    from moto import mock_aws

    from bindery_local import aws, template

    os.environ["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"
    with mock_aws():
        aws.records_are_not_copied()
        if undo_own_items:
            aws.transactions_undo_their_own_items()
        client = boto3.client("dynamodb", region_name="us-east-1")
        template.create_table(client, "t")
        for n in range(TABLE_ITEMS):
            item = {"pk": {"S": f"BOOK#{n % 50}"}, "sk": {"S": f"EXPORT#{n}"}, "v": {"S": "x" * 300}}
            client.put_item(TableName="t", Item=item)
        started = time.perf_counter()
        for n in range(TRANSACTIONS):
            key = {"pk": {"S": "BOOK#1"}, "sk": {"S": "EXPORT#1"}}
            client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": "t", "Item": {"pk": {"S": "NEW"}, "sk": {"S": f"N#{n}"}},
                             "ConditionExpression": "attribute_not_exists(pk)"}},
                    {"Update": {"TableName": "t", "Key": key, "UpdateExpression": "SET c = :c",
                                "ExpressionAttributeValues": {":c": {"N": str(n)}}}},
                    {"Put": {"TableName": "t", "Item": {"pk": {"S": "NEW2"}, "sk": {"S": f"N#{n}"}}}},
                ]
            )  # fmt: skip
        return (time.perf_counter() - started) / TRANSACTIONS * 1000


def transaction_ms(undo_own_items: bool) -> float:
    """`_transaction_ms` in a process of its own: moto's own transaction cannot come back once patched."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    kind = "after" if undo_own_items else "before"
    probe = [sys.executable, "-m", "tests.bench.load_probe", "transaction", kind]
    out = subprocess.run(probe, cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


# ---- the figures ------------------------------------------------------------------------------------


def measure(record: Record, say: Callable[..., None] = print) -> None:
    """Every figure of the section, in one run: the in-process limit, then the stack at 64 and 8 clients."""
    section = "local stack"
    load_before = os.getloadavg()
    before, after = transaction_ms(False), transaction_ms(True)
    record(
        section,
        f"moto: a 3-item transaction at {TABLE_ITEMS:,} items, ms: table copied per item / own items undone",
        f"{before:.1f} / {after:.1f}",
    )
    limit = in_process(SECONDS, MANY)
    stack = _Stack()
    try:
        many = drive(stack.port, MANY, SECONDS)
        few = drive(stack.port, FEW, SECONDS)
    finally:
        stack.stop()
    load_after = os.getloadavg()
    say(f"  load average before / after: {load_before[0]:.2f} / {load_after[0]:.2f}")
    record(
        section,
        f"in-process limit: the handlers one at a time, no HTTP ({MANY} books), requests/s",
        f"{limit.per_second:.0f}",
    )
    record(
        section,
        "in-process limit: html exports ready per second",
        f"{limit.exports_ready / limit.seconds:.1f}",
    )
    for load in (many, few):
        record(
            section,
            f"the stack, {load.clients} clients for {load.seconds:g} s: requests/s (exports ready/s)",
            f"{load.per_second:.0f} ({load.exports_ready / load.seconds:.1f})",
        )
        if load.failures:
            failed = f"{len(load.failures)}: {load.failures[0]}"
            record(section, f"{load.clients} clients: failed callers", failed, "0", False)
    ratio = many.per_second / limit.per_second if limit.per_second else 0.0
    record(
        section, f"requests/s at {MANY} clients / the in-process limit", f"{ratio:.2f}", "≥ 0.5", ratio >= 0.5
    )
    scale = many.per_second / few.per_second if few.per_second else 0.0
    record(section, f"requests/s at {MANY} clients / at {FEW}", f"{scale:.2f}", "≥ 1.0", scale >= 1.0)
    for route in ROUTES:
        p50, p99 = many.percentile_ms(route, 0.5), many.percentile_ms(route, 0.99)
        spread = p99 / p50 if p50 else float("inf")
        record(
            section,
            f"{MANY} clients, {route}: p50 / p99 ms ({len(many.latencies[route])} requests), p99 / p50",
            f"{p50:.0f} / {p99:.0f}, {spread:.1f}",
            "p99 ≤ 3 × p50",
            spread <= 3.0,
        )
        in_p50 = limit.percentile_ms(route, 0.5)
        record(section, f"in-process, {route}: p50 ms", f"{in_p50:.1f}")
    record(
        section,
        "load average (1 min) before / after the section",
        f"{load_before[0]:.2f} / {load_after[0]:.2f}",
    )


def _standalone_record(section: str, name: str, value: str, budget: str = "", ok: bool | None = None) -> None:
    verdict = "info" if ok is None else ("pass" if ok else "FAIL")
    print(f"| {name} | {value} | {budget} | {verdict} |", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["transaction"]:
        print(f"{_transaction_ms(sys.argv[2] == 'after'):.3f}")
    elif sys.argv[1:2] == ["in-process"]:
        seconds, books, out = float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        done = _in_process(seconds, books)
        Path(out).write_text(
            json.dumps(
                {"seconds": done.seconds, "latencies": done.latencies, "exports_ready": done.exports_ready}
            )
        )
    else:
        measure(_standalone_record)
