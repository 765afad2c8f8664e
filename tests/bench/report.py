"""What the bench has measured so far, and how it says so: each figure beside its budget and verdict,
printed as it is taken and kept for docs/BENCHMARKS.md."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class Figure:
    section: str
    name: str
    value: str
    budget: str
    verdict: str  # "pass", "FAIL" or "info"


FIGURES: list[Figure] = []


def say(*parts: object, **kwargs: Any) -> None:
    """The bench's own output. The handlers' (EMF metrics, as Lambda would log them) goes to /dev/null."""
    print(*parts, **kwargs, file=sys.__stdout__, flush=True)


STARTED = time.perf_counter()


def record(section: str, name: str, value: str, budget: str = "", ok: bool | None = None) -> None:
    verdict = "info" if ok is None else ("pass" if ok else "FAIL")
    FIGURES.append(Figure(section, name, value, budget, verdict))
    say(
        f"  {name:<58} {value:>18}  {budget:<22} {verdict:<5} {time.perf_counter() - STARTED:6.0f} s",
    )
