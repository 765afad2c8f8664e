"""Cutting a manuscript into chapters at its level-1 headings, in one streaming pass.

A manuscript is first *normalised* (`Normalised`), so that what Bindery keeps of a revision is already the
markdown export: the export is then a server-side copy, never a download and a re-upload.

A manuscript may be 500 MB, so it is never parsed whole. Lines stream through; a line that could open a
level-1 heading (ATX `# ...`, or a setext `===` underline) outside a fenced code block is a candidate,
and markdown-it-py decides, by parsing the candidate with the lines just before it: a `#` line inside a
list item, a block quote or an HTML block is not a cut. What comes out is each chapter's title and its
byte range in the manuscript, so the chapter text is never copied: it is read back by range.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

OPENING_TITLE = "Opening"
# Lines of context markdown-it sees before a candidate. Enough for any list or quote that could swallow it.
CONTEXT_LINES = 40

_ATX = re.compile(rb"^ {0,3}#(?:[ \t]|\r?\n|$)")
_SETEXT = re.compile(rb"^ {0,3}=+[ \t]*\r?\n?$")
_FENCE = re.compile(rb"^ {0,3}(`{3,}|~{3,})")
_MARKER_STARTS = frozenset((b" ", b"#", b"=", b"`", b"~"))


BOM = b"\xef\xbb\xbf"


class Normalised:
    """The lines of a manuscript as Bindery keeps it: UTF-8 with no byte-order mark, every line ending in
    LF (CRLF and lone CR become LF), no blank lines before the first text or after the last, and a final
    newline. Nothing here changes what the markdown means: trailing spaces stay, since two of them are a
    hard line break, and blank lines inside the text stay as they are (they may be code).

    Iterate it once; afterwards `size` is the normalised length, and `changed` says whether any byte
    differs from the input, i.e. whether the input could be kept as it is.
    """

    def __init__(self, lines: Iterable[bytes]):
        self._lines = lines
        self.size = 0
        self.changed = False

    def __iter__(self) -> Iterator[bytes]:
        blanks: list[bytes] = []  # blank lines held back until text follows them (trailing ones go)
        started = first = False
        for line in self._lines:
            if not first:
                first = True
                if line.startswith(BOM):
                    line, self.changed = line[len(BOM) :], True
            if line.endswith(b"\n") and not line.endswith(b"\r\n"):
                kept = line  # the usual line: kept as it is, no copy
            else:
                kept = line.rstrip(b"\r\n") + b"\n"
                self.changed = True
            if not kept.strip():
                if started:
                    blanks.append(kept)
                else:
                    self.changed = True  # a leading blank line goes
                continue
            started = True
            if blanks:
                for blank in blanks:
                    self.size += len(blank)
                    yield blank
                blanks.clear()
            self.size += len(kept)
            yield kept
        if blanks:
            self.changed = True  # trailing blank lines go


def normalise(data: bytes) -> bytes:
    """A manuscript held in memory, normalised (see `Normalised`)."""
    return b"".join(Normalised(data.splitlines(keepends=True)))


@dataclass(frozen=True)
class Section:
    title: str
    offset: int
    length: int


def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt  # the parser loads when a manuscript is cut, not per cold start

    return MarkdownIt("commonmark", {"html": False})


def _heading_ending_here(parser: MarkdownIt, window: list[bytes]) -> tuple[int, str] | None:
    """(first line, title) of a top-level h1 that ends on the window's last line, if markdown-it reads
    one there. A setext heading may start lines back; an ATX heading is the last line itself."""
    text = b"".join(window).decode("utf-8", errors="replace")
    tokens = parser.parse(text)
    for i, token in enumerate(tokens):
        opens_h1 = token.type == "heading_open" and token.tag == "h1" and token.level == 0
        if opens_h1 and token.map and token.map[1] == len(window):
            inline = tokens[i + 1]
            words = [c.content for c in inline.children or [] if c.type in ("text", "code_inline")]
            return token.map[0], "".join(words).strip() or "Untitled"
    return None


def cut(lines: Iterable[bytes]) -> Iterator[Section]:
    """Sections of a UTF-8 manuscript given as lines (each with its line ending), in order."""
    parser = _parser()
    # The last CONTEXT_LINES lines and their offsets, for markdown-it to judge a candidate by.
    recent: deque[tuple[bytes, int]] = deque(maxlen=CONTEXT_LINES)
    fence: bytes | None = None
    start, title = 0, None  # the open section: where it starts, and its title (None: the opening)
    first_text: int | None = None  # where the opening's first non-blank line starts
    position = 0

    def close(end: int) -> Section | None:
        if title is None and (first_text is None or first_text >= end):
            return None  # an opening of blank lines is no chapter
        return Section(title or OPENING_TITLE, start, end - start)

    for line in lines:
        candidate = False
        # Every block marker that matters here starts with a space, '#', '=', '`' or '~': any other line
        # is plain text, and skips the regular expressions (most lines of a book).
        if line[:1] in _MARKER_STARTS:
            if fence is not None:
                if line.lstrip(b" ").startswith(fence) and not line.strip().strip(fence[:1]):
                    fence = None
            elif (opened := _FENCE.match(line)) is not None:
                fence = opened.group(1)
            elif _ATX.match(line) or (_SETEXT.match(line) and recent and recent[-1][0].strip()):
                candidate = True
        recent.append((line, position))
        if candidate:
            window = list(recent)
            found = _heading_ending_here(parser, [text for text, _ in window])
            if found is not None:
                candidate_at, found_title = found
                section_start = window[candidate_at][1]
                if section_start > start or title is not None:
                    closed = close(section_start)
                    if closed is not None:
                        yield closed
                start, title = section_start, found_title
                recent = deque(window[candidate_at:], maxlen=CONTEXT_LINES)
        if title is None and first_text is None and line.strip():
            first_text = position
        position += len(line)
    closed = close(position)
    if closed is not None:
        yield closed


def cut_text(manuscript: str) -> list[tuple[Section, str]]:
    """Sections of a manuscript held in memory, normalised, each with its text. For small books and tests."""
    data = normalise(manuscript.encode("utf-8"))
    return [
        (section, data[section.offset : section.offset + section.length].decode("utf-8"))
        for section in cut(data.splitlines(keepends=True))
    ]
