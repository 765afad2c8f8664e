"""Writes `bindery/subtags.txt`, the language subtags a book's `language` may use, from the IANA Language
Subtag Registry that the `langcodes` package carries (a development dependency only).

Why a generated table and not langcodes itself in the layer: importing langcodes takes about 90 ms, on
every cold start of the function that creates books, to answer a question a frozenset answers in
microseconds. `tests/unit/test_metadata.py` fails when this table and the registry disagree.

    python -m bindery_local.subtags > shared/bindery/subtags.txt
"""

from __future__ import annotations

import string
import sys
from importlib.resources import files


def _expand(subtag: str) -> list[str]:
    """A registry range such as qaa..qtz, or one subtag."""
    if ".." not in subtag:
        return [subtag]
    first, last = subtag.split("..")
    alphabet = string.digits if first.isdigit() else string.ascii_lowercase
    out, n = [], len(first)

    def value(s: str) -> int:
        return sum(alphabet.index(c) * len(alphabet) ** (n - 1 - i) for i, c in enumerate(s.lower()))

    for v in range(value(first), value(last) + 1):
        digits = []
        for _ in range(n):
            v, r = divmod(v, len(alphabet))
            digits.append(alphabet[r])
        out.append("".join(reversed(digits)))
    return out


def records() -> tuple[str, dict[str, set[str]]]:
    text = (files("langcodes") / "data" / "language-subtag-registry.txt").read_text(encoding="utf-8")
    blocks = text.split("%%")
    date = blocks[0].split(":", 1)[1].strip()
    found: dict[str, set[str]] = {
        kind: set() for kind in ("language", "extlang", "script", "region", "variant", "grandfathered")
    }
    for block in blocks[1:]:
        fields = dict(
            line.split(": ", 1) for line in block.strip().splitlines() if ": " in line and line[0] != " "
        )
        kind = fields.get("Type")
        if kind in ("language", "extlang", "script", "region", "variant"):
            found[kind].update(s.lower() for s in _expand(fields["Subtag"]))
        elif kind == "grandfathered":
            found[kind].add(fields["Tag"].lower())
    return date, found


def table() -> str:
    """One line a kind of subtag: the kind, then its subtags, lower case. The first line names the
    registry's date."""
    date, found = records()
    lines = [f"# IANA Language Subtag Registry, File-Date {date}; made by python -m bindery_local.subtags"]
    lines += [f"{kind} {' '.join(sorted(subtags))}" for kind, subtags in found.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table())
