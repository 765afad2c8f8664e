"""The HTTP API: routes, the caller, bodies, and the one place domain errors become HTTP answers.

Two resolvers, one per function, so that the poll function's code and role hold no write:
`writes` (submit) and `reads` (poll). The caller is the JWT's `sub` that API Gateway's authorizer
verified, never a header or a body field.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from bindery import errors
from bindery.exports import RETRY_AFTER_PENDING, Exports
from bindery.library import book_view
from bindery.limits import CallerClass, caller_class
from bindery.observability import logger
from bindery.storage import Book, Chapter, StorageError

JSON = "application/json"
# A request for an export is a few dozen bytes; anything near this is not one.
SMALL_BODY_LIMIT = 16 * 1024
# A batch of at most 90 targets, each a book id, a format and its options.
BATCH_BODY_LIMIT = 64 * 1024
# A body with a manuscript inline, in encoded bytes. Lambda takes at most 6 MB of event, the body inside it
# a JSON string, so its quotes and backslashes are escaped once more: this stays under 6 MB unless a fifth
# of the body is escapes. Larger manuscripts go through POST /books/{bookId}/uploads.
INLINE_BODY_LIMIT = 5_000_000
# A book's answer lists at most this many chapters (titles are at most 500 characters): far under Lambda's
# 6 MB answer. `chapters_next` names where the next page starts.
CHAPTERS_PAGE = 1_000
# Every answer is one caller's own, and some carry a presigned URL, which is a bearer credential.
NO_STORE = {"Cache-Control": "no-store"}

writes = APIGatewayHttpResolver()
reads = APIGatewayHttpResolver()


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=status,
        content_type=JSON,
        body=json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        headers={**NO_STORE, **(headers or {})},
    )


def _error_body(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **details}}


def _register_error_handlers(app: APIGatewayHttpResolver) -> None:
    @app.exception_handler(errors.BinderyError)
    def refusal(exc: errors.BinderyError) -> Response:
        details = dict(exc.details)
        headers = _rate_limit(app)
        retry_after = details.pop("retry_after", None)
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        return _json(exc.status, _error_body(exc.code, exc.message, **details), headers)

    def with_rate_limit(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response:
        response = next_middleware(app)
        response.headers.update(_rate_limit(app))
        return response

    app.use(middlewares=[with_rate_limit])

    @app.exception_handler(StorageError)
    def unavailable(exc: StorageError) -> Response:
        logger.exception("storage unavailable")
        return _json(
            503, _error_body("unavailable", "storage is busy; try again shortly"), {"Retry-After": "1"}
        )

    @app.not_found
    def no_route(exc: Exception) -> Response:
        # The same body a missing book gets: an unknown path tells a prober nothing more.
        return _json(404, _error_body("not_found", "no such book or export"))


_register_error_handlers(writes)
_register_error_handlers(reads)


def _claims(app: APIGatewayHttpResolver) -> dict[str, Any]:
    authorizer = app.current_event.request_context.authorizer
    return (authorizer.jwt_claim if authorizer is not None else None) or {}


def _caller(app: APIGatewayHttpResolver) -> str:
    sub = _claims(app).get("sub")
    if not isinstance(sub, str) or not sub:
        raise errors.Unauthorized("a valid bearer token is required", code="unauthorized")
    return sub


def _class(app: APIGatewayHttpResolver) -> CallerClass:
    return caller_class(_claims(app))


def _rate_limit(app: APIGatewayHttpResolver) -> dict[str, str]:
    """Every answer to a caller carries its live-export cap (one read of its live item). An answer with no
    caller (401) carries none, and a read that fails leaves them out rather than fail the answer."""
    sub = _claims(app).get("sub")
    if not isinstance(sub, str) or not sub or "exports" not in app.context:
        return {}
    try:
        return _exports(app).rate_limit(sub, _class(app))
    except StorageError:
        return {}


def _exports(app: APIGatewayHttpResolver) -> Exports:
    exports: Exports = app.context["exports"]
    return exports


def _body(
    app: APIGatewayHttpResolver,
    limit: int,
    fields: dict[str, type],
    *,
    one_of: bool = False,
    optional: tuple[str, ...] = (),
    too_large: Callable[[], errors.BinderyError] | None = None,
) -> dict[str, Any]:
    """The JSON object body, with exactly the named fields of the named types (or, with `one_of`, exactly
    one of them). Anything else is a 4xx that names the problem, raised before anything is written."""
    event = app.current_event
    try:
        raw: bytes = (event.body or "").encode("utf-8")
    except UnicodeEncodeError as exc:  # a body that reached us holding a lone surrogate
        raise errors.BadRequest(f"request body is not valid UTF-8: {exc}", code="invalid_json") from None
    if event.is_base64_encoded:
        raw = base64.b64decode(raw)
    if len(raw) > limit:
        raise (
            too_large()
            if too_large
            else errors.PayloadTooLarge(f"request body is over {limit:,} bytes", code="body_too_large")
        )
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError included: a body that is not UTF-8 is not JSON
        raise errors.BadRequest(f"request body is not valid UTF-8 JSON: {exc}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise errors.BadRequest("request body must be a JSON object", code="invalid_json")
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise errors.BadRequest(f"unknown field(s): {', '.join(unknown)[:200]}", code="unknown_field")
    if one_of and len(data) != 1:
        raise errors.BadRequest(f"send exactly one of: {', '.join(fields)}", code="missing_field")
    for name, kind in fields.items():
        if name not in data:
            if one_of or name in optional:
                continue
            raise errors.BadRequest(f"missing field: {name}", code="missing_field")
        if kind is str and not isinstance(data[name], str):
            raise errors.BadRequest(f"field {name} must be a string", code="invalid_field")
        if isinstance(data[name], str) and not _is_unicode(data[name]):
            # JSON's \ud800 escape decodes to a lone surrogate, which no UTF-8 can hold.
            raise errors.BadRequest(
                f"field {name} holds a lone surrogate (an unpaired \\ud800-\\udfff escape): "
                "text must be valid Unicode",
                code="invalid_unicode",
            )
    return data


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _manuscript_too_large() -> errors.PayloadTooLarge:
    return errors.PayloadTooLarge(
        f"a manuscript sent inline may be at most {INLINE_BODY_LIMIT:,} bytes of JSON; upload a larger one "
        'with POST /books/{bookId}/uploads and then PUT /books/{bookId}/manuscript with {"upload_id": ...}',
        code="manuscript_too_large",
        limit=INLINE_BODY_LIMIT,
    )


def _book_reply(
    status: int, book: Book, chapters: list[Chapter], headers: dict[str, str] | None = None, after: int = 0
) -> Response:
    # The revision is the book's ETag: what If-Match on a manuscript replacement compares against.
    view = book_view(book, chapters, after, CHAPTERS_PAGE)
    return _json(status, view, {"ETag": f'"{book.revision}"', **(headers or {})})


# ---- writes (the submit function) ----------------------------------------------------------------


@writes.post("/books")
def create_book() -> Response:
    caller = _caller(writes)
    exports = _exports(writes)
    body = _body(
        writes,
        INLINE_BODY_LIMIT,
        {"title": str, "manuscript": str, "metadata": object},
        optional=("metadata",),
        too_large=_manuscript_too_large,
    )
    key = writes.current_event.headers.get("idempotency-key")
    book, chapters, created = exports.books.create_book(
        caller, body["title"], body["manuscript"], key, body.get("metadata")
    )
    headers = {"Location": f"/books/{book.id}"}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return _book_reply(201 if created else 200, book, chapters, headers)


@writes.patch("/books/<book_id>")
def edit_book(book_id: str) -> Response:
    caller = _caller(writes)
    exports = _exports(writes)
    body = _body(writes, SMALL_BODY_LIMIT, {"title": str, "metadata": object}, optional=("title", "metadata"))
    if not body:
        raise errors.BadRequest("send title, metadata, or both", code="missing_field")
    if_match = writes.current_event.headers.get("if-match")
    book = exports.books.edit_book(caller, book_id, if_match, body.get("title"), body.get("metadata"))
    return _book_reply(200, book, exports.store.read_chapters(book.id, book.cut))


@writes.post("/books/<book_id>/assets")
def create_asset(book_id: str) -> Response:
    caller = _caller(writes)
    body = _body(writes, SMALL_BODY_LIMIT, {"name": str, "content_type": str, "size": object})
    books = _exports(writes).books
    upload = books.create_asset_upload(caller, book_id, body["name"], body["content_type"], body["size"])
    return _json(201, upload)


# An asset's name is a path (images/coast.png): the route takes the rest of the path, as API Gateway's
# greedy {name+} does, and a client may send its slashes as they are or as %2F.
@writes.put("/books/<book_id>/assets/.+")
def adopt_asset(book_id: str) -> Response:
    caller = _caller(writes)
    exports = _exports(writes)
    body = _body(writes, SMALL_BODY_LIMIT, {"upload_id": str})
    if_match = writes.current_event.headers.get("if-match")
    name = _asset_in_path(writes)
    book = exports.books.adopt_asset(caller, book_id, name, body["upload_id"], if_match)
    return _book_reply(200, book, exports.store.read_chapters(book.id, book.cut))


@writes.delete("/books/<book_id>/assets/.+")
def delete_asset(book_id: str) -> Response:
    caller = _caller(writes)
    if_match = writes.current_event.headers.get("if-match")
    _exports(writes).books.delete_asset(caller, book_id, _asset_in_path(writes), if_match)
    return Response(status_code=204, body="")


def _asset_in_path(app: APIGatewayHttpResolver) -> str:
    return unquote(app.current_event.path.split("/assets/", 1)[1])


@writes.put("/books/<book_id>/manuscript")
def replace_manuscript(book_id: str) -> Response:
    caller = _caller(writes)
    exports = _exports(writes)
    body = _body(
        writes,
        INLINE_BODY_LIMIT,
        {"manuscript": str, "upload_id": str},
        one_of=True,
        too_large=_manuscript_too_large,
    )
    book, chapters = exports.books.replace_manuscript(
        caller,
        book_id,
        writes.current_event.headers.get("if-match"),
        manuscript=body.get("manuscript"),
        upload_id=body.get("upload_id"),
    )
    return _book_reply(200, book, chapters)


@writes.post("/books/<book_id>/uploads")
def create_upload(book_id: str) -> Response:
    caller = _caller(writes)
    return _json(201, _exports(writes).books.create_upload(caller, book_id))


@writes.delete("/books/<book_id>")
def delete_book(book_id: str) -> Response:
    caller = _caller(writes)
    _exports(writes).books.delete_book(caller, book_id)
    return Response(status_code=204, body="")


@writes.post("/books/<book_id>/exports")
def create_export(book_id: str) -> Response:
    caller = _caller(writes)
    body = _body(writes, SMALL_BODY_LIMIT, {"format": object, "options": object}, optional=("options",))
    key = writes.current_event.headers.get("idempotency-key")
    view, created = _exports(writes).submit(
        caller, book_id, body["format"], key, body.get("options"), _class(writes)
    )
    headers = {"Location": f"/books/{book_id}/exports/{view['id']}", "Retry-After": str(RETRY_AFTER_PENDING)}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return _json(202, view, headers)


@writes.delete("/books/<book_id>/exports/<export_id>")
def cancel_export(book_id: str, export_id: str) -> Response:
    caller = _caller(writes)
    _exports(writes).cancel(caller, book_id, export_id)
    return Response(status_code=204, body="")


@writes.post("/batches")
def create_batch() -> Response:
    caller = _caller(writes)
    body = _body(writes, BATCH_BODY_LIMIT, {"exports": object})
    key = writes.current_event.headers.get("idempotency-key")
    view, created = _exports(writes).create_batch(caller, _class(writes), body["exports"], key)
    headers = {"Location": f"/batches/{view['id']}", "Retry-After": str(RETRY_AFTER_PENDING)}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return _json(202, view, headers)


@writes.delete("/batches/<batch_id>")
def cancel_batch(batch_id: str) -> Response:
    caller = _caller(writes)
    _exports(writes).cancel_batch(caller, batch_id)
    return Response(status_code=204, body="")


# ---- reads (the poll function) -------------------------------------------------------------------


@reads.get("/batches")
def list_batches() -> Response:
    caller = _caller(reads)
    params = reads.current_event.query_string_parameters or {}
    return _json(200, _exports(reads).list_batches(caller, params.get("limit"), params.get("cursor")))


@reads.get("/batches/<batch_id>")
def get_batch(batch_id: str) -> Response:
    caller = _caller(reads)
    view = _exports(reads).read_batch(caller, batch_id)
    headers = {"Retry-After": str(RETRY_AFTER_PENDING)} if view["status"] in ("queued", "running") else None
    return _json(200, view, headers)


@reads.get("/me")
def get_me() -> Response:
    caller = _caller(reads)
    return _json(200, _exports(reads).me(caller, _class(reads)))


@reads.get("/books")
def list_books() -> Response:
    caller = _caller(reads)
    params = reads.current_event.query_string_parameters or {}
    return _json(200, _exports(reads).books.list_books(caller, params.get("limit"), params.get("cursor")))


@reads.get("/books/<book_id>")
def get_book(book_id: str) -> Response:
    caller = _caller(reads)
    after = (reads.current_event.query_string_parameters or {}).get("chapters_after", "0")
    if not (after.isascii() and after.isdigit()) or len(after) > 9:  # isdigit alone takes "²"
        raise errors.BadRequest(
            "chapters_after must be a chapter's ordinal (a whole number), as chapters_next gives it",
            code="invalid_chapters_after",
        )
    book, chapters = _exports(reads).books.get_book(caller, book_id)
    return _book_reply(200, book, chapters, after=int(after))


@reads.get("/books/<book_id>/exports")
def list_exports(book_id: str) -> Response:
    caller = _caller(reads)
    params = reads.current_event.query_string_parameters or {}
    page = _exports(reads).list_exports(caller, book_id, params.get("limit"), params.get("cursor"))
    return _json(200, page)


@reads.get("/books/<book_id>/exports/<export_id>")
def get_export(book_id: str, export_id: str) -> Response:
    caller = _caller(reads)
    view = _exports(reads).read(caller, book_id, export_id)
    headers = {"Retry-After": str(RETRY_AFTER_PENDING)} if view["state"] == "pending" else None
    return _json(200, view, headers)


# ---- webhooks and the events feed ----------------------------------------------------------------


@writes.post("/webhooks")
def create_webhook() -> Response:
    caller = _caller(writes)
    body = _body(
        writes,
        SMALL_BODY_LIMIT,
        {"url": object, "events": object, "description": object},
        optional=("description",),
    )
    made = _exports(writes).hooks.register(caller, body)
    return _json(201, made, {"Location": f"/webhooks/{made['id']}"})


@writes.patch("/webhooks/<endpoint_id>")
def edit_webhook(endpoint_id: str) -> Response:
    caller = _caller(writes)
    fields: dict[str, type] = {"url": object, "events": object, "description": object, "enabled": object}
    body = _body(writes, SMALL_BODY_LIMIT, fields, optional=tuple(fields))
    if not body:
        raise errors.BadRequest(f"send one or more of: {', '.join(fields)}", code="missing_field")
    return _json(200, _exports(writes).hooks.patch(caller, endpoint_id, body))


@writes.delete("/webhooks/<endpoint_id>")
def delete_webhook(endpoint_id: str) -> Response:
    caller = _caller(writes)
    _exports(writes).hooks.delete(caller, endpoint_id)
    return Response(status_code=204, body="")


@writes.post("/webhooks/<endpoint_id>/rotate-secret")
def rotate_webhook_secret(endpoint_id: str) -> Response:
    caller = _caller(writes)
    return _json(200, _exports(writes).hooks.rotate(caller, endpoint_id))


@writes.post("/webhooks/<endpoint_id>/deliveries/<delivery_id>/redeliver")
def redeliver(endpoint_id: str, delivery_id: str) -> Response:
    caller = _caller(writes)
    return _json(202, _exports(writes).hooks.redeliver(caller, endpoint_id, delivery_id))


@reads.get("/webhooks")
def list_webhooks() -> Response:
    caller = _caller(reads)
    params = reads.current_event.query_string_parameters or {}
    return _json(200, _exports(reads).hooks.list(caller, params.get("limit"), params.get("cursor")))


@reads.get("/webhooks/<endpoint_id>")
def get_webhook(endpoint_id: str) -> Response:
    caller = _caller(reads)
    return _json(200, _exports(reads).hooks.get(caller, endpoint_id))


@reads.get("/webhooks/<endpoint_id>/deliveries")
def list_deliveries(endpoint_id: str) -> Response:
    caller = _caller(reads)
    params = reads.current_event.query_string_parameters or {}
    page = _exports(reads).hooks.deliveries(
        caller, endpoint_id, params.get("state"), params.get("limit"), params.get("cursor")
    )
    return _json(200, page)


@reads.get("/events")
def list_events() -> Response:
    caller = _caller(reads)
    params = reads.current_event.query_string_parameters or {}
    return _json(200, _exports(reads).hooks.events(caller, params.get("after"), params.get("limit")))
