"""Where a line of the PDF may break, and how wide what lies between two breaks can be set.

Text that offers Typst no line break (a long URL, a row of `>`, a word longer than a line, `! ! !`) is set
past the page's edge, where no reader sees it. So the PDF's writer sets every piece of a chapter's text
through `fitted`, which knows the measure the text is set in. A chain (what lies between two certain
breaks) that may be wider than the measure is marked for book.typ's `long`: Typst measures it, and if it is
wider, breaks it with zero-width spaces, the one break Unicode allows beside any character. A chain that
goes on from one element into the next (`*a*!`) is given one where they meet, if together they may be too
wide. Everything else is set as it is, so a book's ordinary text is untouched.

Only *certain* breaks end a chain here. Unicode's line breaking (UAX #14) always allows one
- after spaces followed by a letter, a digit or an opening bracket, unless an opening bracket or any
  quotation mark (or `¡`, `¿`) stands before them: no break follows `( `, and none comes before `)`, `!`,
  `,`, `-`, `。` or a quotation mark, spaces or not; a no-break space joins what it stands between;
- between two ideographs (Han, Hangul syllables, full-size kana).
Typst breaks at many more places (after hyphens and slashes, between ideographs and letters): a chain may
hold those, and is then measured when it need not be, never the other way round.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# The widest a character can be set, in em, by the book's fonts (every code point measured in Typst, upright
# and italic, regular and bold, by `python -m tests.font_widths`): printable ASCII 1.028 (a bold W); U+0080
# to U+05FF (Latin, IPA, Greek, Cyrillic, Armenian, Hebrew) 1.512 (U+052A, bold); anything else 2.723
# (U+0BCC, Tamil's AU length mark, set alone on a dotted circle, bold; DEL 1.418), but U+FDFD, the
# basmala as one character, 11.459 (bold). In the code font, printable ASCII 0.602 and the rest as above.
_ASCII_EM, _LOW_EM, _ANY_EM, _MONO_EM, _BASMALA_EM = 1.05, 1.55, 2.75, 0.61, 11.5
BASMALA = "\ufdfd"

SPACES = " \t\n\r\f\u1680\u2000-\u2006\u2008-\u200a\u205f\u3000"  # the spaces a line may break after
_KANA = (
    "\u3042\u3044\u3046\u3048\u304a-\u3062\u3064-\u3082\u3084\u3086\u3088-\u308d\u308f-\u3094"
    "\u30a2\u30a4\u30a6\u30a8\u30aa-\u30c2\u30c4-\u30e2\u30e4\u30e6\u30e8-\u30ed\u30ef-\u30f4\u30f7-\u30fa"
)  # full size: a small kana or the long vowel mark may not begin a line
IDEOGRAPHS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7a3\U00020000-\U0003fffd" + _KANA
_BETWEEN_IDEOGRAPHS = re.compile(f"(?<=[{IDEOGRAPHS}])(?=[{IDEOGRAPHS}])")
ZWSP = "\u200b"
_WIDE = re.compile("[\x7f\u0600-\U0010ffff]")


def widest(run: str, size: float, *, mono: bool = False) -> float:
    """At most how wide, in pt, `run` can be set at `size` pt."""
    narrow = _ascii_em(mono)
    wide = run.count("\x7f")
    if run.isascii():
        return ((len(run) - wide) * narrow + wide * _ANY_EM) * size
    ascii_ = len(run.encode("ascii", "ignore")) - wide
    wide = len(_WIDE.findall(run))
    basmala = run.count(BASMALA)
    low = len(run) - ascii_ - wide
    return (ascii_ * narrow + low * _LOW_EM + (wide - basmala) * _ANY_EM + basmala * _BASMALA_EM) * size


def _ascii_em(mono: bool) -> float:
    """The widest a character of printable ASCII can be set, in em."""
    return _MONO_EM if mono else _ASCII_EM


def _ranges(inside: Iterable[bool]) -> str:
    """A regex class's body: every code point (counted from 0) that is `inside`, as ranges."""
    out, cp = [], 0
    for held, run in itertools.groupby(inside):
        count = sum(1 for _ in run)
        if held:
            out.append(f"\\u{cp:04x}-\\u{cp + count - 1:04x}")
        cp += count
    return "".join(out)


# What a line may begin with after a space (UAX #14's classes AL, NU, OP, PR, PO, ID and their kin): below
# the CJK blocks, letters, digits, symbols but `|` and `⁄`, opening brackets, and these of the rest of
# ASCII's punctuation; in the CJK blocks, only the ideographs (their punctuation, small kana and marks may
# not). Not after a space: closing brackets, quotation marks, dashes, hyphens, `!`, `?`, `,`, `.`, `/`,
# modifier letters (some may not), marks and other punctuation (much of it may not).
_BEGINS_CATEGORIES = ("Lu", "Ll", "Lt", "Lo", "Nd", "Nl", "No", "Ps", "Sc", "Sk", "So", "Sm")
_BEGINS_PUNCTUATION = "#%&*@\\_"


