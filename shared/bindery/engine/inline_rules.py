"""markdown-it's inline parsing, in work linear in the paragraph: the inline tokens markdown-it (and
mdit-py-plugins' notes) give, unchanged.

Where markdown-it walked the same text again for each bracket, destination or note's reference, or asked
every rule at every character, `install` puts rules and helpers that read the same tokens once (each says
which walk it replaces): inline rules asked by the character they stand on, link labels' ends kept for the
paragraph, destinations stepped through by the characters that matter, notes' references found by
bisection. tests/unit/test_markup.py holds them to markdown-it's tokens; tests/unit/test_render_work.py
holds html, epub and docx to linear work on every family of hostile input.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from types import MethodType, SimpleNamespace
from typing import Any

from markdown_it import MarkdownIt, helpers, rules_inline
from markdown_it.common.utils import unescapeAll
from markdown_it.helpers.parse_link_destination import _Result
from markdown_it.parser_inline import ParserInline, RuleFuncInlineType
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.footnote.index import _data_from_env

from bindery.engine.comments import comment_inline
from bindery.engine.formulas import formula
from bindery.engine.inline_html import html_subset
from bindery.engine.scripts import escaped_space, subscript, superscript
from bindery.engine.spans import bracketed_span


def install(md: MarkdownIt) -> None:
    """`md`'s inline tokenize, skipToken and parse, its link helpers and its notes' rules (the footnote
    plugin's, which `md` must already use), replaced by this module's."""
    # The link, image and reference rules find their labels and destinations through md.helpers (its own
    # attribute, so this parser's alone); the notes' rules are replaced where they scan.
    md.helpers = SimpleNamespace(  # type: ignore[assignment]
        parseLinkLabel=_link_label_end,
        parseLinkDestination=_Destinations(),
        parseLinkTitle=helpers.parseLinkTitle,
    )
    md.inline.ruler.at("footnote_inline", _inline_note)
    md.inline.ruler.at("footnote_ref", _note_reference)
    md.inline.tokenize = MethodType(_tokenize_inline, md.inline)  # type: ignore[method-assign]
    md.inline.skipToken = MethodType(_skip_token, md.inline)  # type: ignore[method-assign]
    md.inline.parse = MethodType(_parse_inline, md.inline)  # type: ignore[method-assign]


class _InlineRules:
    """The inline rules that may match at a character, in the ruler's order: each rule of markdown-it's
    and the notes' looks at the character it stands on first and declines any but its own (text: any but
    the characters that end text), so asking only these is asking them all. A rule not known here is asked
    at every character."""

    def __init__(self, rules: list[RuleFuncInlineType], ends_text: re.Pattern[str]) -> None:
        self.rules, self.ends_text = rules, ends_text
        self.all_known = all(rule in _MARKERS for rule in rules)
        self._marked = frozenset("".join(_MARKERS.values()))
        # Kept for the ASCII characters alone: a manuscript of every character in Unicode leaves a
        # worker's parser no larger.
        self._at: dict[str, tuple[RuleFuncInlineType, ...]] = {}
        self._plain = tuple(rule for rule in rules if rule is rules_inline.text or rule not in _MARKERS)

    def at(self, char: str) -> tuple[RuleFuncInlineType, ...]:
        found = self._at.get(char)
        if found is None:
            if char in self._marked or self.ends_text.match(char) is not None:
                found = tuple(
                    rule
                    for rule in self.rules
                    if (rule is rules_inline.text and self.ends_text.match(char) is None)
                    or char in _MARKERS.get(rule, char)
                )
            else:
                found = self._plain  # text, and any rule not known here
            if char < "\x80":
                self._at[char] = found
        return found


def _inline_rules(inline: ParserInline) -> _InlineRules:
    """The parser's `_InlineRules`, made again when its ruler's rules change."""
    rules, ends_text = inline.ruler.getRules(""), inline.terminator_re
    made: _InlineRules | None = getattr(inline, "_inline_rules", None)
    if made is None or made.rules is not rules or made.ends_text is not ends_text:
        made = _InlineRules(rules, ends_text)
        inline._inline_rules = made  # type: ignore[attr-defined]
    return made


def _parse_inline(self: ParserInline, src: str, md: MarkdownIt, env: Any, tokens: list[Token]) -> list[Token]:
    """markdown-it's inline parse; text in which no rule can match (no character that ends text, when
    every rule is one `_InlineRules` knows) is the one text token it would make, made without a parser's
    state: a table's cells, a list's items and short headings are most often such text."""
    if src and self.terminator_re.search(src) is None and _inline_rules(self).all_known:
        token = Token("text", "", 0)
        token.content = src
        tokens.append(token)
        return tokens
    state = StateInline(src, md, env, tokens)
    self.tokenize(state)
    for rule in self.ruler2.getRules(""):
        rule(state)
    destinations = md.helpers.parseLinkDestination
    if isinstance(destinations, _Destinations):
        destinations.forget()  # (a worker's parser outlives the book: it keeps no text of it)
    return state.tokens


def _tokenize_inline(self: ParserInline, state: StateInline) -> None:
    """markdown-it's inline tokenize, asking at each position only the rules that may match there
    (`_InlineRules`): a character that ends text and opens nothing (`]`, `#`, `:`, ...) was offered to all
    thirteen rules, so a run of them cost a dozen calls a character."""
    rules_at, src, end = _inline_rules(self).at, state.src, state.posMax
    max_nesting = state.md.options["maxNesting"]
    while state.pos < end:
        pos, ok = state.pos, False
        if state.level < max_nesting:
            for rule in rules_at(src[pos]):
                ok = rule(state, False)
                if ok:
                    if state.pos <= pos:
                        raise RuntimeError("inline rule didn't increment state.pos")
                    break
        if ok:
            if state.pos >= end:
                break
            continue
        state.append_pending(src[state.pos])
        state.pos += 1
    if state.pending:
        state.pushPending()


def _skip_token(self: ParserInline, state: StateInline) -> None:
    """markdown-it's skipToken (a token skipped in a lookahead, its end cached by position), asking only
    the rules that may match there, as `_tokenize_inline` does."""
    pos, cache = state.pos, state.cache
    if pos in cache:
        state.pos = cache[pos]
        return
    ok = False
    if state.level < state.md.options["maxNesting"]:
        for rule in _inline_rules(self).at(state.src[pos]):
            state.level += 1  # bounds the lookahead's nesting, as markdown-it does
            ok = rule(state, True)
            state.level -= 1
            if ok:
                if state.pos <= pos:
                    raise RuntimeError("inline rule didn't increment state.pos")
                break
    else:
        state.pos = state.posMax  # nested too deep: markdown-it skips to the end of the range
    if not ok:
        state.pos += 1
    cache[pos] = state.pos


# Where the label opened at a position ends (or -1), as this paragraph's scans have found it: by (position,
# whether a link inside ends it, the end of the range scanned).
_LabelEnds = dict[tuple[int, bool, int], int]


def _link_label_end(state: StateInline, start: int, disable_nested: bool = False) -> int:
    """markdown-it's parseLinkLabel (where the label opened by the `[` at `start` closes, or -1), in work
    linear in the paragraph. markdown-it walks every label to its end, through every label nested in it:
    `[` x n then `a` then `]` x n walked each bracket about twenty times over (until maxNesting cut the
    walk short), and nested brackets cost sixteen times their size in prose.

    Here each label's end, once found, is kept for the paragraph, and a walk that meets a `[` of plain text
    whose own label was already read takes that label's answer: it steps past its end (the brackets between
    are balanced, so its depth is unchanged), or, when it never closes (or a link in it ended it), this
    label cannot close either, being open around it. What the walk skips and stops at is unchanged, so a
    label ends where markdown-it's does."""
    ends: _LabelEnds = _label_ends(state)
    maximum = state.posMax
    key = (start, disable_nested, maximum)
    end = ends.get(key)
    if end is not None:
        return end
    src, skip, old_pos = state.src, state.md.inline.skipToken, state.pos
    state.pos, level, end = start + 1, 1, -1
    while state.pos < maximum:
        marker = src[state.pos]
        if marker == "]":
            level -= 1
            if level == 0:
                end = state.pos
                break
        before = state.pos
        skip(state)
        if marker != "[":
            continue
        if state.pos != before + 1:  # a link (or note) of its own: none may stand in a link's label
            if disable_nested:
                break
            continue
        inner = ends.get((before, disable_nested, maximum))
        if inner is None and not disable_nested:  # a link's label that closed closes an image's too
            closed = ends.get((before, True, maximum), -1)
            inner = closed if closed >= 0 else None
        if inner is None:
            level += 1
        elif inner < 0:
            break  # the label inside never closes, and this one is open around it
        else:
            state.pos = inner
            skip(state)  # its `]`, as the walk would have stepped over it
    state.pos = old_pos
    ends[key] = end
    return end


