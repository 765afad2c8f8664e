"""markup.parser reads every manuscript as markdown-it does: the rules it replaces so that its work is
linear (link labels, destinations, notes' references, the dispatch of rules by character and by line)
change how long a manuscript takes, never the tokens it gives. What it is compared with is markdown-it as
markup.parser configures it, with none of those rules (but its own bounded block tokenize, which is a
change of what it reads, past twenty levels)."""

from __future__ import annotations

from types import MethodType
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.helpers import parseLinkDestination
from mdit_py_plugins.footnote import footnote_plugin

from bindery.engine import block_rules, inline_rules, markup


def _markdown_it() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "xhtmlOut": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.use(footnote_plugin)
    markup.dialect(md)  # what the dialect reads besides CommonMark's: the same rules on both sides
    md.block.tokenize = MethodType(block_rules._tokenize_bounded, md.block)  # type: ignore[method-assign]
    return md


OURS, THEIRS = markup.parser(), _markdown_it()

# The pieces the linear rules read (brackets, notes, destinations, emphasis, lines that open blocks), and
# characters that end text, open nothing, or are not ASCII.
_INLINE = st.sampled_from(
    ["[", "]", "(", ")", "![", "^[", "[^1]", "[^", "](", "](<", "](/u)", "[a]", "<", ">", "\\", "`", "*",
     "_", "~~", "&amp;", "&#", "!", "^", ":", "#", "|", " ", "a", "é", "“", "\u00a0", "\n", "\t", '"', "'"]
)  # fmt: skip
_LINE_START = st.sampled_from(
    ["", "", "# ", "## ", "> ", "- ", "* ", "+ ", "1. ", "2) ", "    ", "  ", "```", "~~~", "|", "|-|-|",
     "***", "---", "___", "_ _ _", "===", "[a]: /u", "[a]: /u 't", "[^1]: ", "[^1]:", "> > ", "- - ", "\t",
     "<div>"]
)  # fmt: skip
_LINE = st.tuples(_LINE_START, st.lists(_INLINE, max_size=12)).map(lambda t: t[0] + "".join(t[1]))
_MANUSCRIPT = st.lists(_LINE, min_size=1, max_size=10).map("\n".join)
# Runs of one piece, deep past markdown-it's twenty levels of nesting.
_DEEP = st.lists(
    st.tuples(
        st.sampled_from(["[", "]", "](/u)", "![", "^[", "[^1]", "(", "*", "a", " "]), st.integers(1, 45)
    ),
    min_size=1,
    max_size=6,
).map(lambda runs: "".join(piece * count for piece, count in runs))
_HEADS = st.sampled_from(["", "[a]: /u\n\n", "[^1]: a note\n\n"])


def _tokens(md: MarkdownIt, text: str) -> list[dict[str, Any]]:
    return [token.as_dict() for token in md.parse(text, {})]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_HEADS, st.one_of(_MANUSCRIPT, _DEEP))
@example("", "![[x [a](/u)]](/i)")  # a link inside a text `[` ends a link's label, not an image's
@example("", "[" * 25 + "a](/u)" + "]" * 25)  # past markdown-it's twenty levels
@example("", "^[a ^[b] [c](/u)] ![d ^[e]](/f)")
@example("[^1]: a note\n\n", "[^" * 30 + "[^1]")
@example("[a]: /u\n\n", "[a][" * 30 + "[a][a]")
@example("", "[a](b" * 40 + ")" * 3)
def test_the_linear_parser_gives_the_tokens_markdown_it_gives(head: str, text: str) -> None:
    assert _tokens(OURS, head + text) == _tokens(THEIRS, head + text)


# Parentheses most of all: a walk fails past 32 of them unclosed.
_DESTINATION_TEXT = st.text(st.sampled_from("((((((()))a\\ \x01<>b\n"), max_size=200)


@settings(max_examples=300, deadline=None)
@given(_DESTINATION_TEXT, st.lists(st.tuples(st.integers(0, 210), st.booleans()), max_size=20))
@example("(" * 5 + "))" + "(" * 30, [])  # a walk that met `)` before failing is not one to resume
def test_each_link_destination_is_read_as_markdown_it_reads_it(
    text: str, calls: list[tuple[int, bool]]
) -> None:
    # One reader for the whole text, as a paragraph's links share one: a walk it keeps must never answer
    # for a destination it does not hold. Read from each position in turn, as a paragraph's links are,
    # then from others, some to a nearer end.
    ours = inline_rules._Destinations()
    for pos, to_end in [(pos, True) for pos in range(len(text) + 1)] + calls:
        maximum = len(text) if to_end else min(len(text), pos + 40)
        mine, theirs = ours(text, pos, maximum), parseLinkDestination(text, pos, maximum)
        assert (mine.ok, mine.str) == (theirs.ok, theirs.str)
        if theirs.ok:
            assert mine.pos == theirs.pos


def test_a_destination_resumed_inside_a_walk_that_failed_on_parentheses_is_read_as_markdown_it_does() -> None:
    text = "[a](b" * 80 + ")" * 5 + " [c](d(e)f)"
    ours = inline_rules._Destinations()
    resumed = 0
    for pos in range(len(text)):
        kept = ours._deepest
        resumed += kept is not None and kept[2][0] < pos <= kept[2][-1]
        mine, theirs = ours(text, pos, len(text)), parseLinkDestination(text, pos, len(text))
        assert (mine.ok, mine.str) == (theirs.ok, theirs.str)
        if theirs.ok:
            assert mine.pos == theirs.pos
    assert resumed > 100  # the walks did resume: the test reads the path it is about
