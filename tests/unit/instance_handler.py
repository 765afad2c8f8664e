"""The handler test_instances runs in the local stack's instances: it keeps what it handled in module state
and reports it, with its process and the moments it started and ended."""

from __future__ import annotations

import os
import time
from typing import Any

_handled: list[int] = []  # this instance's events, in its own module state
_busy = False  # True while this instance handles an event


def setup(function: str) -> None:
    """What the stack's own setup does, here nothing: the test's instances log nothing."""


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _busy
    already_busy, _busy = _busy, True
    started = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on the machine
    if event.get("die"):
        os._exit(3)
    if event.get("raise"):
        _busy = False
        raise ValueError("the handler refused this event")
    time.sleep(float(event.get("sleep", 0)))
    _handled.append(int(event["n"]))
    _busy = False
    return {
        "pid": os.getpid(),
        "handled": list(_handled),
        "already_busy": already_busy,
        "started": started,
        "ended": time.monotonic(),
        "function": context.function_name,
    }