def _label_ends(state: StateInline) -> _LabelEnds:
    ends: _LabelEnds | None = getattr(state, "_label_ends", None)
    if ends is None:
        ends = {}
        state._label_ends = ends  # type: ignore[attr-defined]
    return ends


# The characters a link destination's walk stops at: a space, a control, a backslash, a parenthesis.
_DESTINATION_STOP = re.compile(r"[\x00-\x20\x7f\\()]")
_BRACKETED_STOP = re.compile(r"[\n<>\\]")
MAX_DESTINATION_PARENS = 32  # markdown-it's and cmark's bound on nested parentheses in a destination


class _Destinations:
    """markdown-it's parseLinkDestination, in work linear in the paragraph.

    markdown-it walks a destination one character at a time; this steps from one character that matters
    to the next (a space, a control, a backslash, a parenthesis). And it keeps the last walk that failed on
    its 33rd unclosed parenthesis having met nothing else: a destination starting inside that walk meets
    the same parentheses from where it starts, one level lower for each it does not see, so it resumes
    after them instead of walking them again. `[a](b` repeated tried a destination at each link, each
    walking ~160 characters to its 33rd parenthesis: now each steps to one more."""

    def __init__(self) -> None:
        # The last walk that failed on too many parentheses with nothing else met: (the text, the end of
        # the range walked, the positions of the parentheses it counted).
        self._deepest: tuple[str, int, list[int]] | None = None

    def forget(self) -> None:
        """Let go of the text of the walk kept, once its paragraph is read."""
        self._deepest = None

    def __call__(self, string: str, pos: int, maximum: int) -> _Result:
        result, start = _Result(), pos
        if pos >= maximum:
            return result
        if string[pos] == "<":
            pos += 1
            while (found := _BRACKETED_STOP.search(string, pos, maximum)) is not None:
                pos = found.start()
                char = string[pos]
                if char == ">":
                    result.pos, result.str, result.ok = pos + 1, unescapeAll(string[start + 1 : pos]), True
                    return result
                if char != "\\":
                    return result  # a line break or a `<`
                pos += 2 if pos + 1 < maximum else 1
            return result  # no closing `>`
        opens: list[int] = []  # the parentheses opened, while nothing else has been met
        deepest = self._deepest
        if deepest is not None and deepest[0] is string and deepest[1] == maximum and deepest[2][0] < pos:
            counted = deepest[2]
            if pos <= counted[-1]:  # inside that walk: its parentheses from here, and on after them
                opens = counted[bisect_left(counted, pos) :]
                pos = counted[-1] + 1
        level, only_opens = len(opens), True
        while (found := _DESTINATION_STOP.search(string, pos, maximum)) is not None:
            pos = found.start()
            char = string[pos]
            if char == "(":
                level += 1
                if only_opens:
                    opens.append(pos)
                if level > MAX_DESTINATION_PARENS:
                    if only_opens:
                        self._deepest = (string, maximum, opens)
                    return result
                pos += 1
                continue
            only_opens = False
            if char == "\\":
                if pos + 1 < maximum:
                    if string[pos + 1] == " ":
                        break
                    pos += 2
                    continue
            elif char == ")":
                if level == 0:
                    break
                level -= 1
            else:
                break  # a space or a control character
            pos += 1
        else:
            pos = maximum
        if start == pos or level != 0:
            return result
        result.str, result.pos, result.ok = unescapeAll(string[start:pos]), pos, True
        return result


