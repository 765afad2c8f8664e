"""A manuscript's own metadata, as pandoc reads it at the top of a file: a YAML metadata block, or a `%`
title block. Either is the book's metadata, never a chapter (the cut passes over it: `bindery.manuscript`).

    ---                              % The Harbour Light
    title: The Harbour Light         % M. Keeper; A. Pilot
    author: [M. Keeper, A. Pilot]    % 2026-06-28
    lang: en-GB
    ---

A YAML block is the file's first line `---`, a next line that is not blank, and a later line `---` or
`...` that closes it; one never closed is no block (pandoc reads a thematic break), and neither is one of
more than MAX_BYTES. A title block is the file's first lines that start with `%`: the title, the authors
(separated by `;`), the date; a line that starts with a space goes on with the one before.

pandoc's keys (`title`, `author`, `lang`, `identifier`, `publisher`, `description`, `subject`, `date`,
`rights`, `cover-image`) are read into Bindery's metadata fields; any other key is named in `ignored`. A
block that is not YAML, or a value of the wrong kind, is a `Mistake` naming its line and key: the service
refuses the manuscript whole (422 `invalid_front_matter`), the command line names the file's line.

One reader for both: the command line's `bindery_cli/front_matter.py` is a symlink to this file, so this
module imports nothing of the service's.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_BYTES = 64 * 1024  # a front matter is a few lines; past this, the lines are the book's text

# pandoc's key: (Bindery's metadata field, what it holds).
KEYS = {
    "author": ("authors", "names"),
    "lang": ("language", "text"),
    "identifier": ("identifier", "text"),
    "publisher": ("publisher", "text"),
    "description": ("description", "text"),
    "subject": ("subjects", "names"),
    "date": ("published", "date"),
    "rights": ("rights", "text"),
}
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class Mistake(ValueError):
    """A front matter's mistake: its line in the manuscript, the key (or `front matter`), what is wrong."""

    def __init__(self, line: int, where: str, problem: str):
        super().__init__(f"line {line}: {where}: {problem}")
        self.line, self.where, self.problem = line, where, problem


@dataclass
class FrontMatter:
    """What a manuscript's front matter says: a title, and metadata fields as a merge patch."""

    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    cover: tuple[str, int] | None = None  # `cover-image`: the image's name, and its line
    ignored: list[str] = field(default_factory=list)  # the keys that are not Bindery's


def split(lines: Iterator[bytes]) -> tuple[list[bytes], list[bytes]]:
    """The front matter's lines from the start of `lines` (empty: none), and the lines read past it that are
    the manuscript's text, to be read first. Reads at most MAX_BYTES and a line before deciding."""
    first = next(lines, None)
    if first is None:
        return [], []
    if first.startswith(b"%"):
        block, size = [first], len(first)
        for line in lines:
            if size + len(line) <= MAX_BYTES and (
                line.startswith(b"%") or (line[:1] in b" \t" and line.strip())
            ):
                block.append(line)
                size += len(line)
            else:
                return block, [line]
        return block, []
    if first.rstrip() != b"---":
        return [], [first]
    read, size = [first], len(first)
    for line in lines:
        read.append(line)
        size += len(line)
        if len(read) == 2 and not line.strip():
            return [], read  # `---` and a blank line: a thematic break
        if len(read) > 2 and line.rstrip() in (b"---", b"..."):
            return read, []
        if size > MAX_BYTES:
            break
    return [], read


def read(block: bytes) -> FrontMatter:
    """What the front matter `block` (its lines, as `split` found them) says."""
    text = block.decode("utf-8")
    if text.startswith("%"):
        return _title_block(text)
    return _yaml(text.split("\n", 1)[1].rsplit("\n", 2)[0] if text.count("\n") > 1 else "")


def _title_block(text: str) -> FrontMatter:
    fields: list[str] = []
    for line in text.splitlines():
        if line.startswith("%"):
            fields.append(line[1:].strip())
        elif fields:
            fields[-1] += " " + line.strip()
    found = FrontMatter()
    title, authors, day = [*fields, "", "", ""][:3]
    if title:
        found.title = title
    names = [name.strip() for name in authors.split(";") if name.strip()]
    if names:
        found.metadata["authors"] = names
    if _DAY.fullmatch(day):  # pandoc's date is any text; Bindery's a day (another is left as it is)
        found.metadata["published"] = day
    return found


def _bad(line: int, where: str, problem: str) -> Mistake:
    return Mistake(line, where, problem)


def read_yaml(header: str) -> FrontMatter:
    """What a YAML metadata block says: `header` is what its fences hold (from the file's second line)."""
    return _yaml(header)


def _yaml(header: str) -> FrontMatter:
    import yaml  # only a manuscript with a front matter loads it

    found = FrontMatter()
    try:
        loader = yaml.SafeLoader(header)
    except yaml.reader.ReaderError as exc:  # a character the reader refuses, before any line is read
        line = header.count("\n", 0, exc.position) + 2
        raise _bad(
            line, "front matter", f"not YAML: a control character, U+{int(exc.character):04X}"
        ) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return found
        if not isinstance(node, yaml.MappingNode):
            raise _bad(node.start_mark.line + 2, "front matter", "expected `key: value` lines")
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            line = value_node.start_mark.line + 2  # the manuscript's line: the block opens on line 1
            key = str(key_node.value)
            if key in seen:  # YAML's loader would quietly keep the last
                raise _bad(line, key, f"given twice (first on line {seen[key]}): keep one")
            seen[key] = line
            if key not in ("title", "cover-image") and key not in KEYS:
                found.ignored.append(key)  # pandoc's other keys (and an author's own) are not Bindery's
                continue
            try:
                value = loader.construct_object(value_node, deep=True)
            except (ValueError, OverflowError) as exc:
                # YAML reads 2026-13-45 as a date, and datetime refuses it: name the key, not a traceback.
                raise _bad(line, key, f"{value_node.value}: no such value ({exc})") from None
            if key == "title":
                found.title = _text(line, key, value)
            elif key == "cover-image":
                found.cover = (_text(line, key, value), line)
            else:
                name, kind = KEYS[key]
                found.metadata[name] = _value(line, key, kind, value)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else 2
        raise _bad(line, "front matter", f"not YAML: {exc.problem or exc.context}") from None
    except RecursionError:  # PyYAML reads nested collections by recursion: `[[[...]]]` hundreds deep
        raise _bad(2, "front matter", "nested too deep: a value of Bindery's is a string or a list") from None
    finally:
        loader.dispose()
    return found


def _value(line: int, key: str, kind: str, value: Any) -> Any:
    if kind == "names":
        if isinstance(value, str) and value.strip():
            return [value.strip()]
        if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
            return [v.strip() for v in value]
        raise _bad(line, key, "expected a string or a list of strings")
    if kind == "date":
        if isinstance(value, dt.datetime):
            value = value.date()
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, str) and _DAY.fullmatch(value.strip()):
            try:
                return dt.date.fromisoformat(value.strip()).isoformat()
            except ValueError:
                raise _bad(line, key, f"{value.strip()}: no such day (YYYY-MM-DD)") from None
        raise _bad(line, key, "expected a date as YYYY-MM-DD, e.g. 2026-06-28")
    return _text(line, key, value)


def _text(line: int, key: str, value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, str) or value is None:
        raise _bad(line, key, "expected a string: it is empty (give one, or leave the key out)")
    if isinstance(value, (bool, int, float, dt.date)):
        # YAML reads `title: 1984` as a number and `lang: no` as false: say how to keep the text.
        raise _bad(line, key, f"expected a string, not {type(value).__name__}: quote it")
    raise _bad(line, key, "expected a string")
