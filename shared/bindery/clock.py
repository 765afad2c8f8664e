"""Time as the services take it (a clock they are given, so that tests can move it) and as callers read
it (ISO 8601 in UTC, to the millisecond)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], float]  # seconds since the epoch: time.time, or a test's fake


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
