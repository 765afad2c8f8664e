"""`make run`: moto's server as the embedded AWS, the API on 127.0.0.1, the two pipes (`bindery_local.pipes`),
the bus's rules, every queue's consumer (the build worker, the webhook ingest and sender) and the schedules
(the sweeps), all wired from template.yaml and all calling the real handlers.

Each Lambda function is invoked one event at a time, as one Lambda instance would be: the handlers'
module state (Powertools' resolver, the batch processor) is per-process in Lambda, so here a lock per
function keeps two events from sharing it at once. The embedded AWS is `bindery_local.aws`: moto's server,
with DynamoDB made atomic under concurrent requests.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bindery_local import resources, template, tokens
from bindery_local.context import LambdaContext
from bindery_local.pipes import from_template

TABLE = "bindery"
BUCKET = "bindery-artifacts"
DEMO_USER = "demo-user"
# Everything a stop does (servers shut, threads joined, moto stopped) fits in this, or is cut off with the
# process: what a cut-off build or sweep did not finish, leases and sweeps take up at the next start.
STOP_DEADLINE_SECONDS = 5.0
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
RECORDING = "moto-recording.jsonl"
# Requests that change nothing in a replay; a recording keeps only the others, so a restart replays state,
# not polls. A receipt handle is moto's random answer to a receive, and receives are not replayed: a
# replayed delete or visibility change names a handle the replay never gave out, and changes nothing.
_READS = {
    "GetItem", "Query", "Scan", "TransactGetItems", "BatchGetItem", "DescribeTable", "ListTables",
    "DescribeTimeToLive", "DescribeStream", "GetShardIterator", "GetRecords", "ListStreams",
    "ReceiveMessage", "GetQueueUrl", "GetQueueAttributes", "ListQueues",
    "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
}  # fmt: skip


def log(message: str) -> None:
    stamp = datetime.now(UTC).strftime("%H:%M:%S")
    print(f"{stamp} {message}", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_invoking = threading.local()


def _pin_hosts() -> None:
    """BINDERY_LOCAL_HOSTS='{"intranet.bindery.test": "10.0.0.5"}': names this process resolves to the given
    addresses, as a DNS server would, so a test can register a name that resolves to a private address
    (there is no DNS here). Only the listed names change; this is the local stack's, never a deployment's."""
    pinned = {k.lower(): v for k, v in json.loads(os.environ.get("BINDERY_LOCAL_HOSTS") or "{}").items()}
    resolve = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.rstrip(".").lower() if isinstance(host, str) else host
        return resolve(pinned.get(name, host), *args, **kwargs)

    if pinned:
        socket.getaddrinfo = getaddrinfo


class Functions:
    """The template's handlers, each imported here, on the main thread, and invoked one event at a time.

    Imported before anything can invoke one. Imported on first use instead, by a request's thread and a
    queue consumer's at once, two handlers' imports of Powertools crossed (each held a module the other
    needed) and Python handed one a partly initialised module: `cannot import name 'SQSEvent' from
    partially initialized module`, a 500 right after a restart (issue 28). What a call still imports on
    first use (a renderer, the markdown parser, imagesize) it imports holding no other import, so it can
    wait for another thread's import of the same module, never cross it."""

    def __init__(self, names: list[str]) -> None:
        self._modules = {name: importlib.import_module(f"functions.{name}.app") for name in names}
        self._locks = {name: threading.Lock() for name in names}

    def invoke(self, name: str, event: dict[str, Any]) -> dict[str, Any]:
        with self._locks[name]:
            _invoking.function = name
            try:
                result: dict[str, Any] = self._modules[name].handler(
                    event, LambdaContext(name, timeout_ms=300_000)
                )
            finally:
                _invoking.function = None
        return result


def _configure_environment(endpoint: str) -> None:
    """What the deployed stack's Globals give every function, pointed at the embedded AWS. A variable the
    caller already set wins, so `BINDERY_LINK_TTL_SECONDS=5 make run` shortens links."""
    for key, value in template.global_environment().items():
        os.environ.setdefault(key, value)
    os.environ.update(AWS_ENDPOINT_URL=endpoint)
    for key, value in {
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "BINDERY_TABLE": TABLE,
        "BINDERY_BUCKET": BUCKET,
        "POWERTOOLS_METRICS_DISABLED": "true",
    }.items():
        os.environ.setdefault(key, value)


