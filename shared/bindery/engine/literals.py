"""The manuscript's words as Typst reads them: as data, never as markup or code.

A Typst string literal (`"…"`) gives meaning to nothing but `\\` and `"`, which are escaped here, as are the
control characters; set in markup as `#"…"`, a word of the manuscript is only ever text
(`bindery.engine.typeset` says why that matters).
"""

from __future__ import annotations

# Characters Typst's string literal gives meaning to, or that are better written as escapes.
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_LITERAL = str.maketrans(
    {**{chr(c): f"\\u{{{c:x}}}" for c in [*range(0x20), 0x7F]}, **_ESCAPES}  # controls, as \u{…}
)


def literal(text: str) -> str:
    """A Typst string literal holding exactly `text`."""
    return '"' + text.translate(_LITERAL) + '"'


def text(value: str) -> str:
    """`value` set as text in markup: a literal, so nothing in it is read as Typst."""
    return "#" + literal(value) if value else ""
