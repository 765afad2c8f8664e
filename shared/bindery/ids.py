"""The ids Bindery makes: an export's, a batch's, an endpoint's and a cut's, and the checks that a caller's
path could name one before anything is read for it."""

from __future__ import annotations

import re
import secrets

# Matched whole (fullmatch): `$` also matches before a trailing newline, so "<id>\n" passed as an id.
_ID = re.compile(r"[0-9a-z]{8,40}")


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
    return bool(_ID.fullmatch(value))


def valid_export_id(value: str) -> bool:
    """Whether an id from a caller's path could name an export: one of our ids that ends in a shard's
    digit (`new_id`). Asked before a write reads the shard from it, so that an id no export can have is
    the 404 a missing one is, never a crash on the way to that write."""
    return valid_id(value) and value[-1] in "0123456789abcdef"
