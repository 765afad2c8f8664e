"""Figures a test measured, for `make reliability` to publish. A no-op unless BINDERY_FIGURES names a file."""

from __future__ import annotations

import json
import os


def record(name: str, value: object) -> None:
    path = os.environ.get("BINDERY_FIGURES")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps({"name": name, "value": value}) + "\n")
