"""The embedded AWS: moto's server on 127.0.0.1, with DynamoDB made atomic under concurrent requests.

moto's DynamoDB is not atomic across threads. A transaction copies the whole table when it starts and,
when it is cancelled, puts that copy back, so every write another request made in between is undone:
under 64 concurrent clients, finishes and submits that had answered 200 vanished, leaving exports pending
with their queue message gone. Real DynamoDB applies each request atomically, and Bindery's guards rely on
that, so here DynamoDB's requests (and its stream's, which read the same tables) take one lock and run one
at a time. moto's work holds the GIL anyway, so the lock costs little; S3, SQS and EventBridge run
concurrently, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.dynamodb.models.table import StreamRecord
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server


def records_are_not_copied() -> None:
    """A stream record is a JSON snapshot taken when it is written, and nothing changes it after that, so
    the copy a transaction takes for its rollback can share the records rather than copy each one. moto
    keeps every record a table ever streamed, so otherwise each transaction copies the table's whole
    history: 78% of the embedded AWS's CPU under the load test, and growing with every write."""
    StreamRecord.__deepcopy__ = lambda self, memo: self  # type: ignore[attr-defined]


# The X-Amz-Target prefixes of DynamoDB's and DynamoDB Streams' JSON protocols.
_ATOMIC_TARGETS = ("DynamoDB_", "DynamoDBStreams_")

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def one_dynamodb_request_at_a_time(app: WsgiApp) -> WsgiApp:
    lock = threading.Lock()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith(_ATOMIC_TARGETS):
            return app(environ, start_response)
        with lock:
            # The body is read inside the lock too: a lazy one would be computed after it was released.
            return [b"".join(app(environ, start_response))]

    return serve


class _Handler(MotoRequestHandler):
    disable_nagle_algorithm = True  # as the gateway's: no 40 ms wait for a delayed ACK on each answer


class EmbeddedAws:
    """moto's ThreadedMotoServer, with the DynamoDB lock in front of its application."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        records_are_not_copied()
        app = one_dynamodb_request_at_a_time(DomainDispatcherApplication(create_backend_app))
        self._server = make_server("127.0.0.1", self.port, app, threaded=True, request_handler=_Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="aws", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
