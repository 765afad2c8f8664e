"""The characters a book may hold: XML 1.0's `Char` (#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
[#x10000-#x10FFFF]), since every format but the markdown is XML or HTML written from the same text.

Text is checked where it comes in (a manuscript as `Normalised` reads it, a title, a metadata field), and a
character outside `Char` is refused there, with where it is and which it is. So no writer has to drop or
replace one: a C0 control but tab, LF and CR, a lone surrogate, U+FFFE or U+FFFF never reaches a book.

A manuscript is markdown, whose numeric character references the parser turns into the characters they
name; so a reference that markdown-it reads as a forbidden character is refused as the character itself
is. Of those characters it reads only a form feed's (`&#12;`, `&#xC;`): it makes every other code it holds
invalid (`isValidEntityCode`: the other C0 controls, the surrogates, U+FFFE, U+FFFF) U+FFFD in text and
leaves it as written in a link's title or destination.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bindery import errors

# Named as the few it forbids: the class of all it allows takes 20 ms to compile, at every cold start.
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

# The same in a manuscript's UTF-8. A C0 control is one byte of its own, never part of a longer sequence;
# U+FFFE and U+FFFF are EF BF BE and EF BF BF. A surrogate is no valid UTF-8: its bytes are read as U+FFFD,
# as any invalid UTF-8 is, so it cannot reach a book from a manuscript's bytes.
_C0_BYTES = bytes(b for b in range(0x20) if b not in b"\t\n\r")
_NONCHARACTER_BYTES = re.compile(rb"\xef\xbf[\xbe\xbf]")
# A numeric character reference markdown-it reads as a character XML 1.0 forbids: a form feed's, with as
# many leading zeros as it reads. Its text's entity rule reads 1-7 decimal digits or 1-6 hex; a link's title,
# destination and a fence's info (unescapeAll) 1-8 of either. A reference is refused wherever it stands, in
# code too (where markdown reads none): the check reads lines, not markdown.
_FORBIDDEN_REFERENCE = re.compile(rb"&#(?:[xX]0{0,7}[cC]|0{0,6}12);")
_FORBIDDEN_BYTES = re.compile(
    rb"[\x00-\x08\x0b\x0c\x0e-\x1f]|\xef\xbf[\xbe\xbf]|" + _FORBIDDEN_REFERENCE.pattern
)


@dataclass(frozen=True)
class Forbidden:
    """A character outside XML 1.0's `Char`, and where it is: `index` counts characters from 0."""

    index: int
    character: str

    @property
    def code_point(self) -> str:
        return f"U+{ord(self.character):04X}"


def first_forbidden(text: str) -> Forbidden | None:
    """The first character of `text` that no book may hold, if any."""
    found = _FORBIDDEN.search(text)
    return None if found is None else Forbidden(found.start(), found.group())


_WHY = "is not allowed in a book (XML 1.0 forbids it); remove it"


def describe(found: Forbidden) -> str:
    """What a refusal says of the character, after where it is."""
    return f"{found.code_point} {_WHY}"


def check_lines(lines: Sequence[bytes], first_line: int) -> None:
    """Refuse a batch of a manuscript's lines (each with its ending; `first_line` is the first's number,
    from 1) if one holds a character no book may hold, or a reference to one, naming its line, its column
    and its code point.

    A manuscript may be 500 MB, so a batch clean of them (nearly every one) costs a few passes in C over
    its bytes: a translate that deletes the C0 controls, and searches from the literal EF BF and `&#`.
    Only a batch that holds one is searched line by line, to say where."""
    batch = b"".join(lines)
    if (
        len(batch.translate(None, _C0_BYTES)) == len(batch)
        and _NONCHARACTER_BYTES.search(batch) is None
        and _FORBIDDEN_REFERENCE.search(batch) is None
    ):
        return
    for number, line in enumerate(lines, start=first_line):
        found = _FORBIDDEN_BYTES.search(line)
        if found is not None:
            raise _refused(number, line[: found.start()], found.group().decode("utf-8"))


def _refused(line: int, before: bytes, written: str) -> errors.Unprocessable:
    """The 422 for `written` (a forbidden character, or a reference to one) on a manuscript's `line`, after
    `before`, that line's bytes before it. The column counts characters, as an editor does."""
    column = len(before.decode("utf-8", errors="replace")) + 1
    if written.startswith("&#"):
        digits = written[2:-1]
        found = Forbidden(column - 1, chr(int(digits[1:], 16) if digits[0] in "xX" else int(digits)))
        what = f"{written} names {found.code_point}, which {_WHY}"
    else:
        found = Forbidden(column - 1, written)
        what = describe(found)
    return errors.Unprocessable(
        f"line {line}, column {column}: {what}",
        code="invalid_character",
        line=line,
        column=column,
        code_point=found.code_point,
    )
