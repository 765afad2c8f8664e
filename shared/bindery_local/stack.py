"""`make run`: moto's server as the embedded AWS, the API on 127.0.0.1, the two pipes (`bindery_local.pipes`),
the bus's rules, every queue's consumer (the build worker, the webhook ingest and sender) and the schedules
(the sweeps), all wired from template.yaml and all calling the real handlers.

Each function runs as Lambda runs it, in instances side by side (`bindery_local.instances`): processes of
its own, each with its own module state and one event at a time, up to the function's concurrency
(BINDERY_LOCAL_CONCURRENCY, default 8, or less where the template caps the function). Each queue's event
source polls with as many pollers as its function's concurrency. The embedded AWS is `bindery_local.aws`:
moto's server in a process of its own, with DynamoDB made atomic under concurrent requests. What it prints
once it is up is `bindery_local.banner`.

The stack is its owner's: the gateway verifies tokens with a secret made for this run and handed to its
owner alone (`bindery_local.tokens`), and both servers answer only a request addressed to their own
loopback name and sent by no other origin's page (`bindery_local.hosts`).
"""

from __future__ import annotations

import contextlib
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
from bindery_local.banner import banner
from bindery_local.pipes import from_template

TABLE = "bindery"
BUCKET = "bindery-artifacts"
# Everything a stop does (servers shut, threads joined, moto stopped) fits in this, or is cut off with the
# process: what a cut-off build or sweep did not finish, leases and sweeps take up at the next start.
STOP_DEADLINE_SECONDS = 5.0
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
# Each function's most instances at once, unless the template caps it lower: 8 keeps 64 callers' reads from
# queueing behind each other on this 2-core machine and starts in a few seconds (docs/BENCHMARKS.md).
DEFAULT_CONCURRENCY = 8


def log(message: str) -> None:
    stamp = datetime.now(UTC).strftime("%H:%M:%S")
    print(f"{stamp} {message}", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The function this process is an instance of (`_instance_setup`): the name its log lines carry.
_function_here = ""


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


def _instance_setup(function: str) -> None:
    """What each of a function's instances sets up before it imports the handler."""
    global _function_here
    _function_here = function
    _pin_hosts()
    _quiet_logs()


def concurrency() -> dict[str, int]:
    """Each function's concurrency: BINDERY_LOCAL_CONCURRENCY (default 8), or the template's cap if lower."""
    given = os.environ.get("BINDERY_LOCAL_CONCURRENCY") or str(DEFAULT_CONCURRENCY)
    if not given.isdigit() or int(given) < 1:
        raise SystemExit(f"BINDERY_LOCAL_CONCURRENCY={given!r}: it takes a whole number, 1 or more")
    wanted = int(given)
    caps = template.concurrency_caps()
    return {name: min(wanted, caps.get(name, wanted)) for name in template.functions()}


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
        # The instance's own function, as Lambda's log group would name it.
        function = _function_here or entry.get("function_name", "")
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


Invoke = Callable[[str, dict[str, Any]], dict[str, Any]]


def _consumer(
    stop: threading.Event, consumer: template.Consumer, queue_url: str, invoke: Invoke, concurrency: int
) -> threading.Thread:
    """One SQS event source mapping: batches from its queue into its function, partial failures kept (a
    failed message comes back after the queue's visibility timeout, and to its dead-letter queue after
    maxReceiveCount). Its poller hands each batch to an instance and polls again while fewer than
    `concurrency` batches are in hand, as Lambda's pollers scale up to the function's concurrency: builds
    run side by side, and the queue is long-polled once at a time, not once per instance (each poll is a
    request the embedded AWS serves)."""
    import boto3

    sqs = boto3.client("sqs")
    name, batch_size = consumer.function, consumer.batch_size
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    in_hand = threading.BoundedSemaphore(concurrency)

    def handle(messages: list[dict[str, Any]]) -> None:
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
        try:
            result = invoke(name, {"Records": records})
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
            for m in messages:
                if m["MessageId"] not in failed:
                    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
        except Exception as exc:  # the batch comes back after its visibility timeout, as Lambda retries it
            if not stop.is_set():
                log(f"{name}: {exc!r}")
        finally:
            in_hand.release()

    def step() -> None:
        if not in_hand.acquire(timeout=1.0):
            return  # every place is in hand: poll again once one is free
        try:
            messages = sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=batch_size, WaitTimeSeconds=1, AttributeNames=["All"]
            ).get("Messages", [])
        except BaseException:
            in_hand.release()
            raise
        if not messages:
            in_hand.release()
            return
        threading.Thread(target=handle, args=(messages,), name=f"{name}-batch", daemon=True).start()

    return _loop(f"{name}-poller", stop, 0.0, step)


