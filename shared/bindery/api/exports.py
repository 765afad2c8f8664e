"""The exports' routes, and what a caller holds (GET /me)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response

from bindery import errors
from bindery.api.http import (
    SMALL_BODY_LIMIT,
    answer,
    caller,
    class_of,
    no_content,
    read_body,
    reads,
    services,
    writes,
)
from bindery.exports import RETRY_AFTER_PENDING


@writes.post("/books/<book_id>/exports")
def create_export(book_id: str) -> Response:
    who = caller(writes)
    body = read_body(writes, SMALL_BODY_LIMIT, {"format": object, "options": object}, optional=("options",))
    key = writes.current_event.headers.get("idempotency-key")
    options = body.get("options", {})
    if options is None:  # left out, it is {}; given, it is an object (the outside test sent null)
        raise errors.BadRequest("options must be a JSON object", code="invalid_options")
    exports = services(writes).exports
    view, created = exports.submit(who, book_id, body["format"], key, options, class_of(writes))
    headers = {"Location": f"/books/{book_id}/exports/{view['id']}", "Retry-After": str(RETRY_AFTER_PENDING)}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return answer(202, view, headers)


@writes.delete("/books/<book_id>/exports/<export_id>")
def cancel_export(book_id: str, export_id: str) -> Response:
    who = caller(writes)
    services(writes).exports.cancel(who, book_id, export_id)
    return no_content()


@reads.get("/books/<book_id>/exports")
def list_exports(book_id: str) -> Response:
    who = caller(reads)
    params = reads.current_event.query_string_parameters or {}
    page = services(reads).exports.list_exports(who, book_id, params.get("limit"), params.get("cursor"))
    return answer(200, page)


@reads.get("/books/<book_id>/exports/<export_id>")
def get_export(book_id: str, export_id: str) -> Response:
    who = caller(reads)
    view = services(reads).exports.read(who, book_id, export_id)
    headers = {"Retry-After": str(RETRY_AFTER_PENDING)} if view["state"] == "pending" else None
    return answer(200, view, headers)


@reads.get("/me")
def get_me() -> Response:
    who = caller(reads)
    return answer(200, services(reads).exports.me(who, class_of(reads)))
