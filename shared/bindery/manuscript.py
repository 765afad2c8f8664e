"""Cutting a manuscript into chapters at its level-1 headings, in one streaming pass.

A manuscript is first *normalised* (`bindery.normalising`), so that what Bindery keeps of a revision is
already the markdown export: the export is then a server-side copy, never a download and a re-upload.

A manuscript may be 500 MB, so it is never parsed whole. Lines stream through, gathered from the last point
where nothing was open; a line that could open a level-1 heading (ATX `# ...`, or a setext `===` underline)
or a fenced code block is a candidate, and markdown-it decides, by parsing the gathered lines once when the
next such point comes (see `cut`): a `#` line inside a list item or a block quote is not a cut. The work is
linear in the manuscript, whatever its shape. What comes out is each chapter's title and its byte range in
the manuscript, so the chapter text is never copied: it is read back by range.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bindery import errors, front_matter
from bindery.engine.anchors import Anchors
from bindery.engine.comments import CLOSER
from bindery.engine.crossrefs import TARGET_LINE
from bindery.engine.divs import DIV_ID_LINE
from bindery.engine.pandoc_tables import MAX_TABLE_LINES
from bindery.engine.spans import SPAN_ID_LINE
from bindery.normalising import normalise
from bindery.window import COMMENT
from bindery.window import closes as _closes
from bindery.window import read as _read  # (a module name of its own: tests count what it reads)

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

OPENING_TITLE = "Opening"
# The most lines a window gathers before it is read (see `cut`): a list item or block quote longer than this,
# with a candidate heading inside it, is the one case where the cut could differ from a whole-document parse.
MAX_CONTEXT_BYTES = 1024 * 1024
# The most tokens markdown-it may make in all the cut's reads of one manuscript. The cut runs in the API's
# request (30 s): prose costs it no parse, but a list item or quote full of lines shaped like headings,
# fences or comments is read, at about 5 us a token (a MB of `- x` / `  # a` items is 800,000 of them, read
# about twice). A manuscript past this is refused where it gets there (422 `manuscript_too_complex`).
MAX_CUT_TOKENS = 2_000_000

# A line that may be a heading of any level, after any block quotes' and list items' markers (the book's
# anchors are every heading's, `bindery.engine.anchors`), and a setext underline of either level.
# (An ordered marker is any of pandoc's, `engine.fancy_lists`: `a.`, `(iv)`, `#.`.)
# Each marker takes the blanks after it, and only those, so that a run of them is read one way: with two
# ways to read each blank, a line of 1,000 `> ` took 2^1,000 steps to fail.
_CONTAINERS = rb"[ \t]*(?:(?:>|[-+*](?=[ \t])|\(?(?:[0-9]{1,9}|#|[a-zA-Z]{1,15})[.)](?=[ \t]))[ \t]*)*"
_ATX = re.compile(_CONTAINERS + rb"#{1,6}(?:[ \t]|\r?\n|$)")
_SETEXT = re.compile(rb"[ \t]*(?:>[ \t]*)*(?:=+|-+)[ \t]*\r?\n?$")
_FENCE = re.compile(rb"^ {0,3}(`{3,}|~{3,})")
_COMMENT = re.compile(rb"^ {0,3}<!--(?!-?>)")  # (`<!-->`, `<!--->`: text, to pandoc)
_MARKER_STARTS = frozenset(bytes([c]) for c in b" \t#=`~<>-+*0123456789[(")
_LETTERED = re.compile(rb"\(?[a-zA-Z]{1,15}[.)][ \t]")  # a line that opens with a list marker of letters
# A line that may be a link reference definition, after any markers (the book's anchors keep every one).
_DEFINITION = re.compile(_CONTAINERS + rb"\[")
# A line that may be a line of dashes of pandoc's simple or multiline tables (`engine.pandoc_tables`; wider
# than its DASHES, which is safe: such a line only holds the window open). What reads as a table is known
# only at its end: a multiline table's rows may begin in column 0 after a blank line, and any table's rows
# may begin with `#`. Each closes at its next line of dashes (a simple one perhaps sooner, at a blank line),
# so by the first followed by a blank line, and within MAX_TABLE_LINES of its dashes: the cut holds its
# window whole for as long (`cut`).
_DASHES = re.compile(rb" {0,3}-[- \t]*\r?\n?")
TABLE_LINES = MAX_TABLE_LINES + 2  # a table's last line, from its latest dashes (its header's, its blank)


@dataclass(frozen=True)
class Section:
    title: str
    offset: int
    length: int
    sha256: str  # of its bytes: a build finds a chapter's built piece by it without reading the text


# What finds a line that gives a target of the book its id: a figure's or table's, a span's, a div's.
_IDS = (TARGET_LINE.search, SPAN_ID_LINE.search, DIV_ID_LINE.search)
# A window is read before it ends once this many candidates wait in it (see `cut`).
READ_AFTER = 64
# Lines wait this many at most before the open section hashes those no heading can claim: a call a line cost
# the cut a fifth of its time (a 500 MB manuscript is millions of lines).
HASH_LINES = 512


class _Hashed:
    """The open section's SHA-256, taken of its lines a batch at a time once no heading further on can claim
    them for the next section: the cut makes one pass, and `waiting` holds a batch and the window."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        # The lines read and not yet hashed, the window's among them. A deque: taking lines from the left
        # costs what is taken, however many wait (a window of many headings is cut as many times).
        self.waiting: deque[bytes] = deque()

    def hash(self, count: int) -> None:
        """Hash the first `count` waiting lines into the open section."""
        if count > 0:
            popleft = self.waiting.popleft
            self._sha.update(b"".join([popleft() for _ in range(count)]))

    def cut(self, count: int) -> str:
        """The SHA-256 of the open section, which ends after the first `count` waiting lines; the next one
        starts with the rest."""
        self.hash(count)
        digest, self._sha = self._sha.hexdigest(), hashlib.sha256()
        return digest