class _OneLine(logging.Formatter):
    """Locally, each of the handlers' JSON log records as one short line: time, message, the ids."""

    KEYS = (
        "export_id", "book_id", "attempt", "failure_code", "size_bytes", "chapters", "keys", "reason",
        "expired", "unlinked", "unlink_failures", "failed", "refused", "errors",
        "endpoint", "seq", "status", "error", "latency_ms", "state", "resent", "withdrawn", "message_id",
    )  # fmt: skip

    def __init__(self, json_formatter: logging.Formatter):
        super().__init__()
        self._json = json_formatter

    def __getattr__(self, name: str) -> Any:
        # Powertools talks to its formatter (append_keys, remove_keys ...): pass all of that through.
        return getattr(self._json, name)

    def format(self, record: logging.LogRecord) -> str:
        entry = json.loads(self._json.format(record))
        fields = " ".join(f"{k}={entry[k]}" for k in self.KEYS if entry.get(k) is not None)
        level = "" if entry.get("level") == "INFO" else f"{entry.get('level')} "
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        # Powertools keeps one Lambda context per process; here five functions share the process, so the
        # function's name comes from the thread that is invoking it.
        function = getattr(_invoking, "function", "") or entry.get("function_name", "")
        line = f"{stamp} {level}{function}: {entry.get('message')} {fields}".rstrip()
        if entry.get("exception"):
            line += "\n" + str(entry["exception"])
        return line


def _quiet_logs() -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server would log every AWS call
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    from bindery.observability import logger

    handler = logger.registered_handler
    handler.setFormatter(_OneLine(handler.formatter))  # type: ignore[arg-type]


def _is_write(entry: dict[str, Any]) -> bool:
    if entry.get("method") in ("GET", "HEAD"):
        return False
    headers = {k.lower(): v for k, v in (entry.get("headers") or {}).items()}
    target = str(headers.get("x-amz-target", ""))
    return target.rsplit(".", 1)[-1] not in _READS


def _recorded(lines: list[str]) -> list[dict[str, Any]]:
    """The recording's entries. A last line that does not parse was torn by a crash (`kill -9`) while moto
    wrote it, and moto records a request before it applies it: that request was never applied nor answered,
    so it is dropped. A torn line anywhere else is damage, and stops the start rather than lose state."""
    entries = []
    for n, line in enumerate(lines):
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            if n < len(lines) - 1:
                raise
    return entries


def _replay(data_dir: Path, endpoint: str) -> int:
    """Rebuild the embedded AWS from the recording of earlier runs: moto's own state persistence.

    The recording is first compacted to the requests that changed something, so it grows with the state
    rather than with the time the stack has been polling. The compacted copy is written aside and renamed
    over the recording: rewritten in place, a crash during the rewrite cut the recording short, and the
    state was lost with it."""
    from moto.moto_api import recorder

    path = data_dir / RECORDING
    if not path.exists() or path.stat().st_size == 0:
        return 0
    kept = [
        entry
        for entry in _recorded([ln for ln in path.read_text().splitlines() if ln.strip()])
        if _is_write(entry)
    ]
    aside = path.with_name(path.name + ".tmp")
    aside.write_text("".join(json.dumps(entry) + "\n" for entry in kept))
    os.replace(aside, path)
    recorder.replay_recording(target_host=endpoint)
    return len(kept)


def _loop(name: str, stop: threading.Event, every: float, step: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        while not stop.is_set():
            try:
                step()
            except Exception as exc:  # a step that fails is logged and tried again, as Lambda would retry
                log(f"{name}: {exc!r}")
            stop.wait(every)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def _consumer(
    stop: threading.Event, consumer: template.Consumer, queue_url: str, functions: Functions
) -> threading.Thread:
    """One SQS event source mapping: batches from its queue into its function, partial failures kept (a
    failed message comes back after the queue's visibility timeout, and to its dead-letter queue after
    maxReceiveCount)."""
    import boto3

    sqs = boto3.client("sqs")
    name, batch_size = consumer.function, consumer.batch_size
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def step() -> None:
        messages = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=batch_size, WaitTimeSeconds=1, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            return
        records = [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
        result = functions.invoke(name, {"Records": records})
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        for m in messages:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])

    return _loop(name, stop, 0.0, step)


