"""Cutting a manuscript into chapters at its level-1 headings, in one streaming pass.

A manuscript is first *normalised* (`Normalised`), so that what Bindery keeps of a revision is already the
markdown export: the export is then a server-side copy, never a download and a re-upload.

A manuscript may be 500 MB, so it is never parsed whole. Lines stream through; a line that could open a
level-1 heading (ATX `# ...`, or a setext `===` underline) outside a top-level fenced code block is a
candidate, and markdown-it-py decides, by parsing the candidate with every line since the last point where
nothing was open (see `cut`): a `#` line inside a list item or a block quote is not a cut. What comes out
is each chapter's title and its byte range in the manuscript, so the chapter text is never copied: it is
read back by range.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

OPENING_TITLE = "Opening"
# The most context a candidate is judged with (see `cut`): a list item or block quote longer than this, with
# a candidate heading inside it, is the one case where the cut could differ from a whole-document parse.
MAX_CONTEXT_BYTES = 1024 * 1024

_ATX = re.compile(rb"^ {0,3}#(?:[ \t]|\r?\n|$)")
_SETEXT = re.compile(rb"^ {0,3}=+[ \t]*\r?\n?$")
_FENCE = re.compile(rb"^ {0,3}(`{3,}|~{3,})")
_MARKER_STARTS = frozenset((b" ", b"#", b"=", b"`", b"~"))
# A list item's first line: a bullet, or a number and '.' or ')', then a space, a tab or the line's end.
_LIST_MARKER = re.compile(rb"^(?:[-+*]|[0-9]{1,9}[.)])(?:[ \t]|\r?\n|$)")


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
    sha256: str  # of its bytes: a build finds a chapter's built piece by it without reading the text


# Lines wait this many at most before the open section hashes those no heading can claim: a call a line cost
# the cut a fifth of its time (a 500 MB manuscript is millions of lines).
HASH_LINES = 512


class _Hashed:
    """The open section's SHA-256, taken of its lines a batch at a time once no heading further on can claim
    them for the next section: the cut makes one pass, and `waiting` holds a batch and the window."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self.waiting: list[bytes] = []  # the lines read and not yet hashed, the window's among them

    def hash(self, count: int) -> None:
        """Hash the first `count` waiting lines into the open section."""
        if count > 0:
            self._sha.update(b"".join(self.waiting[:count]))
            del self.waiting[:count]

    def cut(self, count: int) -> str:
        """The SHA-256 of the open section, which ends after the first `count` waiting lines; the next one
        starts with the rest."""
        self.hash(count)
        digest, self._sha = self._sha.hexdigest(), hashlib.sha256()
        return digest


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


def _starts_afresh(line: bytes) -> bool:
    """Whether a line that follows a blank line starts at the top level with nothing open: it begins in
    column 0, and neither a block quote nor a list item. A blank line ends every paragraph; a list item
    continues past one only onto a line indented to its content (two columns at least), a block quote
    only onto a `>` line; an indented code block needs four spaces. So nothing before such a line can
    change how the lines from it on are read, except a fenced code block left open, which the caller
    tracks."""
    return line[:1] not in b" \t\r\n>" and not _LIST_MARKER.match(line)


def _closes(fence: bytes, line: bytes) -> bool:
    """CommonMark's closing fence: up to three spaces, then at least as many of the same character as
    the opening, then only spaces or tabs."""
    text = line.rstrip(b"\r\n")
    rest = text.lstrip(b" ")
    if len(text) - len(rest) > 3:
        return False
    run = len(rest) - len(rest.lstrip(fence[:1]))
    return run >= len(fence) and not rest[run:].strip(b" \t")


def _top_level_fence_opening_here(parser: MarkdownIt, window: list[bytes]) -> bytes | None:
    """The fence markup (```, ~~~~ ...) if markdown-it reads a fenced code block at the top level opening
    on the window's last line: one inside a list item is not the caller's to track."""
    tokens: list[Token] = []
    parser.block.parse(b"".join(window).decode("utf-8", errors="replace"), parser, {}, tokens)  # blocks only
    for token in tokens:
        if token.type == "fence" and token.level == 0 and token.map and token.map[0] == len(window) - 1:
            return token.markup.encode()
    return None


