"""What a caller can be told went wrong. `bindery.api` maps each class to its HTTP status, in one place."""

from __future__ import annotations

from typing import Any


class BinderyError(Exception):
    """A refusal with a machine-readable `code`, a sentence for people, and optional details."""

    code = "error"

    def __init__(self, message: str, *, code: str | None = None, **details: Any):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class BadRequest(BinderyError):
    code = "bad_request"


class Unauthorized(BinderyError):
    code = "unauthorized"


class NotFound(BinderyError):
    code = "not_found"


class PayloadTooLarge(BinderyError):
    code = "payload_too_large"


class Unprocessable(BinderyError):
    code = "unprocessable"


class TooManyLiveExports(BinderyError):
    code = "too_many_live_exports"


class Conflict(BinderyError):
    code = "conflict"


class PreconditionFailed(BinderyError):
    code = "precondition_failed"