def _schedules(stop: threading.Event, functions: Functions) -> list[tuple[str, float, threading.Thread]]:
    """EventBridge's schedule rules, at the template's rates (BINDERY_LOCAL_SWEEP_SECONDS overrides)."""
    override = os.environ.get("BINDERY_LOCAL_SWEEP_SECONDS")
    started = []
    for schedule in template.schedules():
        seconds = float(override) if override else float(schedule.seconds)

        def fire(fn: str = schedule.function) -> None:
            event = {
                "version": "0",
                "id": uuid.uuid4().hex,
                "detail-type": "Scheduled Event",
                "source": "aws.events",
                "account": "000000000000",
                "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "region": "us-east-1",
                "resources": [f"arn:aws:events:us-east-1:000000000000:rule/{fn}"],
                "detail": {},
            }
            functions.invoke(fn, event)  # the handler logs what it did, when it did anything

        def delayed(fn: Callable[[], None] = fire, wait: float = seconds) -> None:
            if not stop.wait(wait):
                fn()

        started.append((schedule.function, seconds, _loop(schedule.function, stop, 0.0, delayed)))
    return started


# The curl session the banner prints. The e2e test runs it exactly as printed.
SESSION = r"""export API=@API TOKEN=@TOKEN
BOOK=$(curl -sf -X POST $API/books -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -d '{"title": "Hello", "manuscript": "# Hello\n\nFirst words.\n\n# Goodbye\n\nLast words.\n"}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
EXPORT=$(curl -sf -X POST $API/books/$BOOK/exports -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' -d '{"format": "html"}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for i in $(seq 30); do curl -sf $API/books/$BOOK/exports/$EXPORT -H "Authorization: Bearer $TOKEN" \
  | grep -q '"state":"ready"' && break; sleep 1; done
curl -sf $API/books/$BOOK/exports/$EXPORT -H "Authorization: Bearer $TOKEN"; echo
curl -sf -o hello.html "$(curl -sf $API/books/$BOOK/exports/$EXPORT -H "Authorization: Bearer $TOKEN" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["download_url"])')" && cat hello.html
"""


def banner(
    api: str, endpoint: str, data_dir: str | None, sweeps: list[tuple[str, float]], local_http: bool = False
) -> str:
    state = f"kept in {data_dir}" if data_dir else "in memory (set BINDERY_DATA_DIR to keep it)"
    hooks = (
        "webhook URLs may also be http://127.0.0.1 (BINDERY_WEBHOOK_LOCAL_HTTP=1: `make run` sets it)"
        if local_http
        else "webhook URLs: https, public addresses only, as deployed"
    )
    every = ", ".join(f"{name} every {seconds:g}s" for name, seconds in sweeps)
    session = SESSION.replace("@API", api).replace("@TOKEN", tokens.mint(DEMO_USER))
    return (
        "Bindery is running.\n"
        f"  API     {api}   (Swagger UI: {api}/docs)\n"
        f"  AWS     {endpoint}  (moto's server: DynamoDB, S3, SQS, EventBridge)\n"
        f"  state   {state}\n"
        f"  sweeps  {every}\n"
        f"  hooks   {hooks}\n\n"
        f"A token for {DEMO_USER} (24 h; `bindery token NAME` makes more), and a session to paste:\n\n"
        f"{session}\n"
        "Ctrl-C stops everything.\n"
    )


