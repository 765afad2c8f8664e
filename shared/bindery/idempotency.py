"""The Idempotency-Key as the services take it: its digest, scoped to its caller, and the refusal of a key
sent again for a different request. Storage keeps the digest's record (`bindery.storage.idempotency`)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from bindery import errors

# Matched whole (fullmatch): `$` also matches before a trailing newline, so "<key>\n" passed as a key.
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")


def idempotency_for(caller: str, key: str, request: list[Any]) -> tuple[str, str]:
    """(the key's digest, scoped to its caller; the request's hash). A key is the caller's own: the same
    key from two callers is two keys. The same key for a different request is refused, not replayed."""
    if not _IDEMPOTENCY_KEY.fullmatch(key):
        raise errors.BadRequest(
            "Idempotency-Key must be 1 to 255 printable ASCII characters", code="invalid_idempotency_key"
        )
    digest = hashlib.sha256(f"{caller}\n{key}".encode()).hexdigest()
    return digest, hashlib.sha256(json.dumps(request).encode()).hexdigest()


def key_reused() -> errors.Unprocessable:
    return errors.Unprocessable(
        "this Idempotency-Key was used for a different request", code="idempotency_key_reused"
    )