def _inline_note(state: StateInline, silent: bool) -> bool:
    """mdit-py-plugins' footnote_inline (`^[a note]`), its label found by `_link_label_end`."""
    maximum, start = state.posMax, state.pos
    if start + 2 >= maximum or state.src[start] != "^" or state.src[start + 1] != "[":
        return False
    label_start = start + 2
    label_end = _link_label_end(state, start + 1)
    if label_end < 0:
        return False
    if not silent:
        refs = _data_from_env(state.env)["list"]
        note_id = len(refs)
        tokens: list[Any] = []
        refs[note_id] = {"content": state.src[label_start:label_end], "tokens": tokens}
        state.md.inline.parse(state.src[label_start:label_end], state.md, state.env, tokens)
        token = state.push("footnote_ref", "", 0)
        token.meta = {"id": note_id}
    state.pos = label_end + 1
    state.posMax = maximum
    return True


_NOTE_LABEL_STOP = re.compile(r"[ \n\]]")


def _note_reference(state: StateInline, silent: bool) -> bool:
    """mdit-py-plugins' footnote_ref (`[^label]`), which walked from each `[^` to the next space, line
    break or `]`, one character at a time: `[^` repeated on one line, in a chapter with a note, walked the
    rest of the line from each (80 KB took six minutes). Here the paragraph's stopping places are listed
    once, when a note's reference is first looked for in it, and each `[^` finds its own by bisection."""
    maximum, start = state.posMax, state.pos
    if start + 3 > maximum:
        return False
    if state.src[start] != "[" or state.src[start + 1] != "^":
        return False
    notes = _data_from_env(state.env)
    if not notes["refs"]:
        return False
    stops: list[int] | None = getattr(state, "_note_label_stops", None)
    if stops is None:
        stops = [found.start() for found in _NOTE_LABEL_STOP.finditer(state.src)]
        state._note_label_stops = stops  # type: ignore[attr-defined]
    at = bisect_left(stops, start + 2)
    pos = stops[at] if at < len(stops) else maximum
    if pos >= maximum or state.src[pos] != "]" or pos == start + 2:
        return False
    label = state.src[start + 2 : pos]
    if ":" + label not in notes["refs"]:
        return False
    if not silent:
        note_id = notes["refs"].get(":" + label, -1)
        if note_id < 0:
            note_id = len(notes["list"])
            notes["list"][note_id] = {"label": label, "count": 0}
            notes["refs"][":" + label] = note_id
        sub_id = notes["list"][note_id]["count"]
        notes["list"][note_id]["count"] += 1
        token = state.push("footnote_ref", "", 0)
        token.meta = {"id": note_id, "subId": sub_id, "label": label}
    state.pos = pos + 1
    state.posMax = maximum
    return True


# The characters each known inline rule may match at (the rest of the rules: any).
_MARKERS: dict[Any, str] = {
    rules_inline.newline: "\n",
    rules_inline.escape: "\\",
    escaped_space: "\\",
    rules_inline.backtick: "`",
    rules_inline.strikethrough.tokenize: "~",
    rules_inline.emphasis.tokenize: "*_",
    rules_inline.link: "[",
    bracketed_span: "[",
    superscript: "^",
    subscript: "~",
    formula: "$",
    rules_inline.image: "!",
    rules_inline.autolink: "<",
    rules_inline.html_inline: "<",
    comment_inline: "<",
    html_subset: "<",
    rules_inline.entity: "&",
    _inline_note: "^",
    _note_reference: "[",
    rules_inline.text: "",  # (any character that does not end text: `_InlineRules`)
}
