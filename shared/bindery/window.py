"""What markdown-it reads in one window of the cut (`bindery.manuscript.cut`): a run of lines from the last
point where nothing was open, parsed as a whole-document parse reads them, for its top-level h1s, every
heading (the book's anchors), its link reference definitions, and what it leaves open at its end (a fence,
a comment).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bindery.engine import crossrefs, divs, spans
from bindery.engine.comments import CLOSER, OPENED, UNCLOSED
from bindery.engine.headings import parse_attributes, split_attributes, words

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

# What the cut keeps as its open fence while inside a top-level HTML comment (`bindery.engine.comments`),
# which no fence's markup can be: it ends at the first line that holds `-->`.
COMMENT = b"<!--"


def closes(fence: bytes, line: bytes) -> bool:
    """CommonMark's closing fence: up to three spaces, then at least as many of the same character as
    the opening, then only spaces or tabs. (A comment's: a line that holds `-->`.)"""
    if fence == COMMENT:
        return CLOSER.encode() in line
    text = line.rstrip(b"\r\n")
    rest = text.lstrip(b" ")
    if len(text) - len(rest) > 3:
        return False
    run = len(rest) - len(rest.lstrip(fence[:1]))
    return run >= len(fence) and not rest[run:].strip(b" \t")


# What of a heading's inline content its title keeps: its text and code, a line break as a space.
_TITLE_PARTS = frozenset(
    ("text", "code_inline", "math_inline", "math_display", "softbreak", "hardbreak")
)  # (math: its TeX)
_WORDS = {"softbreak": " ", "hardbreak": " "}


@dataclass(frozen=True)
class Read:
    """What markdown-it reads in a window: its top-level h1s, as (first line, line after the last, title),
    the markup of a top-level fenced code block still open at its end, if any, and the first line of a
    top-level HTML comment still open there, if any (the h1s after it are inside it), and of any comment
    opener with no closer after it in the window (one further on would make the lines after it a comment)."""

    headings: list[tuple[int, int, str]]
    open_fence: bytes | None
    # Every heading, of every level and depth, in order: (first line, line after the last, level, whether
    # it is a top-level h1 (one of `headings`), its explicit id, its words, its content as written).
    marks: list[tuple[int, int, int, bool, str | None, str, str]] = field(default_factory=list)
    open_comment: int | None = None
    opened_comment: int | None = None
    tokens: int = 0  # how many markdown-it made
    definitions: dict[str, Any] = field(default_factory=dict)  # its link reference definitions
    # Its footnote definitions, in order: (first line, line after the last, label, the lines as written).
    notes: list[tuple[int, int, str, str]] = field(default_factory=list)
    # Its numbered figures and tables (`bindery.engine.crossrefs`) and its spans' ids
    # (`bindery.engine.spans`): (first line, line after the last, id).
    targets: list[tuple[int, int, str]] = field(default_factory=list)


def read(parser: MarkdownIt, window: list[bytes], reported: int = 0) -> Read:
    """The window's blocks, as a whole-document parse of it reads them. Blocks only: a heading's inline
    content alone is parsed, for its title and id, unless it ends before line `reported` (an earlier read
    of the window reported it)."""
    tokens: list[Token] = []
    env: dict[str, Any] = {}  # the window's link reference definitions, which a title may use
    parser.block.parse(b"".join(window).decode("utf-8", errors="replace"), parser, env, tokens)
    headings: list[tuple[int, int, str]] = []
    marks: list[tuple[int, int, int, bool, str | None, str, str]] = []
    open_fence = None
    notes: list[tuple[int, int, str, str]] = []
    in_note = False  # inside a footnote's definition: its headings are the note's, not the book's
    for i, token in enumerate(tokens):
        if token.type == "footnote_reference_close":
            in_note = False
        if not token.map:
            continue
        if token.type == "footnote_reference_open":
            in_note = True
            first, after = token.map
            written = b"".join(window[first:after]).decode("utf-8", errors="replace")
            notes.append((first, after, token.meta["label"], written))
        elif token.type == "heading_open" and not in_note:
            if token.map[1] <= reported:
                top = token.level == 0 and token.tag == "h1"
                marks.append((token.map[0], token.map[1], int(token.tag[1]), top, None, "", ""))
                if top:
                    headings.append((token.map[0], token.map[1], ""))
                continue
            content, attributes = split_attributes(tokens[i + 1].content)
            inline = parser.parseInline(content, env)[0]
            explicit = parse_attributes(attributes).id if attributes else None
            top = token.level == 0 and token.tag == "h1"
            said = words(inline.children or [])
            marks.append((token.map[0], token.map[1], int(token.tag[1]), top, explicit, said, content))
            if top:
                shown = [
                    _WORDS.get(c.type, c.content) for c in inline.children or [] if c.type in _TITLE_PARTS
                ]
                headings.append((token.map[0], token.map[1], "".join(shown).strip() or "Untitled"))
        elif token.level != 0:
            continue
        elif token.type == "fence" and token.map[1] == len(window):
            # A fence that runs to the window's end is open there, unless its last line is its closer.
            markup = token.markup.encode()
            if token.map[0] == len(window) - 1 or not closes(markup, window[-1]):
                open_fence = markup

    def parse_inline(content: str) -> Any:
        return parser.parseInline(content, env)[0]

    return Read(
        headings,
        open_fence,
        marks,
        env.get(UNCLOSED),
        env.get(OPENED),
        len(tokens),
        env.get("references", {}),
        notes,
        sorted(
            crossrefs.targets(tokens, parse_inline)
            + spans.targets(tokens, parse_inline)
            + divs.targets(tokens),
            key=lambda t: t[0],
        ),
    )