def _begins_line(ch: str, category: str) -> bool:
    return ch in _BEGINS_PUNCTUATION or (category in _BEGINS_CATEGORIES and ch not in "|⁄")


@dataclass(frozen=True)
class _Patterns:
    chain: re.Pattern[str]  # a chain of words, joined by spaces that may not break
    joined: re.Pattern[str]  # a chain of two words or more
    begins: re.Pattern[str]  # a character a line may begin with after a space
    holds: re.Pattern[str]  # a character no break may follow, spaces or not
    quotes: re.Pattern[str]  # a closing quotation mark: no break may follow it before an opening bracket
    opens: re.Pattern[str]  # an opening bracket


@functools.cache
def _patterns() -> _Patterns:
    """Built on first use, not at import: some 45 ms, which a cold pdf build waits for. The Unicode database
    is read once for the Basic Multilingual Plane (25 ms; a pass for each class took 37); the rest is
    compiling the patterns."""
    categories = [unicodedata.category(chr(cp)) for cp in range(0x10000)]
    begins = _ranges(_begins_line(chr(cp), categories[cp]) for cp in range(0x3000)) + IDEOGRAPHS
    opens = _ranges(category == "Ps" for category in categories)
    holds = opens + _ranges(category == "Pi" for category in categories) + "¡¿"
    quotes = _ranges(category == "Pf" for category in categories) + "\"'"
    s = SPACES
    # after an opening bracket or quotation mark; after a closing one, before an opening bracket; and
    # before anything but a letter, a digit or an opening bracket
    uncertain = f"(?:(?<=[{holds}])[{s}]++|(?<=[{quotes}])[{s}]++(?=[{opens}])|[{s}]++(?=[^{begins}{s}]))"
    return _Patterns(
        chain=re.compile(f"[^{s}]++(?:{uncertain}[^{s}]++)*"),
        joined=re.compile(f"(?<![^{s}])[^{s}]++(?:{uncertain}[^{s}]++)+"),
        begins=re.compile(f"[{begins}]"),
        holds=re.compile(f"[{holds}]"),
        quotes=re.compile(f"[{quotes}]"),
        opens=re.compile(f"[{opens}]"),
    )


@functools.cache
def _long_words(ascii_: int, any_: int) -> re.Pattern[str]:
    """Words of printable ASCII of `ascii_` characters or more, and other words of `any_` or more (a
    shorter word fits, whatever its characters)."""
    s = SPACES
    return re.compile(
        f"(?<![^{s}])[!-~]{{{ascii_},}}(?![^{s}])|(?<![^{s}])(?=[!-~]*[^!-~{s}])[^{s}]{{{any_},}}"
    )