def _parser() -> MarkdownIt:
    """The renderers' own markdown (`bindery.engine.markup`: tables, footnotes, containers nested past
    markdown-it's bound read as text), so that the cut reads a heading where every format reads it."""
    from bindery.engine import markup  # the parser loads when a manuscript is cut, not per cold start

    return markup.parser()


def _starts_afresh(line: bytes) -> bool:
    """Whether a line that follows a blank line starts at the top level with nothing open: it begins in
    column 0. A blank line ends every paragraph, block quote and table; a list item or a note continues past
    one only onto a line indented to its content (two columns at least); an indented code block needs four
    spaces. So a line in column 0 after a blank one (a list item or a quote of its own, if it opens one) is
    read from there as a whole parse reads it, except inside a fenced code block left open at the top level,
    which the caller tracks."""
    return line[:1] not in b" \t\r\n" and not (line[:1] in b":~" and line[1:2] in b" \t")


def cut(
    lines: Iterable[bytes], anchors: Anchors | None = None, front: list[bytes] | None = None
) -> Iterator[Section]:
    """Sections of a UTF-8 manuscript given as lines (each with its line ending), in order; and, into
    `anchors`, every heading of every level as it comes, with the ordinal of the section it is in. A front
    matter at the top (`bindery.front_matter`) is no section: its lines go into `front`.

    Lines gather in a window from the last point where nothing was open: a line in column 0 after a blank
    one (`_starts_afresh`), a heading in column 0, or the line after a top-level fenced code block closes.
    A line that could open a level-1 heading or a fenced code block is a candidate. A window that holds one
    is read by markdown-it as a whole when it ends, and before that once READ_AFTER candidates wait in it
    and three quarters of its bytes are unread; a window without one is never parsed. Parsing from such a
    point reads the lines after it as a whole-document parse does, so the two agree, whatever the length of
    a list or a quote. Each read is paid for by new bytes, so the work is linear in the manuscript, up to one
    bound: a window is read when it grows past MAX_CONTEXT_BYTES, and carries on with at most half of that
    as context (the lines after its last heading), so only a single list item or block quote longer than
    that, with a candidate inside, could be read differently (or a pandoc table that such a window reaches
    its bound inside).

    From a line of dashes (`_DASHES`) until one followed by a blank line, or for TABLE_LINES lines, a pandoc
    table may be open, and what is inside it is known only at its end: the window is held whole, with no
    fresh start, no heading read as it comes and no early read, so that it is read once the table is known.

    An HTML comment opener (`bindery.engine.comments`) is a candidate too: one that opens a top-level
    comment with no closer yet is followed as a fence is, to its closer (and refused if it never comes); one
    that a closer further on might still make a comment of (inside a container, or ending a paragraph)
    holds the window whole, cutting nothing after it, until a line holding `-->` comes and it is read again
    (or, past MAX_CONTEXT_BYTES or at the end, it is read as the text it then is)."""
    parser = _parser()
    stream = iter(lines)
    head, replayed = front_matter.split(stream)
    if front is not None:
        front.extend(head)
    window: deque[bytes] = deque()  # the lines since the last fresh start
    offsets: deque[int] = deque()  # where each of them starts in the manuscript
    window_bytes = 0
    read_up_to = 0  # the window's lines before this one were read already (a window read at its bound)
    candidates = 0  # lines of the window from read_up_to on that may open a heading or a fence
    unread_bytes = 0  # the bytes of those lines
    fence: bytes | None = None  # the markup of the top-level fenced code block we are inside, if any
    start, title = (
        sum(map(len, head)),
        None,
    )  # the open section: where it starts, its title (None: the opening)
    first_text: int | None = None  # where the opening's first line of text starts (not blank, no comment)
    in_comment = False  # inside a comment before the opening's first text
    # Where that comment opened, and the line that closed it: one still open where the opening ends is its
    # text (a cell of a table, `<!--` over dashes; a comment left open at the top level is refused).
    comment_from: int | None = None
    comment_to: int | None = None
    position = start
    numbered = len(head)  # the lines read so far; the window's last is the last of them
    after_blank = True
    comment_line = 0  # where the top-level comment we are inside opened, as a line of the manuscript
    held = False  # the window waits for a closer: a comment opener in it has none yet
    in_table = 0  # lines left in which a pandoc table opened by a line of dashes may yet be open
    dashed = False  # the window's last line is a line of dashes
    tokens = 0  # made by the reads so far
    yielded = 0  # sections so far: the open one, if it is one, is the next
    kept: set[Any] = set()  # where each note definition kept so far starts, and each target (and its id)
    hashed = _Hashed()
    waiting = hashed.waiting  # outside a fence the window is its last lines, so the rest is hashable

    def close(end: int, lines_in: int) -> Section | None:
        """The open section, ending at `end`, after its last line waiting (`lines_in` of them are its)."""
        nonlocal yielded
        digest = hashed.cut(lines_in)
        comment_closed = comment_to is not None and comment_to < end
        unclosed = comment_from is not None and comment_from < end and not comment_closed
        if title is None and (first_text is None or first_text >= end) and not unclosed:
            return None  # an opening of blank lines is no chapter
        yielded += 1
        return Section(title or OPENING_TITLE, start, end - start, digest)

    def read(final: bool = False) -> Iterator[Section]:
        """Read the window, cut at each top-level h1 from read_up_to on, and note a fence left open. After a
        comment opener with no closer yet, nothing is cut: the window is `held` until a line with one comes
        (or, `final`, no more will), and read again then; a top-level comment left open is a fence."""
        nonlocal start, title, fence, candidates, unread_bytes, read_up_to, comment_line, held, tokens
        found = _read(parser, list(window), read_up_to)
        tokens += found.tokens
        if anchors is not None and found.definitions:
            anchors.define(found.definitions)
        if tokens > MAX_CUT_TOKENS:
            raise errors.Unprocessable(
                f"by line {numbered:,}, the manuscript's lists and block quotes hold so many lines shaped "
                "like headings, fences or comments that finding its chapters would take over "
                f"{MAX_CUT_TOKENS:,} of markdown's tokens, the most a manuscript may take; split it into "
                "books, or put such text in fewer list items and quotes",
                code="manuscript_too_complex",
                line=numbered,
                limit=MAX_CUT_TOKENS,
            )
        starts = list(offsets)  # indexed once here, not by the deque (whose middle is reached in steps)
        opened = None if final else found.opened_comment
        unclosed = found.open_comment
        if unclosed is not None and opened is not None and opened < unclosed:
            unclosed = None  # an opener before it, inside a container, may yet be closed: held
        if unclosed is not None:
            opened = None  # the first opener is a top-level comment left open: a fence, exactly
        stop = unclosed if unclosed is not None else opened
        keep_from = 0
        titles = iter(found.headings)
        notes, targets = deque(found.notes), deque(found.targets)

        def note_before(line: int) -> None:
            """Keep the footnote definitions and numbered targets before `line`, in the open section: each
            read whole (not past a comment opener the window waits on), the first time it is, or again if
            it runs into lines not read before (a window read at its bound may have ended inside it)."""
            while notes and notes[0][0] < line:
                first, after, label, written = notes.popleft()
                if (after > read_up_to or starts[first] not in kept) and (stop is None or after <= stop):
                    kept.add(starts[first])
                    if anchors is not None:
                        anchors.note(yielded + 1, label, starts[first], written)
            while targets and targets[0][0] < line:
                first, after, target_id = targets.popleft()
                at = (starts[first], target_id)  # (a paragraph may hold several spans' ids)
                if (after > read_up_to or at not in kept) and (stop is None or after <= stop):
                    kept.add(at)
                    if anchors is not None:
                        anchors.target(yielded + 1, target_id)

        for first, after, level, top, explicit, said, written in found.marks:
            if stop is not None and after > stop:
                break  # inside a comment that goes on past the window, or may (or its opener read as text)
            note_before(first)
            heading = next(titles)[2] if top else ""
            if top:
                keep_from = after
            if after <= read_up_to:
                continue  # read when the window last reached its bound
            # `waiting` ends with the window: the lines before the heading's first are the open section's.
            if top and (starts[first] > start or title is not None):
                closed = close(starts[first], len(waiting) - (len(window) - first))
                if closed is not None:
                    yield closed
            if top:
                start, title = starts[first], heading
            if anchors is not None:
                anchors.add(yielded + 1, level, explicit, said, written)
        note_before(len(window) if stop is None else stop)
        candidates, unread_bytes, held = 0, 0, opened is not None
        fence = found.open_fence if not held else None  # (a fence after the opener may be in the comment)
        if unclosed is not None:
            fence, comment_line = COMMENT, numbered - len(window) + 1 + unclosed
        # After a heading nothing is open: the lines after the last one are all the context the next read
        # needs. A window past the bound keeps at most half of it, so that each read of a full window is paid
        # for by as many new bytes as it keeps; one within it keeps them all (read early, it loses nothing).
        # A window held is read again from its opener.
        read_up_to = opened if opened is not None else len(window)
        drop(keep_from, MAX_CONTEXT_BYTES // 2 if window_bytes > MAX_CONTEXT_BYTES else MAX_CONTEXT_BYTES)
        if not held:
            read_up_to = len(window)

    def drop(count: int, most: int) -> None:
        """Drop the window's first `count` lines, then its oldest until it holds at most `most` bytes."""
        nonlocal window_bytes, read_up_to
        while window and (count > 0 or window_bytes > most):
            window_bytes -= len(window.popleft())
            offsets.popleft()
            count -= 1
            read_up_to = max(0, read_up_to - 1)

    for line in itertools.chain(replayed, stream):
        if fence is None and not held and not in_table and after_blank and _starts_afresh(line):
            if candidates:
                yield from read()
            if fence is None and not held:
                drop(len(window), 0)
                read_up_to = 0
        waiting.append(line)
        numbered += 1
        if title is None and first_text is None and line.strip():
            # An opening of comments alone (an author's note at the top) is no chapter: it shows nothing.
            found = _COMMENT.match(line)
            if in_comment or found:
                closer = line.find(CLOSER.encode(), found.end() if found else 0)
                if not in_comment:
                    comment_from, comment_to = position, None
                in_comment = closer < 0
                if not in_comment:
                    comment_to = position
                if not in_comment and line[closer + len(CLOSER) :].strip():
                    first_text = position  # text after the comment, on its line
            else:
                first_text = position
        if fence is not None:
            # Nothing inside a top-level fence cuts, and nothing before it matters after it.
            drop(len(window), 0)
            if _closes(fence, line):
                fence = None
                read_up_to = 0
            if len(waiting) >= HASH_LINES:
                hashed.hash(len(waiting))  # no section starts inside a fence, nor on a line before it
            position += len(line)
            after_blank = False
            continue
        window.append(line)
        offsets.append(position)
        if _DASHES.fullmatch(line):
            in_table, dashed = TABLE_LINES, True
        elif in_table:
            # Dashes then a blank line close every table open (or are none's): the table is known.
            in_table = 0 if dashed and not line.strip() else in_table - 1
            dashed = False
        window_bytes += len(line)
        unread_bytes += len(line)
        # Every block marker that matters here starts with a space, '#', '=', '`', '~' or another of
        # _MARKER_STARTS, or is a list marker of letters (`a.`, `iv)`): any other line is plain text, and
        # skips the regular expressions (most lines), but for one that gives an id (`{#fig-map}`, `_IDS`).
        if (
            (line[:1] in _MARKER_STARTS or _LETTERED.match(line))
            and (
                _ATX.match(line)
                or _FENCE.match(line)
                or _COMMENT.match(line)
                or _DEFINITION.match(line)
                or (_SETEXT.match(line) and len(window) > 1 and window[-2].strip())
            )
        ) or (b"{" in line and any(found(line) for found in _IDS)):
            candidates += 1
            if line[:1] == b"#" and not in_table:
                # A heading in column 0 is one, unless a fence this window opened is still open; either way
                # the window ends here: after a heading nothing is open. So a window holds at most one such
                # heading, and a book of headings one line apart is read a line at a time.
                yield from read()
                if fence is None and not held:
                    drop(len(window), 0)
                    read_up_to = 0
            elif not in_table and candidates >= READ_AFTER and 4 * unread_bytes >= 3 * window_bytes:
                # Many candidates wait, and three quarters of the window are unread: read it now, so that a
                # long run of headings is cut as it comes (a book of too many is refused at its first one too
                # many). A window read again has grown fourfold since: a third more parsing, at most.
                yield from read()
        if held and CLOSER.encode() in line:
            yield from read()  # the closer a held window waits for, perhaps
        if window_bytes > MAX_CONTEXT_BYTES:
            if held:
                yield from read(final=True)  # an opener a MiB before its closer, inside a list item: text
            elif candidates:
                yield from read()
            else:
                drop(0, MAX_CONTEXT_BYTES // 2)
        if len(waiting) >= HASH_LINES:
            hashed.hash(len(waiting) - len(window))  # a section starts only at a line of the window
        after_blank = not line.strip()
        position += len(line)
    if candidates or held:
        yield from read(final=True)
    if fence == COMMENT:
        raise errors.Unprocessable(
            f"line {comment_line:,} opens an HTML comment (<!--) that is never closed (-->), which would "
            "hide the rest of the book; close it",
            code="unclosed_comment",
            line=comment_line,
        )
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
