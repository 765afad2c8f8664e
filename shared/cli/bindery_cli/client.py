"""A small typed client for any Bindery API, on urllib3.

    from bindery_cli.client import Client
    bindery = Client("http://127.0.0.1:3000", token)
    book = bindery.create_book("Lighthouse", Path("lighthouse.md").read_text())
    export = bindery.export(book["id"], "epub")
    done = bindery.wait(book["id"], export["id"])
    bindery.download(done["download_url"], Path("lighthouse.epub"))

Every create carries an Idempotency-Key, so a retry can never make a second export. A 429 or a 503 is
retried after the server's Retry-After. A connection that fails or an answer that never comes is retried
too, for every request that is safe to repeat (reads, deletes, and creates with their key); not for a
manuscript replacement, which might have gone through. Any other refusal raises `ApiError`, which names the
API's error code and says what to do about it. The retries are urllib3's.
"""

from __future__ import annotations

import json
import mimetypes
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import urllib3

from bindery_cli.answers import (
    ADVICE,
    ApiError,
    Book,
    Export,
    ExportFailed,
    ExportPage,
    LocalFileError,
)
from bindery_cli.downloads import keep_checked, part_path, stream_to
from bindery_cli.wire import Counted, Wire, query, quote_id

# Re-exported: a caller imports what the client raises and returns from the client.
__all__ = [
    "ADVICE",
    "ApiError",
    "Book",
    "Client",
    "Export",
    "ExportFailed",
    "ExportPage",
    "LocalFileError",
    "part_path",
]

# The API takes a body of this many encoded bytes (bindery.api.http.INLINE_BODY_LIMIT), with room here for the
# title and the JSON around the manuscript; a manuscript whose JSON is larger goes up as an upload.
INLINE_LIMIT = 5_000_000 - 4096


def _fits_inline(manuscript: str) -> bool:
    return len(json.dumps(manuscript, ensure_ascii=False).encode("utf-8")) <= INLINE_LIMIT