def _candidates(value: str, start: int, ascii_: int, any_: int) -> list[re.Match[str]]:
    """The chains of `value` from `start` that may be too wide, in order: those of two words or more, and
    the long words outside them. The rest of the text is passed over in C."""
    chains = list(_patterns().joined.finditer(value, start))
    ends = [m.end() for m in chains]
    words = [
        word
        for word in _long_words(ascii_ // 8 * 8 or 1, any_ // 4 * 4 or 1).finditer(value, start)
        # not inside a chain (the first chain that ends after the word starts begins after it)
        if (n := bisect.bisect_right(ends, word.start())) == len(chains) or chains[n].start() > word.start()
    ]
    return sorted(chains + words, key=lambda m: m.start()) if words else chains


_LEADING = re.compile(f"[{SPACES}]*")
_SPACE_CHARS = "".join(re.findall(f"[{SPACES}]", "".join(map(chr, range(0x3001)))))
_LAST = re.compile(f"[^{SPACES}]+\\Z")


@dataclass
class Run:
    """The chain the text set so far ends in: at most how wide it is (pt), its last character, and
    whether spaces end it (a break after them is certain only before a letter, say)."""

    width: float = 0.0
    last: str = ""
    spaced: bool = False


def fitted(
    value: str,
    measure: float,
    size: float,
    literal: Callable[[str], str],
    *,
    code: bool = False,
    run: Run | None = None,
) -> str:
    """`value` as Typst markup, set `measure` pt wide at `size` pt: text (or inline code, `code`) whose
    every word may be set inside the measure or is marked for Typst to measure, and whose every chain has
    a break where it may grow wider. `run` is the chain the text before it ends in, which may go on into
    `value` (it is updated to the one `value` ends in)."""
    run = run if run is not None else Run()
    measure = max(measure, 1.0)  # a cell of a table with many columns may have next to nothing
    top = _BASMALA_EM if BASMALA in value else _ANY_EM  # the widest any one of its characters may be
    bound = widest(value, size, mono=code) if value.isascii() else len(value) * top * size
    if not run.width and value and bound <= measure:
        # The whole of it fits, and nothing before goes on into it (the usual short piece of text, or a
        # narrow table's cell of a few characters).
        trailing = len(value.rstrip(_SPACE_CHARS))
        run.width = widest(value[:trailing], size, mono=code)
        run.last, run.spaced = value[trailing - 1] if trailing else run.last, trailing < len(value)
        return f"#raw({literal(value)})" if code else f"#{literal(value)}"
    patterns = _patterns()
    parts: list[str] = []  # plain text, and markup (a `long` call) where it starts with "#"
    plain: list[str] = []
    shortest = measure / (top * size)  # a word of fewer characters fits, whatever they are

    def flush() -> None:
        joined = "".join(plain)
        if joined:
            parts.append(f"#raw({literal(joined)})" if code else f"#{literal(joined)}")
        plain.clear()

    def chain(text: str, width: float) -> float:
        """Set a chain that `width` pt of unbroken text before it goes on into; return how wide its end
        may be. It breaks between two ideographs; a piece between such breaks that may be wider than the
        measure is marked, for Typst to measure (and, if it is wider, to break at each of its spaces and
        cut each of its words that is)."""
        pieces = _BETWEEN_IDEOGRAPHS.split(text) if not text.isascii() else [text]
        if len(pieces) > 1 and max(map(len, pieces)) < shortest:
            # Ideographs and what clings to them: each piece fits, and a line may break between any two.
            if width and width + widest(pieces[0], size, mono=code) > measure:
                plain.append(ZWSP)
            plain.append(text)
            return widest(pieces[-1], size, mono=code)
        for n, piece in enumerate(pieces):
            wide = widest(piece, size, mono=code)
            if n:
                width = 0.0  # between two ideographs
            elif width and width + wide > measure:
                plain.append(ZWSP)  # the text before goes on into it and may grow too wide: a break
                width = 0.0
            if wide > measure:
                flush()
                parts.append(f"#long({literal(piece)}, {measure:.2f}pt{', code: true' if code else ''})")
                wide = measure  # however Typst breaks it, its last line is no wider
            else:
                plain.append(piece)
            width += wide
        return width

    # The first chain may go on from the text before; the others need setting only if they may be too
    # wide; the last is measured for the text after.
    begin = _LEADING.match(value).end()  # type: ignore[union-attr]  # it matches anywhere, if only ""
    if begin == len(value):  # spaces only, or nothing
        run.width += widest(value, size, mono=code)
        run.spaced = run.spaced or bool(value)
        return f"#raw({literal(value)})" if code and value else (f"#{literal(value)}" if value else "")
    first = patterns.chain.match(value, begin)
    assert first is not None
    width = 0.0
    if run.width:
        spaced = run.spaced or begin > 0
        held = patterns.holds.match(run.last) or (
            patterns.quotes.match(run.last) and patterns.opens.match(value[begin])
        )
        certain = spaced and patterns.begins.match(value[begin]) and not held
        between = not spaced and _BETWEEN_IDEOGRAPHS.match(run.last + value[begin], 1) is not None
        if not (certain or between):
            width = run.width + widest(value[:begin], size, mono=code)  # it goes on into this one
    plain.append(value[:begin])
    width = chain(first.group(), width)
    done = first.end()
    longest = int(measure / (_ascii_em(code) * size)) + 1  # printable ASCII fits below this
    fits_at_end = None  # the last chain, if it fits (and so was passed over)
    for match in _candidates(value, done, longest, max(1, int(shortest))):
        start, end = match.span()
        if widest(match.group(), size, mono=code) <= measure:
            fits_at_end = match
            continue  # fits, and breaks on either side: as it is
        plain.append(value[done:start])
        width = chain(match.group(), 0.0)
        done = end
    trailing = len(value.rstrip(_SPACE_CHARS))
    if fits_at_end is not None and fits_at_end.end() == trailing:
        width = widest(fits_at_end.group(), size, mono=code)
    elif done < trailing:  # a word that fits, after the last chain set: no longer than a candidate
        last = _LAST.search(value, max(done, trailing - longest - 1), trailing)
        width = widest(last.group() if last else value[done:trailing], size, mono=code)
    run.width, run.last, run.spaced = width, value[trailing - 1], trailing < len(value)
    plain.append(value[done:])
    flush()
    return "".join(parts)