def _schedules(stop: threading.Event, invoke: Invoke) -> list[tuple[str, float, threading.Thread]]:
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
            invoke(fn, event)  # the handler logs what it did, when it did anything

        def delayed(fn: Callable[[], None] = fire, wait: float = seconds) -> None:
            if not stop.wait(wait):
                fn()

        started.append((schedule.function, seconds, _loop(schedule.function, stop, 0.0, delayed)))
    return started


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
    limits = concurrency()  # a bad setting stops the start before anything runs
    key = tokens.secret_for_this_run()  # as does a secret too short to sign with
    if data_dir:
        Path(data_dir).mkdir(parents=True, exist_ok=True)
    from bindery_local.aws import AwsProcess
    from bindery_local.instances import Pool, start_instances

    # SIGINT and SIGTERM both raise KeyboardInterrupt, and neither handler takes a lock (one that set an
    # Event could deadlock on the Event's own lock, held by the main thread it interrupted). SIGINT's is
    # installed too, not left to Python: a process started in the background by a shell without job
    # control inherits SIGINT ignored, and Python then installs nothing (the stack ignored its stop).
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.default_int_handler)
    # 5000 by default, so events/env.json reaches it; 0 picks a free port (the e2e tests run several stacks).
    # With a data dir, it has replayed the recording of earlier runs when it answers.
    moto = AwsProcess(int(os.environ.get("BINDERY_MOTO_PORT", "5000")), Path(data_dir) if data_dir else None)
    endpoint = moto.endpoint
    _configure_environment(endpoint)
    _pin_hosts()
    _quiet_logs()

    stop = threading.Event()
    threads: list[threading.Thread] = []
    pools: dict[str, Pool] = {}
    gateway_server = None
    try:
        if data_dir:
            log(f"restored {moto.replayed} recorded writes from {data_dir}")
        from bindery.config import Settings

        urls = resources.ensure(
            os.environ["BINDERY_TABLE"],
            os.environ["BINDERY_BUCKET"],
            Settings.from_env().build_visibility_timeout_seconds,
        )
        # Every function sees every queue's variable, as the template's Globals give them.
        for variable, queue in template.queue_environment().items():
            os.environ[variable] = urls[queue]

        from bindery_local.gateway import Gateway, serve

        # From the main thread, with the environment complete and no stop signal blocked: each instance
        # takes both from the fork server (bindery_local.instances). One warm instance of each function,
        # so the port opens only once every handler has imported.
        handlers = {name: f"functions.{name}.app" for name in template.functions()}
        pools = start_instances(handlers, limits, _instance_setup, snapshot=("bindery_local.snapshot",))

        def invoke(function: str, event: dict[str, Any]) -> dict[str, Any]:
            return pools[function].invoke(event)

        # Each pipe takes its position now, from its checkpoint in the data dir (bindery_local.pipes).
        pipes = from_template(
            os.environ["BINDERY_TABLE"], urls["BuildQueue"], Path(data_dir) if data_dir else None, log
        )
        with _threads_deaf_to_stop_signals():
            threads += [_loop(pipe.name, stop, 0.2, pipe.step) for pipe in pipes]
            threads += [
                _consumer(stop, c, urls[c.queue], invoke, limits[c.function])
                for c in template.queue_consumers()
            ]
            sweeps = _schedules(stop, invoke)
            # The port is bound last, so it accepts only a request the stack can serve: the recording
            # replayed, every handler imported, every pipe and consumer running.
            gateway_server = serve(Gateway(template.routes(), invoke, log, key=key, port=port), port)
        threads += [t for _, _, t in sweeps]
        # Only once the port is ours: a second `make run` on a port in use stops above, and never
        # overwrites the running stack's secret.
        api = f"http://127.0.0.1:{port}"
        kept = tokens.keep_for_owner(port, api, key)

        local_http = Settings.from_env().webhook_local
        every = [(n, s) for n, s, _ in sweeps]
        print(banner(api, endpoint, data_dir, every, limits, local_http, key=key, kept=kept), flush=True)
        signal.pause()  # until SIGINT or SIGTERM: both raise KeyboardInterrupt here
    except KeyboardInterrupt:
        pass
    finally:
        log("stopping")
        stopping = time.monotonic()
        tokens.forget(port, key)  # first: a stop cut off at its deadline still takes the secret away
        deadline = stopping + STOP_DEADLINE_SECONDS

        def steps() -> None:
            stop.set()
            if gateway_server is not None:
                gateway_server.shutdown()
                gateway_server.server_close()
            # A build or a sweep in mid-call is cut off with its instance; what it did not finish, the
            # lease and the sweeps take up next start. An event waiting for an instance is refused.
            for pool in pools.values():
                pool.stop()
            for thread in threads:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
            for pool in pools.values():
                pool.join(timeout=max(0.0, deadline - time.monotonic()))
            moto.stop(timeout=max(0.0, deadline - time.monotonic()))

        _stop_within(deadline, steps)
        log(f"stopped in {time.monotonic() - stopping:.1f}s")
    return 0
