"""The embedded AWS: moto's server on 127.0.0.1, made safe under concurrent requests where Bindery needs it,
answering only a request addressed to its own name and sent by no other origin's page (`owner_only`).

`make run` serves it from a process of its own (`AwsProcess`, `python -m bindery_local.aws`): moto's work
holds that process's interpreter lock, and the functions' instances and the gateway have theirs. With
BINDERY_DATA_DIR the same process replays the recording before it answers its first request
(`bindery_local.recording`).

moto's DynamoDB is not atomic across threads. A transaction copies the whole table when it starts and,
when it is cancelled, puts that copy back, so every write another request made in between is undone:
under 64 concurrent clients, finishes and submits that had answered 200 vanished, leaving exports pending
with their queue message gone. Real DynamoDB applies each request atomically, and Bindery's guards rely on
that, so here DynamoDB's requests (and its stream's, which read the same tables) take one lock and run one
at a time. moto's work holds the GIL anyway, so the lock costs little. A stream iterator reads the live
table (`streams_read_the_live_table`), and SQS's writes take a lock of their own (`_lock_for`), as does
EventBridge's PutEvents, which writes into SQS; S3 and the rest of EventBridge run concurrently. With
BINDERY_DATA_DIR, moto's recorder appends each request to the recording one whole line at a time
(`recordings_are_whole_lines`).
"""

from __future__ import annotations

import collections
import copy
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import StreamRecord, Table
from moto.dynamodbstreams.models import ShardIterator
from moto.moto_api._internal.recorder.models import Recorder
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

from bindery_local import hosts
from bindery_local.recording import RECORDING, replay


def records_are_not_copied() -> None:
    """A stream record is a JSON snapshot taken when it is written, and nothing changes it after that, so
    the copy a transaction takes for its rollback can share the records rather than copy each one. moto
    keeps every record a table ever streamed, so otherwise each transaction copies the table's whole
    history: 78% of the embedded AWS's CPU under the load test, and growing with every write."""
    StreamRecord.__deepcopy__ = lambda self, memo: self  # type: ignore[attr-defined]


class _TablesKeptInPlace:
    """moto's dynamodb module's `copy`, except that a Table is not copied: its one deep copy of a Table is
    the backup a transaction takes (`transactions_undo_their_own_items` undoes them instead)."""

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)


_Touched = dict[tuple[int, DynamoType, DynamoType | None], tuple[Table, Item | None]]


def _touched_items(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> _Touched:
    """Each item a transaction names, as it is before the transaction (None: not there), by its key."""
    touched: _Touched = {}
    for entry in transact_items:
        for op_type, op in entry.items():
            table = backend.tables.get(op.get("TableName", ""))
            if table is None:
                continue
            keys = op.get("Item") if op_type == "Put" else op.get("Key")
            try:
                hash_key, range_key = backend.get_keys_value(table, keys or {})
            except Exception:  # an op without its key fails before it writes: nothing to undo
                continue
            if (id(table), hash_key, range_key) not in touched:
                before = table.get_item(hash_key, range_key)
                touched[id(table), hash_key, range_key] = (table, copy.deepcopy(before))
    return touched


def _undo(touched: _Touched, streamed: dict[int, tuple[Table, int]]) -> None:
    for (_, hash_key, range_key), (table, before) in touched.items():
        if range_key is None:
            if before is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = before  # type: ignore[assignment]
        elif before is not None:
            table.items[hash_key][range_key] = before
        elif hash_key in table.items:
            table.items[hash_key].pop(range_key, None)
    for table, length in streamed.values():
        if table.stream_shard is not None:
            del table.stream_shard.items[length:]


def transactions_undo_their_own_items() -> None:
    """A cancelled TransactWriteItems puts back the items it touched, not a copy of every table it named.

    moto backs a transaction up by deep-copying the whole table once per item it names (a 5-item
    transaction copied the table 5 times), and restores the copy if the transaction is cancelled: the
    embedded AWS's main cost under load, and growing with the table (`make bench`, "local stack"). Here the
    transaction copies only the items it names, and how long each table's stream is, before it runs; if it
    is cancelled, those items are put back and the stream is cut back to that length, so the records of
    its writes go with them, as they went with moto's copy. DynamoDB's requests run one at a time
    (`one_request_at_a_time`), so nothing writes between the copy and the undo."""
    if getattr(DynamoDBBackend.transact_write_items, "undoes_own_items", False):
        return
    dynamodb_models.copy = _TablesKeptInPlace  # type: ignore[assignment]
    transact = DynamoDBBackend.transact_write_items

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        touched = _touched_items(self, transact_items)
        streamed = {
            id(table): (table, len(table.stream_shard.items))
            for table, _ in touched.values()
            if table.stream_shard is not None
        }
        try:
            transact(self, transact_items)
        except Exception:
            _undo(touched, streamed)
            raise

    transact_write_items.undoes_own_items = True  # type: ignore[attr-defined]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


# DynamoDB's data-plane answers: moto builds each as a dict already in the wire's JSON shape.
_PLAIN_ANSWERS = {
    "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems",
    "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems",
}  # fmt: skip


def _is_plain_json(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _is_plain_json(v) for k, v in value.items())
    if kind is list:
        return all(_is_plain_json(v) for v in value)
    return value is None or kind in (str, int, float, bool)


def dynamodb_answers_are_dumped_as_they_are() -> None:
    """A DynamoDB data-plane answer that is plain JSON already goes out as it is, not through moto's
    serializer, which walks the operation's botocore shape for every attribute of every item: a quarter
    of the embedded AWS's time under 64 clients. The answer is the same JSON (the load probe's workload,
    every such answer compared: none differed); an error, or an answer holding anything but JSON's own
    types, still goes through the serializer."""
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler.serialized, "dumps_plain_answers", False):
        return
    serialized = DynamoHandler.serialized

    def dumped(self: DynamoHandler, action_result: Any) -> Any:
        result = action_result.result
        if type(result) is dict and self._get_action() in _PLAIN_ANSWERS and _is_plain_json(result):
            headers = {"Content-Type": "application/x-amz-json-1.0", "server": "amazon.com"}
            headers.update(self.response_headers)
            return 200, headers, json.dumps(result)
        return serialized(self, action_result)

    dumped.dumps_plain_answers = True  # type: ignore[attr-defined]
    DynamoHandler.serialized = dumped  # type: ignore[method-assign,assignment]


