"""The local API Gateway: HTTP on 127.0.0.1, each request turned into the HTTP API v2 event the deployed
stack would send, after the same JWT check, and handed to the same handler. A request addressed to any
name but the stack's own, or sent by another origin's page (`bindery_local.hosts`), is refused before
anything else is looked at."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from bindery_local import docs, hosts, tokens
from bindery_local.template import Route

# API Gateway's own limit on a request payload.
MAX_PAYLOAD = 10 * 1024 * 1024

Invoke = Callable[[str, dict[str, Any]], dict[str, Any]]


def _gateway_answer(status: int, message: str) -> tuple[int, dict[str, str], bytes]:
    # What API Gateway itself says when it refuses a request; the handler never sees it.
    return status, {"Content-Type": "application/json"}, json.dumps({"message": message}).encode()


def to_event(
    route: Route,
    params: dict[str, str],
    method: str,
    target: str,
    headers: dict[str, str],
    body: bytes,
    claims: dict[str, Any],
    source_ip: str,
) -> dict[str, Any]:
    parts = urlsplit(target)
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        query[key] = f"{query[key]},{value}" if key in query else value
    now = datetime.now(UTC)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": parts.path,
        "rawQueryString": parts.query,
        "headers": headers,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "authorizer": {"jwt": {"claims": {k: str(v) for k, v in claims.items()}, "scopes": None}},
            "domainName": headers.get("host", "127.0.0.1"),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": parts.path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": route.route_key,
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = query
    if params:
        event["pathParameters"] = params
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(body).decode()
            event["isBase64Encoded"] = True
    return event


class Gateway:
    """The API on 127.0.0.1:`port`, which verifies tokens with `key` (`tokens.secret_for_this_run`)."""

    def __init__(
        self, routes: list[Route], invoke: Invoke, log: Callable[[str], None], *, key: str, port: int
    ) -> None:
        self.routes, self.invoke, self.log = routes, invoke, log
        self.key, self.port = key, port

    def handle(
        self, method: str, target: str, headers: dict[str, str], body: bytes, source_ip: str
    ) -> tuple[int, dict[str, str], bytes]:
        refusal = hosts.refusal_for(
            headers.get("host"), headers.get("origin"), headers.get("sec-fetch-site"), self.port, target
        )
        if refusal is not None:
            # A page that rebound its own name to 127.0.0.1, or another site's page sending to 127.0.0.1
            # itself: refused before the docs, the routes and the token, so no handler runs for it,
            # whatever it sends. Swagger UI on /docs calls the API from this port's own origin.
            return refusal.status, {"Content-Type": "application/json"}, refusal.body
        path = urlsplit(target).path
        if method in ("GET", "HEAD") and (page := docs.answer(path)) is not None:
            return page  # Swagger UI: the local stack's own page, outside the API's routes
        for route in self.routes:
            params = route.match(method, path)
            if params is not None:
                break
        else:
            return _gateway_answer(404, "Not Found")
        try:
            claims = tokens.verify(headers.get("authorization"), self.key)
        except tokens.Rejected:
            return _gateway_answer(401, "Unauthorized")
        event = to_event(route, params, method, target, headers, body, claims, source_ip)
        result = self.invoke(route.function, event)
        out = result.get("body") or ""
        payload = base64.b64decode(out) if result.get("isBase64Encoded") else out.encode("utf-8")
        return int(result.get("statusCode", 200)), dict(result.get("headers") or {}), payload


def serve(gateway: Gateway, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # The headers and the body are two writes: with Nagle's algorithm on, the body waits for the
        # client's delayed ACK of the headers, 40 ms on every answer over a kept-alive connection.
        disable_nagle_algorithm = True

        def _any(self) -> None:
            started = time.monotonic()
            headers: dict[str, str] = {}
            for key, value in self.headers.items():
                # A field's value has no whitespace at its ends (RFC 9110 5.5); the parser trims the start.
                key, value = key.lower(), value.strip(" \t")
                headers[key] = f"{headers[key]},{value}" if key in headers else value
            length = int(headers.get("content-length") or 0)
            try:
                if length > MAX_PAYLOAD:
                    self.close_connection = True  # the body stays unread, so this connection cannot be reused
                    status, out_headers, payload = _gateway_answer(413, "Request Entity Too Large")
                else:
                    body = self.rfile.read(length) if length else b""
                    status, out_headers, payload = gateway.handle(
                        self.command, self.path, headers, body, self.client_address[0]
                    )
            except Exception as exc:  # the handler crashed: API Gateway answers 500 for it
                gateway.log(f"handler crashed: {exc!r}")
                status, out_headers, payload = _gateway_answer(500, "Internal Server Error")
            self.send_response(status)
            for key, value in out_headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
            elapsed = (time.monotonic() - started) * 1000
            gateway.log(f"{self.command} {self.path} {status} {elapsed:.0f}ms")

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

        def __getattr__(self, name: str) -> Any:
            # Any other method (HEAD, OPTIONS, TRACE ...) gets what API Gateway gives a method with no
            # route, rather than http.server's 501.
            if name.startswith("do_"):
                return self._any
            raise AttributeError(name)

        def log_message(self, format: str, *args: Any) -> None:  # one line per request is ours
            pass

    class Server(ThreadingHTTPServer):
        # The listen backlog: http.server's default of 5 reset connections once 32 clients connected at
        # once. API Gateway queues far more than this; 128 is what Linux grants by default (somaxconn).
        request_queue_size = 128
        daemon_threads = True
        # A stop does not wait for request threads: one may be parked on a keep-alive connection that a
        # client holds open, and would hold the stop with it.
        block_on_close = False

    server = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, name="gateway", daemon=True).start()
    return server
