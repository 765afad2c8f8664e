"""What a caller can be told went wrong: each class is one HTTP status, carried on the class so that the
status and the kind of refusal are defined in one place. `bindery.api.http` answers every one the same way."""

from __future__ import annotations

from typing import Any, ClassVar


class BinderyError(Exception):
    """A refusal with a machine-readable `code`, a sentence for people, and optional details. A raise may
    name a narrower code than its class's (`invalid_json` is a BadRequest); the status stays the class's."""

    status: ClassVar[int] = 500
    code = "error"

    def __init__(self, message: str, *, code: str | None = None, **details: Any):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class BadRequest(BinderyError):
    """The request cannot be read: not JSON, an unknown or missing field, a malformed cursor or header."""

    status = 400
    code = "bad_request"


class Unauthorized(BinderyError):
    status = 401  # no caller in the verified claims: API Gateway's authorizer lets none through, so a guard
    code = "unauthorized"


class NotFound(BinderyError):
    """No such book, export, batch or endpoint for this caller. Another caller's answers exactly as a
    missing one does, so an id proves nothing about what exists: raise it through :func:`not_found`."""

    status = 404
    code = "not_found"


def not_found(what: str = "book or export") -> NotFound:
    """The one 404 of the service layer. One body for a missing thing and for someone else's: the answer
    must not tell them apart. An unknown path gets the default, the body a missing book gets."""
    return NotFound(f"no such {what}", code="not_found")


class Conflict(BinderyError):
    """The request is sound but the book's state stands in its way: a replacement that kept losing its
    race, or an Idempotency-Key whose book has since been deleted."""

    status = 409
    code = "conflict"


class PreconditionFailed(BinderyError):
    status = 412  # If-Match named a revision that is no longer the book's
    code = "precondition_failed"


class PayloadTooLarge(BinderyError):
    """A body, manuscript or upload over its stated limit; the message names the limit."""

    status = 413
    code = "payload_too_large"


class Unprocessable(BinderyError):
    """Well-formed but not acceptable: an unknown format or option, a value out of its range, an upload
    that is not what was promised, an Idempotency-Key reused for a different request."""

    status = 422
    code = "unprocessable"


class TooManyLiveExports(BinderyError):
    status = 429  # the caller's live set is full; details carry retry_after
    code = "too_many_live_exports"


class InsufficientStorage(BinderyError):
    status = 507  # the caller's stored files are at or over its budget; details carry usage and budget
    code = "storage_budget_exceeded"


class ServiceAtCapacity(BinderyError):
    status = 503  # the service holds its global cap of live exports; details carry retry_after
    code = "service_at_capacity"


class Gone(BinderyError):
    """What the request names is no longer kept: an events cursor older than the feed's 30 days."""

    status = 410
    code = "gone"