def streams_read_the_live_table() -> None:
    """A shard iterator reads the table's stream as it is when GetRecords runs. moto's iterator keeps the
    shard object it was made from, and a transaction cancelled in between replaces the table with its
    copy: the iterator then read the discarded table, with the cancelled transaction's records in it (an
    export that never was), and the pipe, having moved past their sequence numbers, skipped the real
    records that took those numbers next. Under load the build queue lost jobs that way."""
    if getattr(ShardIterator.get, "reads_live_table", False):
        return
    read = ShardIterator.get

    def get(self: ShardIterator, limit: int = 1000) -> dict[str, Any]:
        live = self.streams_backend.dynamodb.get_table(self.stream_shard.table.name).stream_shard
        if live is not None:
            self.stream_shard = live
        return read(self, limit)

    get.reads_live_table = True  # type: ignore[attr-defined]
    ShardIterator.get = get  # type: ignore[method-assign]


def recordings_are_whole_lines() -> None:
    """moto's recorder appends a request to the recording from whichever thread serves it, in two writes: its
    JSON, then a newline. An entry over the write buffer (an S3 put of a manuscript or an artifact) goes out
    in its own write, so a request recorded at the same time by another thread (S3 is served concurrently)
    landed between the two, on the same line: 4 to 10 lines of 241 under 8 threads of puts. The replay then
    stopped at that line, and the state it kept was lost. One lock makes each entry whole; it is taken after
    the DynamoDB lock and nothing is taken inside it."""
    if getattr(Recorder._record_request, "whole_lines", False):
        return
    record, lock = Recorder._record_request, threading.Lock()

    def whole(self: Recorder, request: Any, body: bytes | None = None) -> None:
        with lock:
            record(self, request, body)

    whole.whole_lines = True  # type: ignore[attr-defined]
    Recorder._record_request = whole  # type: ignore[method-assign]


