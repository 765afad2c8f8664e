"""The embedded AWS: moto's server on 127.0.0.1, made safe under concurrent requests where Bindery needs it.

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

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.dynamodb.models.table import StreamRecord
from moto.dynamodbstreams.models import ShardIterator
from moto.moto_api._internal.recorder.models import Recorder
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server


def records_are_not_copied() -> None:
    """A stream record is a JSON snapshot taken when it is written, and nothing changes it after that, so
    the copy a transaction takes for its rollback can share the records rather than copy each one. moto
    keeps every record a table ever streamed, so otherwise each transaction copies the table's whole
    history: 78% of the embedded AWS's CPU under the load test, and growing with every write."""
    StreamRecord.__deepcopy__ = lambda self, memo: self  # type: ignore[attr-defined]


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


def _lock_for(target: str, dynamodb: threading.Lock, sqs: threading.Lock) -> threading.Lock | None:
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
    """DynamoDB's requests run one at a time, and SQS's writes one at a time (each service its own lock)."""
    dynamodb, sqs = threading.Lock(), threading.Lock()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        lock = _lock_for(environ.get("HTTP_X_AMZ_TARGET", ""), dynamodb, sqs)
        if lock is None:
            return app(environ, start_response)
        with lock:
            # The body is read inside the lock too: a lazy one would be computed after it was released.
            return [b"".join(app(environ, start_response))]

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
        streams_read_the_live_table()
        recordings_are_whole_lines()
        app = one_request_at_a_time(DomainDispatcherApplication(create_backend_app))
        self._server = make_server("127.0.0.1", self.port, app, threaded=True, request_handler=_Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="aws", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
