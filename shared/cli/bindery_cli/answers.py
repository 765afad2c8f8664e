"""What the API answers, as the client hands it on: the shapes of a book and an export, and a refusal as
an error that names its code and what a caller can do about it."""

from __future__ import annotations

import fnmatch
import json
from typing import Any, NotRequired, TypedDict

# What a caller can do about each error code the API answers with.
ADVICE = {
    "unauthorized": "check the token (BINDERY_TOKEN or --token): missing, expired, or not for this API",
    "not_found": "check the ids: `bindery books list` shows your books",
    "too_many_live_exports": "wait for one of your pending exports to finish, or cancel one",
    "manuscript_too_large": "the most a manuscript may be is 500 MB",
    "unknown_format": "use one of: markdown, html, epub, pdf, docx",
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
    "too_many_live_batches": "wait for one of your batches to end, or cancel one",
    "too_many_targets": "split the batch: `bindery me` shows how many targets your class allows",
    "service_at_capacity": "the service is at its cap of exports in progress: try again in a minute",
    "book_deleted": "the book was deleted while its export was building: nothing is left to download",
    "endpoint_disabled": "enable it first: `bindery webhooks edit ID --enable`",
    "storage_budget_exceeded": "cancel ready exports you have downloaded, or wait for links to lapse",
}


class Book(TypedDict):
    id: str
    title: str
    revision: int
    manuscript_bytes: int
    created_at: str
    updated_at: str
    chapters: list[dict[str, Any]]
    chapters_total: int
    chapters_next: int | None
    metadata: NotRequired[dict[str, Any]]
    assets: NotRequired[list[dict[str, Any]]]
    identifier: NotRequired[str]


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
    download_name: str
    sha256: str
    missing_images: list[dict[str, Any]]
    warnings: list[dict[str, Any]]
    warnings_total: int


class ExportPage(TypedDict, total=False):
    exports: list[Export]
    next_cursor: str


class ApiError(Exception):
    """A refusal from the API: its HTTP status, its error code, its message, and what to do."""

    def __init__(self, status: int, code: str, message: str, advice: str | None = None):
        self.status, self.code, self.message = status, code, message
        self.advice = ADVICE.get(code, "") if advice is None else advice
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


class LocalFileError(Exception):
    """A file here could not be written (no such folder, a directory, the disk full, `ulimit -f`): the
    path and the system's reason, not the network's."""

    def __init__(self, path: object, reason: str):
        self.path, self.reason = path, reason
        super().__init__(f"cannot write {path}: {reason}")


# What to check when a resource is not found, by the path asked for (the most specific first).
NOT_FOUND = (
    ("/webhooks/*/deliveries/", "check the ids: `bindery webhooks deliveries ENDPOINT` lists its deliveries"),
    ("/webhooks/", "check the endpoint's id: `bindery webhooks list` shows yours"),
    ("/batches/", "check the batch's id: `bindery batch list` shows yours"),
    ("/books/*/exports/", "check the ids: `bindery exports list BOOK` shows the book's exports"),
    ("/books/*/assets/", "check the image's name: `bindery books assets list BOOK` shows the book's"),
    ("/books/", "check the book's id: `bindery books list` shows yours"),
)


def not_found_advice(path: str) -> str:
    """The hint for a not_found answer to a request for `path` (/books/B/exports/E, /batches/X...)."""
    for pattern, advice in NOT_FOUND:
        if fnmatch.fnmatchcase(path.split("?", 1)[0], f"{pattern}*"):
            return advice
    return ADVICE["not_found"]


NOT_BINDERY = "the answer is not Bindery's JSON (check --api)"


def refusal(status: int, raw: bytes, path: str) -> ApiError:
    """The error an answer of 400 or more to a request for `path` is."""
    if status == 401:  # the gateway's own refusal: the request never reached Bindery
        return ApiError(status, "unauthorized", "the API refused the token")
    try:
        error = json.loads(raw)["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        # Not Bindery's answer (another server at --api, a proxy's page): one line, not its HTML.
        return ApiError(status, f"http_{status}", NOT_BINDERY)
    # A not_found says which id to check, and where to find the right one.
    return ApiError(status, code, message, not_found_advice(path) if code == "not_found" else None)