# The X-Amz-Target prefixes of DynamoDB's and DynamoDB Streams' JSON protocols, and SQS's.
_DYNAMODB_TARGETS = ("DynamoDB_", "DynamoDBStreams_")
_SQS_TARGET = "AmazonSQS."
# moto's EventBridge sends a rule's matching events to its SQS targets inside the PutEvents request itself.
_PUT_EVENTS = "AWSEvents.PutEvents"

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Turns:
    """A lock its takers get in the order they asked for it: the holder hands it to the oldest waiter.

    A bare lock goes to whichever thread the interpreter runs next. Under 64 clients the gateway's pollers
    and readers, dozens of requests at once, kept taking DynamoDB's lock while the pipe's GetRecords and the
    build workers' writes waited: no export was built in 20 s. In turn, a request waits for at most the
    requests already waiting, and those are bounded by the functions' concurrency."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiting: collections.deque[threading.Lock] = collections.deque()
        self._held = False

    def __enter__(self) -> None:
        with self._guard:
            if not self._held:
                self._held = True
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiting.append(turn)
        turn.acquire()  # released by the holder before us, which hands us the lock held

    def __exit__(self, *exc: object) -> None:
        with self._guard:
            if self._waiting:
                self._waiting.popleft().release()  # still held: it is the next taker's now
            else:
                self._held = False


def _lock_for(target: str, dynamodb: Turns, sqs: Turns) -> Turns | None:
    if target.startswith(_DYNAMODB_TARGETS):
        return dynamodb
    # moto's SQS rebuilds a queue's message list on each DeleteMessage, and assigns it after the loop: a
    # SendMessage appended in that window is lost. (Read in its code; no test here has caught it in the
    # act.) A ReceiveMessage runs free: it never replaces the list, and it may wait (long polling) for a
    # send that a lock would hold back.
    if target.startswith(_SQS_TARGET) and target != f"{_SQS_TARGET}ReceiveMessage":
        return sqs
    # The same window, reached through EventBridge: a rule's send into the webhook events queue, made while
    # the ingest's DeleteMessage rebuilt that queue's list, would be lost with no error to anyone.
    if target == _PUT_EVENTS:
        return sqs
    return None


def one_request_at_a_time(app: WsgiApp) -> WsgiApp:
    """DynamoDB's requests run one at a time, and SQS's writes one at a time (each service its own lock),
    each in the order it came."""
    dynamodb, sqs = Turns(), Turns()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        lock = _lock_for(environ.get("HTTP_X_AMZ_TARGET", ""), dynamodb, sqs)
        if lock is None:
            return app(environ, start_response)
        with lock:
            # The body is read inside the lock too: a lazy one would be computed after it was released.
            return [b"".join(app(environ, start_response))]

    return serve


def owner_only(app: WsgiApp, port: Callable[[], int]) -> WsgiApp:
    """moto answers only a request addressed to its own loopback name and port, and sent by no other
    origin's page (`bindery_local.hosts`): it checks no signature, so a page that rebinds its name to
    127.0.0.1, or a cross-site form posted to 127.0.0.1 itself, would otherwise read or write the table,
    the bucket and the queues. `port` is asked at each request: it is known once the server binds."""

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        refusal = hosts.refusal_for(
            environ.get("HTTP_HOST"),
            environ.get("HTTP_ORIGIN"),
            environ.get("HTTP_SEC_FETCH_SITE"),
            port(),
            environ.get("RAW_URI") or environ.get("REQUEST_URI"),  # the request line's target, as sent
        )
        if refusal is None:
            return app(environ, start_response)
        start_response(
            refusal.status_line,
            [("Content-Type", "application/json"), ("Content-Length", str(len(refusal.body)))],
        )
        return [refusal.body]

    return serve


class _Handler(MotoRequestHandler):
    disable_nagle_algorithm = True  # as the gateway's: no 40 ms wait for a delayed ACK on each answer


class EmbeddedAws:
    """moto's ThreadedMotoServer, with the locks in front of its application."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server would log every call
        records_are_not_copied()
        transactions_undo_their_own_items()
        dynamodb_answers_are_dumped_as_they_are()
        streams_read_the_live_table()
        recordings_are_whole_lines()
        app = owner_only(
            one_request_at_a_time(DomainDispatcherApplication(create_backend_app)), lambda: self.port
        )
        self._server = make_server("127.0.0.1", self.port, app, threaded=True, request_handler=_Handler)
        self.port = self._server.server_port  # port 0 asked for a free one
        self._thread = threading.Thread(target=self._server.serve_forever, name="aws", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()


class AwsProcess:
    """The embedded AWS in a process of its own: `python -m bindery_local.aws PORT [DATA_DIR]`.

    It answers `ready PORT REPLAYED` on its stdout once it serves (port 0 picks a free one) and has replayed
    the recording, and ends when its stdin closes: when the stack that started it ends, even by `kill -9`
    of the stack alone. It ignores Ctrl-C, which the terminal sends to the whole process group: the stack
    stops it last, after whatever still calls it."""

    def __init__(self, port: int, data_dir: Path | None) -> None:
        env = dict(os.environ)
        if data_dir is not None:  # moto reads these when it is imported
            env["MOTO_ENABLE_RECORDING"] = "true"
            env["MOTO_RECORDER_FILEPATH"] = str(data_dir / RECORDING)
        args = [sys.executable, "-m", "bindery_local.aws", str(port), *([str(data_dir)] if data_dir else [])]
        self._process = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        assert self._process.stdout is not None
        answer = self._process.stdout.readline().split()
        if answer[:1] != ["ready"]:
            self._process.kill()
            raise RuntimeError(f"the embedded AWS did not start (exit code {self._process.wait()})")
        self.port, self.replayed = int(answer[1]), int(answer[2])

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout: float) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()


def _serve_alone(port: int, data_dir: Path | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    aws = EmbeddedAws(port)
    aws.start()
    replayed = replay(data_dir, aws.endpoint) if data_dir is not None else 0
    print(f"ready {aws.port} {replayed}", flush=True)
    sys.stdin.read()  # until the stack that started this process closes it, or ends
    os._exit(0)


if __name__ == "__main__":
    _serve_alone(int(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
