"""A small typed client for any Bindery API, on the standard library alone.

    from bindery.client import Client
    bindery = Client("http://127.0.0.1:3000", token)
    book = bindery.create_book("Lighthouse", Path("lighthouse.md").read_text())
    export = bindery.export(book["id"], "epub")
    done = bindery.wait(book["id"], export["id"])
    bindery.download(done["download_url"], Path("lighthouse.epub"))

Every create carries an Idempotency-Key, so a retry can never make a second export. A 429 or a 503 is
retried after the server's Retry-After; any other refusal raises `ApiError`, which names the API's error
code and says what to do about it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

INLINE_LIMIT = 5 * 1024 * 1024  # the API takes a manuscript this large in the body; above it, an upload
RETRIED = frozenset({429, 503})
TERMINAL = frozenset({"ready", "failed", "cancelled", "expired"})

# What a caller can do about each error code the API answers with.
ADVICE = {
    "unauthorized": "check the token (BINDERY_TOKEN or --token): missing, expired, or not for this API",
    "not_found": "check the ids: no such book or export is yours",
    "too_many_live_exports": "wait for one of your pending exports to finish, or cancel one",
    "manuscript_too_large": "the most a manuscript may be is 500 MB",
    "unknown_format": "use one of: markdown, html, epub, pdf",
    "revision_mismatch": "the book changed since you read it: fetch it again and retry",
    "idempotency_key_reused": "this Idempotency-Key was used for another request: use a fresh key",
    "concurrent_replacement": "the book kept changing under this request: try again",
    "idempotent_book_deleted": "that key's book was deleted: retry with a new Idempotency-Key",
    "upload_not_found": "nothing arrived at the upload URL: upload the file, then adopt it",
    "unavailable": "the service is busy: try again in a moment",
    "empty_book": "the book has no chapters: replace its manuscript with one that has text",
    "too_large_for_format": "the book is too large for this format: export it as epub or html",
    "render_failed": "the engine could not build this book: try another format, or report it",
    "worker_lost": "the build stopped before it finished: request the export again",
    "queue_timeout": "the export waited too long for a worker: request it again",
}


class Book(TypedDict):
    id: str
    title: str
    revision: int
    manuscript_bytes: int
    created_at: str
    updated_at: str
    chapters: list[dict[str, Any]]


class Export(TypedDict, total=False):
    id: str
    book_id: str
    format: str
    state: str
    attempt: int
    requested_at: str
    progress: dict[str, int]
    failure_code: str
    download_url: str
    expires_at: str
    size_bytes: int
    complete: bool
    skipped_chapters: list[dict[str, Any]]
    built_revision: int
    book_revision: int


class ExportPage(TypedDict, total=False):
    exports: list[Export]
    next_cursor: str


class ApiError(Exception):
    """A refusal from the API: its HTTP status, its error code, its message, and what to do."""

    def __init__(self, status: int, code: str, message: str):
        self.status, self.code, self.message = status, code, message
        self.advice = ADVICE.get(code, "")
        super().__init__(f"{code}: {message}" + (f" ({self.advice})" if self.advice else ""))


class ExportFailed(Exception):
    """The export ended without a file: failed (with its failure_code), cancelled or expired."""

    def __init__(self, export: Export):
        self.export = export
        code = export.get("failure_code") or export.get("state", "ended")
        self.code = code
        self.advice = ADVICE.get(code, "")
        super().__init__(
            f"export {export.get('id')} {export.get('state')}: {code}"
            + (f" ({self.advice})" if self.advice else "")
        )


class Client:
    def __init__(
        self,
        api: str,
        token: str,
        *,
        timeout: float = 60.0,
        tries: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.api, self.token = api.rstrip("/"), token
        self.timeout, self.tries, self.sleep, self.clock = timeout, tries, sleep, clock

    # ---- books ------------------------------------------------------------------------------------

    def create_book(self, title: str, manuscript: str) -> Book:
        """A new book. A manuscript over 5 MB is created empty, then uploaded and adopted."""
        data = manuscript.encode("utf-8")
        if len(data) <= INLINE_LIMIT:
            book: Book = self._call("POST", "/books", {"title": title, "manuscript": manuscript}, create=True)
            return book
        book = self._call("POST", "/books", {"title": title, "manuscript": ""}, create=True)
        return self.replace_manuscript(book["id"], data)

    def replace_manuscript(self, book_id: str, data: bytes, if_revision: int | None = None) -> Book:
        headers = {"If-Match": f'"{if_revision}"'} if if_revision is not None else {}
        path = f"/books/{_id(book_id)}/manuscript"
        if len(data) <= INLINE_LIMIT:
            book: Book = self._call("PUT", path, {"manuscript": data.decode("utf-8")}, headers=headers)
            return book
        upload = self._call("POST", f"/books/{_id(book_id)}/uploads", None, create=True)
        request = urllib.request.Request(upload["upload_url"], data=data, method="PUT")
        with urllib.request.urlopen(request, timeout=self.timeout) as answer:
            answer.read()
        book = self._call("PUT", path, {"upload_id": upload["upload_id"]}, headers=headers)
        return book

    def get_book(self, book_id: str) -> Book:
        book: Book = self._call("GET", f"/books/{_id(book_id)}")
        return book

    def delete_book(self, book_id: str) -> None:
        self._call("DELETE", f"/books/{_id(book_id)}")

    # ---- exports ----------------------------------------------------------------------------------

    def export(self, book_id: str, fmt: str, idempotency_key: str | None = None) -> Export:
        """Request an export. Pass the same key to retry a request safely from another process."""
        export: Export = self._call(
            "POST", f"/books/{_id(book_id)}/exports", {"format": fmt}, create=True, key=idempotency_key
        )
        return export

    def get_export(self, book_id: str, export_id: str) -> Export:
        export: Export = self._call("GET", f"/books/{_id(book_id)}/exports/{_id(export_id)}")
        return export

    def list_exports(self, book_id: str, cursor: str | None = None, limit: int | None = None) -> ExportPage:
        query = urllib.parse.urlencode({k: v for k, v in (("cursor", cursor), ("limit", limit)) if v})
        page: ExportPage = self._call(
            "GET", f"/books/{_id(book_id)}/exports" + (f"?{query}" if query else "")
        )
        return page

    def cancel_export(self, book_id: str, export_id: str) -> None:
        self._call("DELETE", f"/books/{_id(book_id)}/exports/{_id(export_id)}")

    def wait(
        self,
        book_id: str,
        export_id: str,
        *,
        on_progress: Callable[[Export], None] | None = None,
        every: float = 1.0,
        timeout: float = 900.0,
    ) -> Export:
        """Poll until the export ends. Returns it when ready; raises ExportFailed when it ended otherwise."""
        deadline = self.clock() + timeout
        while True:
            export = self.get_export(book_id, export_id)
            if on_progress is not None:
                on_progress(export)
            if export["state"] == "ready":
                return export
            if export["state"] in TERMINAL:
                raise ExportFailed(export)
            if self.clock() >= deadline:
                raise TimeoutError(f"export {export_id} still pending after {timeout:.0f} s")
            self.sleep(every)

    def download(
        self, url: str, out: Path, *, on_bytes: Callable[[int, int | None], None] | None = None
    ) -> int:
        """Stream the file at a download link to `out` (via a temporary name, so a half file never
        appears there). Calls on_bytes(done, total) as it goes. Returns the size."""
        partial = out.with_name(out.name + ".part")
        done = 0
        with urllib.request.urlopen(url, timeout=self.timeout) as answer, partial.open("wb") as sink:
            total = int(answer.headers.get("Content-Length") or 0) or None
            while chunk := answer.read(256 * 1024):
                sink.write(chunk)
                done += len(chunk)
                if on_bytes is not None:
                    on_bytes(done, total)
        partial.replace(out)
        return done

    # ---- the wire ---------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        create: bool = False,
        key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        sent = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **(headers or {})}
        if create:
            # One key for every try of this create: the API answers a retry with what the first made.
            sent["Idempotency-Key"] = key or uuid.uuid4().hex
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            sent["Content-Type"] = "application/json"
        for attempt in range(1, self.tries + 1):
            request = urllib.request.Request(self.api + path, data=data, headers=sent, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    raw = answer.read()
                    return json.loads(raw) if raw else None
            except urllib.error.HTTPError as refused:
                raw = refused.read()
                if refused.code in RETRIED and attempt < self.tries:
                    self.sleep(_retry_after(refused.headers.get("Retry-After"), attempt))
                    continue
                raise _api_error(refused.code, raw) from None
        raise AssertionError("unreachable")  # pragma: no cover


def _id(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _retry_after(header: str | None, attempt: int) -> float:
    try:
        return min(max(float(header or ""), 0.0), 60.0)
    except ValueError:
        return min(2.0**attempt, 30.0)


def _api_error(status: int, raw: bytes) -> ApiError:
    if status == 401:  # the gateway's own refusal: the request never reached Bindery
        return ApiError(status, "unauthorized", "the API refused the token")
    try:
        error = json.loads(raw)["error"]
        return ApiError(status, str(error["code"]), str(error["message"]))
    except (ValueError, KeyError, TypeError):
        return ApiError(status, f"http_{status}", raw.decode("utf-8", errors="replace")[:200] or "no body")