TERMINAL = frozenset({"ready", "failed", "cancelled", "expired"})
BATCH_ENDED = frozenset({"done", "partial", "failed", "cancelled"})


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
        on_wait: Callable[[float, int], None] | None = None,
    ):
        """`on_wait(seconds, status)` is told before each wait a Retry-After asked for (a 429, a 503)."""
        self.api, self.token = api.rstrip("/"), token
        self.timeout, self.tries, self.sleep, self.clock = timeout, tries, sleep, clock
        self._wire = Wire(self.api, token, timeout=timeout, tries=tries, sleep=sleep, on_wait=on_wait)

    # ---- books ------------------------------------------------------------------------------------

    def create_book(
        self,
        title: str,
        manuscript: str,
        metadata: dict[str, Any] | None = None,
        *,
        on_bytes: Callable[[int, int], None] | None = None,
    ) -> Book:
        """A new book. A manuscript over 5 MB is created empty, then uploaded (on_bytes(sent, total) as it
        goes) and adopted."""
        described = {"metadata": metadata} if metadata else {}
        if _fits_inline(manuscript):
            body = {"title": title, "manuscript": manuscript, **described}
            book: Book = self._wire.call("POST", "/books", body, create=True)
            return book
        book = self._wire.call("POST", "/books", {"title": title, "manuscript": "", **described}, create=True)
        return self.replace_manuscript(book["id"], manuscript.encode("utf-8"), on_bytes=on_bytes)

    def edit_book(
        self,
        book_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        if_revision: int | None = None,
    ) -> Book:
        """A new title, a merge patch of the metadata (None in it removes a field), or both."""
        headers = {"If-Match": f'"{if_revision}"'} if if_revision is not None else {}
        body = {k: v for k, v in (("title", title), ("metadata", metadata)) if v is not None}
        book: Book = self._wire.call("PATCH", f"/books/{quote_id(book_id)}", body, headers=headers)
        return book

    def add_asset(self, book_id: str, name: str, data: bytes, content_type: str | None = None) -> Book:
        """Upload an image the manuscript names (`images/coast.png`) and have the book adopt it. Its type
        is the one its name says unless given; the API checks it against the bytes either way."""
        kind = content_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        ticket = self._wire.call(
            "POST",
            f"/books/{quote_id(book_id)}/assets",
            {"name": name, "content_type": kind, "size": len(data)},
        )
        # The same bytes to the same key: repeating the PUT changes nothing.
        sent = self._wire.send(
            "PUT", ticket["upload_url"], body=data, headers=ticket["headers"], repeatable=True
        )
        if sent.status >= 300:
            raise ApiError(sent.status, f"http_{sent.status}", f"the upload URL refused {name}")
        path = f"/books/{quote_id(book_id)}/assets/{urllib.parse.quote(name, safe='/')}"
        book: Book = self._wire.call("PUT", path, {"upload_id": ticket["upload_id"]})
        return book

    def delete_asset(self, book_id: str, name: str) -> None:
        self._wire.call("DELETE", f"/books/{quote_id(book_id)}/assets/{urllib.parse.quote(name, safe='/')}")

    def replace_manuscript(
        self,
        book_id: str,
        data: bytes,
        if_revision: int | None = None,
        *,
        on_bytes: Callable[[int, int], None] | None = None,
    ) -> Book:
        """The book's new manuscript: inline up to 5 MB, else uploaded to a presigned POST (on_bytes(sent,
        total) as it goes) and adopted."""
        headers = {"If-Match": f'"{if_revision}"'} if if_revision is not None else {}
        path = f"/books/{quote_id(book_id)}/manuscript"
        if len(data) <= INLINE_LIMIT and _fits_inline(text := data.decode("utf-8")):
            book: Book = self._wire.call("PUT", path, {"manuscript": text}, headers=headers)
            return book
        upload = self._wire.call("POST", f"/books/{quote_id(book_id)}/uploads", None, create=True)
        # The same bytes to the same key: repeating the upload changes nothing. A form POST, the file last.
        form = {**upload["fields"], "file": ("manuscript.md", data, "text/markdown")}
        encoded, content_type = urllib3.encode_multipart_formdata(form)
        sent = self._wire.send(
            "POST",
            upload["upload_url"],
            body=Counted(encoded, on_bytes),
            headers={"Content-Type": content_type, "Content-Length": str(len(encoded))},
            repeatable=True,
        )
        if sent.status >= 300:
            raise ApiError(sent.status, f"http_{sent.status}", "the upload URL refused the manuscript")
        book = self._wire.call("PUT", path, {"upload_id": upload["upload_id"]}, headers=headers)
        return book

    def get_book(self, book_id: str, *, every_chapter: bool = True) -> Book:
        """The book with all its chapters: the API pages them (a thousand an answer), this follows. With
        every_chapter=False, only the first page (`chapters_total` counts them all)."""
        book: Book = self._wire.call("GET", f"/books/{quote_id(book_id)}")
        while every_chapter and book.get("chapters_next") is not None:
            page = self._wire.call(
                "GET", f"/books/{quote_id(book_id)}?chapters_after={book['chapters_next']}"
            )
            book["chapters"] += page["chapters"]
            book["chapters_next"] = page["chapters_next"]
        return book

    def delete_book(self, book_id: str) -> None:
        self._wire.call("DELETE", f"/books/{quote_id(book_id)}")

    # ---- exports ----------------------------------------------------------------------------------

    def export(
        self,
        book_id: str,
        fmt: str,
        idempotency_key: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> Export:
        """Request an export. Pass the same key to retry a request safely from another process."""
        body: dict[str, Any] = {"format": fmt, **({"options": options} if options else {})}
        export: Export = self._wire.call(
            "POST", f"/books/{quote_id(book_id)}/exports", body, create=True, key=idempotency_key
        )
        return export

    def get_export(self, book_id: str, export_id: str) -> Export:
        export: Export = self._wire.call("GET", f"/books/{quote_id(book_id)}/exports/{quote_id(export_id)}")
        return export

    def list_books(self, cursor: str | None = None, limit: int | None = None) -> dict[str, Any]:
        page: dict[str, Any] = self._wire.call("GET", "/books" + query(cursor=cursor, limit=limit))
        return page

    def list_exports(self, book_id: str, cursor: str | None = None, limit: int | None = None) -> ExportPage:
        query = urllib.parse.urlencode({k: v for k, v in (("cursor", cursor), ("limit", limit)) if v})
        page: ExportPage = self._wire.call(
            "GET", f"/books/{quote_id(book_id)}/exports" + (f"?{query}" if query else "")
        )
        return page

    def cancel_export(self, book_id: str, export_id: str) -> None:
        self._wire.call("DELETE", f"/books/{quote_id(book_id)}/exports/{quote_id(export_id)}")

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
        self,
        url: str,
        out: Path,
        *,
        on_bytes: Callable[[int, int | None], None] | None = None,
        sha256: str | None = None,
    ) -> int:
        """Stream the file at a download link to `out` (via a `.part` beside it, so a half file never
        appears there). Calls on_bytes(done, total) as it goes. Returns the size.

        With `sha256`, the `.part` is named after it (`out.<first 12 hex>.part`): one left by a download of
        this very file that was cut off is resumed with an HTTP Range request for the rest (S3 answers
        206; should the server send the whole file instead, 200, it starts over), and one of another
        build is never mistaken for it. The whole file is then checked, and a mismatch raises
        ApiError("checksum_mismatch") and keeps nothing. Without `sha256` nothing tells a `.part` of this
        file from another's, so it always starts over. A file here that cannot be written raises
        LocalFileError naming it and the system's reason."""
        partial = part_path(out, sha256)
        try:
            done = partial.stat().st_size if sha256 is not None and partial.is_file() else 0
        except OSError as exc:
            raise LocalFileError(partial, exc.strerror or str(exc)) from None
        headers = {"Range": f"bytes={done}-"} if done else {}
        answer = self._wire.send("GET", url, repeatable=True, preload_content=False, headers=headers)
        try:
            if done and answer.status == 416:  # the .part is the whole file already
                answer.drain_conn()
            elif answer.status not in (200, 206):
                raise ApiError(
                    answer.status, f"http_{answer.status}", "the download link refused: it may have lapsed"
                )
            else:
                if answer.status == 200:
                    done = 0  # not a resume: the whole file
                length = int(answer.headers.get("Content-Length") or 0)
                total = done + length if length else None
                done = stream_to(answer, partial, done, total, on_bytes)
        finally:
            answer.release_conn()
        keep_checked(partial, out, sha256)
        return done

    # ---- batches and limits ----------------------------------------------------------------------

    def create_batch(
        self, targets: list[dict[str, Any]], idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Request many exports as one job: each target a {"book_id", "format"[, "options"]}."""
        batch: dict[str, Any] = self._wire.call(
            "POST", "/batches", {"exports": targets}, create=True, key=idempotency_key
        )
        return batch

    def get_batch(self, batch_id: str) -> dict[str, Any]:
        batch: dict[str, Any] = self._wire.call("GET", f"/batches/{quote_id(batch_id)}")
        return batch

    def list_batches(self, cursor: str | None = None, limit: int | None = None) -> dict[str, Any]:
        query = urllib.parse.urlencode({k: v for k, v in (("cursor", cursor), ("limit", limit)) if v})
        page: dict[str, Any] = self._wire.call("GET", "/batches" + (f"?{query}" if query else ""))
        return page

    def cancel_batch(self, batch_id: str) -> None:
        self._wire.call("DELETE", f"/batches/{quote_id(batch_id)}")

    # ---- webhooks and the events feed -------------------------------------------------------------

    def create_webhook(self, url: str, events: list[str], description: str | None = None) -> dict[str, Any]:
        """A new endpoint. Its answer holds the signing `secret`, the only time the API shows it."""
        body: dict[str, Any] = {"url": url, "events": events}
        if description is not None:
            body["description"] = description
        made: dict[str, Any] = self._wire.call("POST", "/webhooks", body, create=True)
        return made

    def list_webhooks(self, cursor: str | None = None, limit: int | None = None) -> dict[str, Any]:
        page: dict[str, Any] = self._wire.call("GET", "/webhooks" + query(cursor=cursor, limit=limit))
        return page

    def get_webhook(self, endpoint_id: str) -> dict[str, Any]:
        endpoint: dict[str, Any] = self._wire.call("GET", f"/webhooks/{quote_id(endpoint_id)}")
        return endpoint

    def edit_webhook(self, endpoint_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Any of url, events, description, and `enabled: true` to enable a disabled endpoint again."""
        endpoint: dict[str, Any] = self._wire.call("PATCH", f"/webhooks/{quote_id(endpoint_id)}", changes)
        return endpoint

    def delete_webhook(self, endpoint_id: str) -> None:
        self._wire.call("DELETE", f"/webhooks/{quote_id(endpoint_id)}")

    def rotate_secret(self, endpoint_id: str) -> dict[str, Any]:
        """A new secret, shown once; the old one signs beside it for 24 h."""
        endpoint: dict[str, Any] = self._wire.call("POST", f"/webhooks/{quote_id(endpoint_id)}/rotate-secret")
        return endpoint

    def list_deliveries(
        self, endpoint_id: str, state: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        path = f"/webhooks/{quote_id(endpoint_id)}/deliveries" + query(
            state=state, cursor=cursor, limit=limit
        )
        page: dict[str, Any] = self._wire.call("GET", path)
        return page

    def redeliver(self, endpoint_id: str, delivery_id: str) -> dict[str, Any]:
        path = f"/webhooks/{quote_id(endpoint_id)}/deliveries/{quote_id(delivery_id)}/redeliver"
        delivery: dict[str, Any] = self._wire.call("POST", path)
        return delivery

    def events(self, after: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """A page of the feed after a cursor: `events`, `next_cursor` (pass it as `after`) and `head`."""
        page: dict[str, Any] = self._wire.call("GET", "/events" + query(after=after, limit=limit))
        return page

    def me(self) -> dict[str, Any]:
        me: dict[str, Any] = self._wire.call("GET", "/me")
        return me

    def wait_batch(
        self,
        batch_id: str,
        *,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        every: float = 1.0,
        timeout: float = 1800.0,
    ) -> dict[str, Any]:
        """Poll until the batch has ended and its bundle (if it gets one) has been built or has failed."""
        deadline = self.clock() + timeout
        while True:
            batch = self.get_batch(batch_id)
            if on_progress is not None:
                on_progress(batch)
            bundle = batch.get("bundle")
            if batch["status"] in BATCH_ENDED and (bundle is None or bundle["state"] != "pending"):
                return batch
            if self.clock() >= deadline:
                raise TimeoutError(f"batch {batch_id} still {batch['status']} after {timeout:.0f} s")
            self.sleep(every)