def cut(lines: Iterable[bytes]) -> Iterator[Section]:
    """Sections of a UTF-8 manuscript given as lines (each with its line ending), in order.

    A candidate is judged by markdown-it with every line since the last point where nothing was open:
    the line after a top-level fenced code block closes, the line after a heading, or a line that starts
    afresh after a blank one (`_starts_afresh`). Parsing from such a point reads the lines after it as a
    whole-document parse does, so the two agree, whatever the length of a list or a quote, up to one
    bound: the context is capped at MAX_CONTEXT_BYTES, so only a single list item or block quote longer
    than that, with a candidate inside, could be read differently."""
    parser = _parser()
    window: deque[tuple[bytes, int]] = deque()  # the lines since the last fresh start, with their offsets
    window_bytes = 0
    fence: bytes | None = None  # the markup of the top-level fenced code block we are inside, if any
    start, title = 0, None  # the open section: where it starts, and its title (None: the opening)
    first_text: int | None = None  # where the opening's first non-blank line starts
    position = 0
    after_blank = True
    hashed = _Hashed()
    waiting = hashed.waiting  # outside a fence the window is its last lines, so the rest is hashable

    def close(end: int, lines_in: int) -> Section | None:
        """The open section, ending at `end`, after its last line waiting (`lines_in` of them are its)."""
        digest = hashed.cut(lines_in)
        if title is None and (first_text is None or first_text >= end):
            return None  # an opening of blank lines is no chapter
        return Section(title or OPENING_TITLE, start, end - start, digest)

    for line in lines:
        waiting.append(line)
        if title is None and first_text is None and line.strip():
            first_text = position
        if fence is not None:
            # Nothing inside a top-level fence cuts, and nothing before it matters after it.
            if _closes(fence, line):
                fence = None
                window.clear()
                window_bytes = 0
            if len(waiting) >= HASH_LINES:
                hashed.hash(len(waiting))  # no section starts inside a fence, nor on a line before it
            position += len(line)
            after_blank = False
            continue
        if after_blank and _starts_afresh(line):
            window.clear()
            window_bytes = 0
        window.append((line, position))
        window_bytes += len(line)
        while window_bytes > MAX_CONTEXT_BYTES and len(window) > 1:
            window_bytes -= len(window.popleft()[0])
        # Every block marker that matters here starts with a space, '#', '=', '`' or '~': any other line
        # is plain text, and skips the regular expressions (most lines of a book).
        if line[:1] in _MARKER_STARTS:
            if _FENCE.match(line):
                fence = _top_level_fence_opening_here(parser, [text for text, _ in window])
            elif _ATX.match(line) or (_SETEXT.match(line) and len(window) > 1 and window[-2][0].strip()):
                found = _heading_ending_here(parser, [text for text, _ in window])
                if found is not None:
                    candidate_at, found_title = found
                    section_start = window[candidate_at][1]
                    if section_start > start or title is not None:
                        closed = close(section_start, len(waiting) - (len(window) - candidate_at))
                        if closed is not None:
                            yield closed
                    start, title = section_start, found_title
                    window.clear()  # after a heading nothing is open
                    window_bytes = 0
        if len(waiting) >= HASH_LINES:
            hashed.hash(len(waiting) - len(window))  # a section starts only at a line of the window
        after_blank = not line.strip()
        position += len(line)
    closed = close(position, len(waiting))
    if closed is not None:
        yield closed


def cut_text(manuscript: str) -> list[tuple[Section, str]]:
    """Sections of a manuscript held in memory, normalised, each with its text. For small books and tests."""
    data = normalise(manuscript.encode("utf-8"))
    return [
        (section, data[section.offset : section.offset + section.length].decode("utf-8"))
        for section in cut(data.splitlines(keepends=True))
    ]
