"""8. The local stack (`make run`) at 64 and 8 clients, against the handlers in-process.

Requests a second, their spread, and what moto's transactions cost (tests/bench/load_probe.py).
"""

from __future__ import annotations

from tests.bench import load_probe
from tests.bench.report import record, say


def measure() -> None:
    load_probe.measure(record, say)