@contextlib.contextmanager
def _threads_deaf_to_stop_signals() -> Iterator[None]:
    """Threads started inside block SIGINT and SIGTERM (a thread inherits its creator's mask, and the
    servers' request threads inherit theirs), so the kernel can deliver a stop signal to the main thread
    only.

    Python runs a signal's handler in the main thread, but the kernel hands a process's signal to any
    thread that does not block it. One that landed on a busy worker thread left the main thread asleep in
    its wait, never woken to run the handler: the stack ignored Ctrl-C, for good (seen under load)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _stop_within(deadline: float, steps: Callable[[], None]) -> None:
    """Run the stop's steps, and if they are not done by the deadline, cut everything off: the process
    exits now rather than wait on a thread that may never finish (a request mid-call to a server that is
    shutting down, a join on a connection a client keeps open)."""
    runner = threading.Thread(target=steps, name="stop", daemon=True)
    runner.start()
    runner.join(timeout=max(0.0, deadline - time.monotonic()))
    if runner.is_alive():
        left = sorted(
            t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()
        )
        log(f"cut off after {STOP_DEADLINE_SECONDS:g}s: {', '.join(left)}")
        sys.stdout.flush()
        os._exit(0)


def main() -> int:
    port = int(os.environ.get("PORT", "3000"))
    data_dir = os.environ.get("BINDERY_DATA_DIR")
    if data_dir:
        Path(data_dir).mkdir(parents=True, exist_ok=True)
        # moto reads these when it is imported: set them first.
        os.environ["MOTO_ENABLE_RECORDING"] = "true"
        os.environ["MOTO_RECORDER_FILEPATH"] = str(Path(data_dir) / RECORDING)
    from bindery_local.aws import EmbeddedAws

    # 5000 by default, so events/env.json reaches it; 0 picks a free port (the e2e tests run several stacks).
    moto = EmbeddedAws(int(os.environ.get("BINDERY_MOTO_PORT", "5000")) or _free_port())
    # SIGINT and SIGTERM both raise KeyboardInterrupt, and neither handler takes a lock (one that set an
    # Event could deadlock on the Event's own lock, held by the main thread it interrupted). SIGINT's is
    # installed too, not left to Python: a process started in the background by a shell without job
    # control inherits SIGINT ignored, and Python then installs nothing (the stack ignored its stop).
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.default_int_handler)
    with _threads_deaf_to_stop_signals():
        moto.start()
    endpoint = moto.endpoint
    _configure_environment(endpoint)
    _pin_hosts()
    _quiet_logs()

    stop = threading.Event()
    threads: list[threading.Thread] = []
    gateway_server = None
    try:
        if data_dir:
            replayed = _replay(Path(data_dir), endpoint)
            log(f"restored {replayed} recorded writes from {data_dir}")
        from bindery.config import Settings

        urls = resources.ensure(
            os.environ["BINDERY_TABLE"],
            os.environ["BINDERY_BUCKET"],
            Settings.from_env().build_visibility_timeout_seconds,
        )
        # Every handler shares this process, so each queue's variable is set once for all of them.
        for variable, queue in template.queue_environment().items():
            os.environ[variable] = urls[queue]

        from bindery_local.gateway import Gateway, serve

        functions = Functions(template.functions())
        # Each pipe takes its position now, from its checkpoint in the data dir (bindery_local.pipes).
        pipes = from_template(
            os.environ["BINDERY_TABLE"], urls["BuildQueue"], Path(data_dir) if data_dir else None, log
        )
        with _threads_deaf_to_stop_signals():
            threads += [_loop(pipe.name, stop, 0.2, pipe.step) for pipe in pipes]
            threads += [_consumer(stop, c, urls[c.queue], functions) for c in template.queue_consumers()]
            sweeps = _schedules(stop, functions)
            # The port is bound last, so it accepts only a request the stack can serve: the recording
            # replayed, every handler imported, every pipe and consumer running.
            gateway_server = serve(Gateway(template.routes(), functions.invoke, log), port)
        threads += [t for _, _, t in sweeps]

        local_http = Settings.from_env().webhook_local
        every = [(n, s) for n, s, _ in sweeps]
        print(banner(f"http://127.0.0.1:{port}", endpoint, data_dir, every, local_http), flush=True)
        signal.pause()  # until SIGINT or SIGTERM: both raise KeyboardInterrupt here
    except KeyboardInterrupt:
        pass
    finally:
        log("stopping")
        stopping = time.monotonic()
        deadline = stopping + STOP_DEADLINE_SECONDS

        def steps() -> None:
            stop.set()
            if gateway_server is not None:
                gateway_server.shutdown()
                gateway_server.server_close()
            # A build or a sweep in mid-call finishes or is cut off with the process (they are daemon
            # threads); what they did not finish, the lease and the sweeps take up next start.
            for thread in threads:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
            moto.stop()

        _stop_within(deadline, steps)
        log(f"stopped in {time.monotonic() - stopping:.1f}s")
    return 0
