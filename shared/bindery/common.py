"""What every part of the service shares: ids, time and cursor formats, the Idempotency-Key's digest, the
errors that must read alike everywhere, and the parts each service class is given.

Nothing here imports another Bindery module but config, errors and (for types only) storage and objects, so
any module may import it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bindery import errors
from bindery.config import Settings

if TYPE_CHECKING:
    from bindery.library import Library
    from bindery.objects import Objects
    from bindery.storage import Store

Clock = Callable[[], float]

_ID = re.compile(r"^[0-9a-z]{8,40}$")
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")


class Parts:
    """What each part of the service works with; the composition root (`bindery.exports.Exports`) sets
    them once, and every part reads the same ones."""

    settings: Settings
    store: Store
    objects: Objects
    clock: Clock
    books: Library


PAGE_DEFAULT, PAGE_MAX = 20, 100


def page_size(limit: Any, largest: int = PAGE_MAX) -> int:
    try:
        size = PAGE_DEFAULT if limit is None else int(limit)
    except ValueError:
        size = 0
    if not 1 <= size <= largest:
        raise errors.BadRequest(f"limit must be a whole number from 1 to {largest}", code="invalid_limit")
    return size


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id(now: float, shard: int | None = None) -> str:
    """Time-ordered, so a book's exports list newest first by key alone: 11 hex digits of milliseconds,
    then 10 random ones. An export's last digit is instead the cap shard its live slot is counted in
    (`bindery.limits.shard_of`), so every write that ends it knows which counter to give the slot back to."""
    tail = secrets.token_hex(5)
    if shard is not None:
        tail = f"{tail[:-1]}{shard:x}"
    return f"{int(now * 1000):011x}{tail}"


def new_cut(revision: int) -> str:
    return f"r{revision:08d}-{secrets.token_hex(6)}"


def valid_id(value: str) -> bool:
    return bool(_ID.match(value))


def valid_export_id(value: str) -> bool:
    """Whether an id from a caller's path could name an export: one of our ids that ends in a shard's
    digit (`new_id`). Asked before a write reads the shard from it, so that an id no export can have is
    the 404 a missing one is, never a crash on the way to that write."""
    return valid_id(value) and value[-1] in "0123456789abcdef"


def not_found() -> errors.NotFound:
    # One body for missing and for someone else's: the answer must not tell them apart.
    return errors.NotFound("no such book or export", code="not_found")


RETRY_AFTER_OVER_CAP = 30
# A submit its shard of the global cap refused reads them all and tries the roomiest: this many tries in all.
SHARD_TRIES = 3


def service_full(total: int) -> errors.ServiceAtCapacity:
    return errors.ServiceAtCapacity(
        f"the service is building {total:,} exports, the most it takes at once; try again shortly",
        code="service_at_capacity",
        retry_after=RETRY_AFTER_OVER_CAP,
    )


def over_budget(usage: int, budget: int) -> errors.InsufficientStorage:
    return errors.InsufficientStorage(
        f"your finished files take {usage:,} bytes, and your storage budget is {budget:,}; cancel ready "
        "exports you have downloaded (DELETE /books/{bookId}/exports/{exportId} deletes the file at once), "
        "or wait for links to lapse: a lapsed link's file is deleted within minutes",
        code="storage_budget_exceeded",
        usage_bytes=usage,
        budget_bytes=budget,
    )


def idempotency_for(caller: str, key: str, request: list[Any]) -> tuple[str, str]:
    """(the key's digest, scoped to its caller; the request's hash). A key is the caller's own: the same
    key from two callers is two keys. The same key for a different request is refused, not replayed."""
    if not _IDEMPOTENCY_KEY.match(key):
        raise errors.BadRequest(
            "Idempotency-Key must be 1 to 255 printable ASCII characters", code="invalid_idempotency_key"
        )
    digest = hashlib.sha256(f"{caller}\n{key}".encode()).hexdigest()
    return digest, hashlib.sha256(json.dumps(request).encode()).hexdigest()


def key_reused() -> errors.Unprocessable:
    return errors.Unprocessable(
        "this Idempotency-Key was used for a different request", code="idempotency_key_reused"
    )


def encode_cursor(export_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": export_id}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, valid: Callable[[str], bool] = valid_id) -> str:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        after = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))["after"]
    except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error):
        after = None
    if not isinstance(after, str) or not valid(after):
        raise errors.BadRequest("cursor is not one this API issued", code="invalid_cursor")
    return after
