"""The client's wire to a Bindery API: each request sent through urllib3 with its retries, a create's
Idempotency-Key, JSON both ways, and a refusal raised as `ApiError` (`bindery_cli.answers` reads it).

Which requests may repeat is decided per request: any request is retried after a 429 (refused before
anything was done) or a connection that failed (nothing was sent); one that is safe to repeat (a read, a
delete, a create that carries its key) also after a 503, an error or a timeout once it was sent.
`bindery_cli.client.Client` says what each request is.
"""

from __future__ import annotations

import io
import json
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

import urllib3
from urllib3.exceptions import HTTPError as TransportError
from urllib3.util.retry import Retry

from bindery_cli.answers import NOT_BINDERY, ApiError, refusal

RETRIED = frozenset({429, 503})
SAFE_TO_REPEAT = frozenset({"GET", "HEAD", "DELETE"})  # and a create that carries its Idempotency-Key


class _Retry(Retry):
    """urllib3's Retry, sleeping through the client's `sleep` (so a test need not wait), with the server's
    Retry-After taken whole and capped at a minute."""

    sleeper: Callable[[float], None] = staticmethod(time.sleep)
    # Told (seconds, status) before a wait the server asked for with Retry-After: a wait of up to a minute
    # should not look like a hang.
    on_wait: Callable[[float, int], None] | None = None

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        # Only the statuses asked for: urllib3 would also resend any 413 or 503 carrying a Retry-After.
        if status_code not in (self.status_forcelist or ()):
            return False
        return bool(super().is_retry(method, status_code, has_retry_after))

    def sleep(self, response: Any = None) -> None:
        after = self.get_retry_after(response) if response is not None else None
        wait = min(after if after is not None else self.get_backoff_time(), 60.0)
        if after is not None and self.on_wait is not None:
            self.on_wait(wait, response.status)
        self.sleeper(wait)


class Wire:
    """One connection pool to one API, and how each request to it is sent and its answer read."""

    def __init__(
        self,
        api: str,
        token: str,
        *,
        timeout: float,
        tries: int,
        sleep: Callable[[float], None],
        on_wait: Callable[[float, int], None] | None,
    ):
        self.api, self.token, self.tries = api, token, tries
        told = staticmethod(on_wait) if on_wait is not None else None
        self._retry = type("Retry", (_Retry,), {"sleeper": staticmethod(sleep), "on_wait": told})
        self._pool = urllib3.PoolManager(timeout=urllib3.Timeout(connect=min(timeout, 10.0), read=timeout))

    def _retries(self, method: str, *, repeatable: bool) -> Retry:
        """Up to `tries` sends: on a 429 always (refused before anything was done), on a failed connection
        always (nothing was sent); on a 503, an error or a timeout after sending (any of which may follow a
        change that went through) only when the request is safe to repeat."""
        again = self.tries - 1
        return self._retry(
            total=again,
            connect=again,
            read=again if repeatable else 0,
            status=again,
            other=0,
            allowed_methods=None,  # which methods may repeat is decided above, per request
            status_forcelist=RETRIED if repeatable else {429},
            backoff_factor=0.5,
            backoff_max=30.0,
            raise_on_status=False,
            respect_retry_after_header=True,
        )

    def send(self, method: str, url: str, *, repeatable: bool, **kw: Any) -> Any:
        """urllib3's answer to one request to any URL (the API's, or a presigned upload's or download's)."""
        try:
            return self._pool.request(method, url, retries=self._retries(method, repeatable=repeatable), **kw)
        except TransportError as exc:
            raise ConnectionError(
                f"{method} {url.split('?', 1)[0]}: no answer after {self.tries} tries: {exc}"
            ) from None

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        create: bool = False,
        key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """The API's JSON answer to one request to `path`; a refusal raised as `ApiError`."""
        sent = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **(headers or {})}
        if create:
            # One key for every try of this create: the API answers a retry with what the first made.
            sent["Idempotency-Key"] = key or uuid.uuid4().hex
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")  # UTF-8: CJK is not 6 bytes a char
            sent["Content-Type"] = "application/json"
        repeatable = method in SAFE_TO_REPEAT or "Idempotency-Key" in sent
        answer = self.send(method, self.api + path, body=data, headers=sent, repeatable=repeatable)
        if method == "DELETE" and answer.status == 404 and answer.retries and answer.retries.history:
            return None  # an earlier try went through, its answer lost: what it deleted is gone, as asked
        if answer.status >= 400:
            raise refusal(answer.status, answer.data, path)
        try:
            return json.loads(answer.data) if answer.data else None
        except ValueError:  # a 200 of some other server's page
            raise ApiError(answer.status, f"http_{answer.status}", NOT_BINDERY) from None


class Counted(io.BytesIO):
    """A body urllib3 sends block by block, telling `on_bytes` how far it has got. A retry rewinds it (urllib3
    seeks back to where it began), and the count starts again with it."""

    def __init__(self, data: bytes, on_bytes: Callable[[int, int], None] | None):
        super().__init__(data)
        self.total, self.on_bytes = len(data), on_bytes

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        if self.on_bytes is not None:
            self.on_bytes(self.tell(), self.total)
        return chunk


def quote_id(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def query(**given: Any) -> str:
    query = urllib.parse.urlencode({k: v for k, v in given.items() if v is not None})
    return f"?{query}" if query else ""
