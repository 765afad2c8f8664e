"""A list's pages: the page size a caller may ask for, and the opaque cursor that names where the next
page starts."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from bindery import errors
from bindery.ids import valid_id

PAGE_DEFAULT, PAGE_MAX = 20, 100


def page_size(limit: Any, largest: int = PAGE_MAX) -> int:
    """The page size `limit` asks for: ASCII digits and nothing else (Python's int() also takes `1_0`,
    `+1`, ` 1`, `1\n` and other scripts' digits, which no caller means as a number here)."""
    if limit is None:
        size = PAGE_DEFAULT
    elif isinstance(limit, int) and not isinstance(limit, bool):
        size = limit
    elif isinstance(limit, str) and limit.isascii() and limit.isdigit() and len(limit) <= 4:
        size = int(limit)
    else:
        size = 0
    if not 1 <= size <= largest:
        raise errors.BadRequest(f"limit must be a whole number from 1 to {largest}", code="invalid_limit")
    return size


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
