"""What every route shares: the two resolvers, the services they call, the caller, a request's body, and
the one place domain errors become HTTP answers.

Two resolvers, one per function, so that the poll function's code and role hold no write:
`writes` (submit) and `reads` (poll). Each resource's routes are a module of this package beside this one.
The caller is the JWT's `sub` that API Gateway's authorizer verified, never a header or a body field.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from bindery import errors
from bindery.assets import BookAssets
from bindery.batches import BatchRequests
from bindery.exports import ExportRequests
from bindery.library import Library
from bindery.limits import CallerClass, caller_class
from bindery.observability import logger
from bindery.storage import StorageError
from bindery.webhooks import Webhooks

JSON = "application/json"
# A request for an export is a few dozen bytes; anything near this is not one.
SMALL_BODY_LIMIT = 16 * 1024
# A batch of at most 90 targets, each a book id, a format and its options.
BATCH_BODY_LIMIT = 64 * 1024
# A body with a manuscript inline, in encoded bytes. Lambda takes at most 6 MB of event, the body inside it
# a JSON string, so its quotes and backslashes are escaped once more: this stays under 6 MB unless a fifth
# of the body is escapes. Larger manuscripts go through POST /books/{bookId}/uploads.
INLINE_BODY_LIMIT = 5_000_000
# Every answer is one caller's own, and some carry a presigned URL, which is a bearer credential.
NO_STORE = {"Cache-Control": "no-store"}

writes = APIGatewayHttpResolver()
reads = APIGatewayHttpResolver()


@dataclass(frozen=True)
class ApiServices:
    """What the routes call, composed by `bindery.wiring.api` and handed to a resolver as its context."""

    exports: ExportRequests
    batches: BatchRequests
    books: Library
    assets: BookAssets
    hooks: Webhooks


def services(app: APIGatewayHttpResolver) -> ApiServices:
    found: ApiServices = app.context["services"]
    return found


def answer(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=status,
        content_type=JSON,
        body=json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        headers={**NO_STORE, **(headers or {})},
    )


def no_content() -> Response:
    return Response(status_code=204, body="")


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
        return answer(exc.status, _error_body(exc.code, exc.message, **details), headers)

    def with_rate_limit(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response:
        response = next_middleware(app)
        response.headers.update(_rate_limit(app))
        return response

    app.use(middlewares=[with_rate_limit])

    @app.exception_handler(StorageError)
    def unavailable(exc: StorageError) -> Response:
        logger.exception("storage unavailable")
        return answer(
            503, _error_body("unavailable", "storage is busy; try again shortly"), {"Retry-After": "1"}
        )

    @app.not_found
    def no_route(exc: Exception) -> Response:
        # The same body a missing book gets: an unknown path tells a prober nothing more.
        missing = errors.not_found()
        return answer(missing.status, _error_body(missing.code, missing.message))


_register_error_handlers(writes)
_register_error_handlers(reads)


def _claims(app: APIGatewayHttpResolver) -> dict[str, Any]:
    authorizer = app.current_event.request_context.authorizer
    return (authorizer.jwt_claim if authorizer is not None else None) or {}


def caller(app: APIGatewayHttpResolver) -> str:
    sub = _claims(app).get("sub")
    if not isinstance(sub, str) or not sub:
        raise errors.Unauthorized("a valid bearer token is required", code="unauthorized")
    return sub


def class_of(app: APIGatewayHttpResolver) -> CallerClass:
    return caller_class(_claims(app))


def _rate_limit(app: APIGatewayHttpResolver) -> dict[str, str]:
    """Every answer to a caller carries its live-export cap (one read of its live item). An answer with no
    caller (401) carries none, and a read that fails leaves them out rather than fail the answer."""
    sub = _claims(app).get("sub")
    if not isinstance(sub, str) or not sub or "services" not in app.context:
        return {}
    try:
        return services(app).exports.rate_limit(sub, class_of(app))
    except StorageError:
        return {}


def read_body(
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
