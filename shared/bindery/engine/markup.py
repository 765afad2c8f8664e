"""The one Markdown dialect every format renders: CommonMark, plus tables, strikethrough and footnotes.

Raw HTML in a manuscript is shown as text, never passed through: an export holds the author's words, and
an EPUB must stay well-formed XHTML whatever the manuscript says.

Two things are the renderer's, through the env of each chapter's render:
- images, resolved by the build's `Figures` (`bindery.engine.figures`): an asset of the book, shown as the
  format shows it, or a missing one, named in the build's notes;
- headings below the chapter's own (## and ###), each given an id, `<doc_id>-h<n>`, and listed in
  `env["headings"]`, so a table of contents can reach them.

It is read in work linear in the manuscript, at most a few times what as much prose costs, whatever the
manuscript's shape: where markdown-it walked the same text again for each bracket, destination or note's
reference, or asked every rule at every character and line, `parser` puts rules that read the same tokens
once (each says which walk it replaces). tests/unit/test_markup.py holds them to markdown-it's tokens;
tests/unit/test_render_work.py holds html, epub and docx to linear work on every family of hostile input.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from types import MethodType, SimpleNamespace
from typing import Any

from markdown_it import MarkdownIt, helpers, rules_block, rules_inline
from markdown_it.common.utils import unescapeAll
from markdown_it.helpers.parse_link_destination import _Result
from markdown_it.parser_block import ParserBlock
from markdown_it.parser_inline import ParserInline, RuleFuncInlineType
from markdown_it.ruler import Ruler
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.footnote.index import _data_from_env, footnote_def

from bindery.engine.figures import Figures

# Bump on any change to what this module renders: built pieces of chapters are keyed by it.
VERSION = 1
UNRENDERED = "<p><em>This chapter could not be rendered.</em></p>\n"


@dataclass(frozen=True)
class Heading:
    level: int  # 2 or 3
    title: str
    anchor: str


@dataclass
class Rendered:
    html: str
    headings: list[Heading] = field(default_factory=list)


def parser(*, xhtml: bool = False) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "xhtmlOut": xhtml, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.use(footnote_plugin)
    md.block.tokenize = MethodType(_tokenize_bounded, md.block)  # type: ignore[method-assign]
    md.block.ruler.getRules = MethodType(_block_chain, md.block.ruler)  # type: ignore[method-assign]
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
    md.add_render_rule("image", _image)
    md.add_render_rule("heading_open", _heading_open)
    return md


# The block rules that open a container (their content is parsed by a nested tokenize, one level deeper).
CONTAINERS = frozenset({"blockquote", "list", "footnote_def"})


def _tokenize_bounded(self: ParserBlock, state: StateBlock, start: int, end: int) -> None:
    """markdown-it's block tokenize, with two changes. At `maxNesting` (20) it does not drop the rest of
    the document, as markdown-it does ("we should not care about content"), but stops opening containers,
    so a list or quote nested deeper reads as the text it is. A 100,000-deep list is then twenty levels
    and a paragraph of dashes, and what follows it in the chapter is still there. And each line is offered
    only to the rules that may match it (`_BlockRules`)."""
    everything, leaves = _block_rules(self.ruler)
    max_nesting = state.md.options.maxNesting
    line, had_empty = start, False
    while line < end:
        state.line = line = state.skipEmptyLines(line)
        if line >= end or state.sCount[line] < state.blkIndent:
            break  # the end of the range, or of the container this call is parsing
        rules = everything if state.level < max_nesting else leaves
        if not rules.match(state, line, end, False):
            raise RuntimeError("none of the block rules matched")
        if state.line <= line:
            raise RuntimeError("block rule didn't increment state.line")
        state.tight = not had_empty
        line = state.line
        if (line - 1) < end and state.isEmpty(line - 1):
            had_empty = True  # a paragraph may take the blank line after it, in a nested list
        if line < end and state.isEmpty(line):
            had_empty = True
            line += 1
            state.line = line


class _BlockRules:
    """Block rules in the ruler's order, each line offered only to those that may match it: every rule of
    markdown-it's and the notes' but a table, a setext heading and a paragraph looks first at the line's
    first character (after its indentation) and declines any but its own, unless the line is blank or
    indented as code, when all are asked. A rule not known here is asked at every line. A paragraph of
    short lines asked all eight rules that may end a paragraph at each of its lines, and again for a
    setext heading, and again for a definition."""

    def __init__(self, rules: list[Any]) -> None:
        self.rules = rules
        # Each marker's rules; a line that starts with any other character is offered those with none.
        marked = "".join(_BLOCK_MARKERS.get(rule, "") for rule in rules)
        self._at = {char: tuple(r for r in rules if char in _BLOCK_MARKERS.get(r, char)) for char in marked}
        self._unmarked = tuple(rule for rule in rules if rule not in _BLOCK_MARKERS)

    def at(self, state: StateBlock, line: int) -> Sequence[Any]:
        pos = state.bMarks[line] + state.tShift[line]
        if pos >= state.eMarks[line] or state.is_code_block(line):
            return self.rules
        return self._at.get(state.src[pos], self._unmarked)

    def match(self, state: StateBlock, line: int, end: int, silent: bool) -> bool:
        """Whether one of the rules matches at `line`, as markdown-it asks each in turn (the first that
        matches ends the asking): the one rule a chain of terminators becomes."""
        return any(rule(state, line, end, silent) for rule in self.at(state, line))


def _block_rules(ruler: Ruler[Any]) -> tuple[_BlockRules, _BlockRules]:
    """The block rules (and those that open no container), made again when the ruler's rules change."""
    rules = ruler.getRules("")
    made: tuple[Any, _BlockRules, _BlockRules] | None = getattr(ruler, "_block_rules", None)
    if made is None or made[0] is not rules:
        leaves = [rule.fn for rule in ruler.__rules__ if rule.enabled and rule.name not in CONTAINERS]
        made = (rules, _BlockRules(rules), _BlockRules(leaves))
        ruler._block_rules = made  # type: ignore[attr-defined]
    return made[1], made[2]


def _block_chain(self: Ruler[Any], chain: str = "") -> list[Any]:
    """The block ruler's getRules: a chain of rules that may end a block (a paragraph's, a quote's, a
    list's, a definition's) is given as one rule, `_BlockRules.match`, which asks only those that may
    match the line. The main chain is as markdown-it keeps it (`_tokenize_bounded` asks it by line)."""
    rules = Ruler.getRules(self, chain)
    if not chain:
        return rules
    chains: dict[str, tuple[Any, list[Any]]] | None = getattr(self, "_block_chains", None)
    if chains is None:
        chains = self._block_chains = {}  # type: ignore[attr-defined]
    made = chains.get(chain)
    if made is None or made[0] is not rules:
        made = chains[chain] = (rules, [_BlockRules(rules).match])
    return made[1]


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


# The first characters of a line each known block rule may match at (the rest of the rules: any). The code
# rule matches only a line indented as code, where every rule is asked.
_BLOCK_MARKERS: dict[Any, str] = {
    rules_block.code: "",
    rules_block.fence: "~`",
    rules_block.blockquote: ">",
    rules_block.hr: "*-_",
    rules_block.list_block: "*-+0123456789",
    rules_block.reference: "[",
    rules_block.html_block: "<",
    rules_block.heading: "#",
    footnote_def: "[",
}

# The characters each known inline rule may match at (the rest of the rules: any).
_MARKERS: dict[Any, str] = {
    rules_inline.newline: "\n",
    rules_inline.escape: "\\",
    rules_inline.backtick: "`",
    rules_inline.strikethrough.tokenize: "~",
    rules_inline.emphasis.tokenize: "*_",
    rules_inline.link: "[",
    rules_inline.image: "!",
    rules_inline.autolink: "<",
    rules_inline.html_inline: "<",
    rules_inline.entity: "&",
    _inline_note: "^",
    _note_reference: "[",
    rules_inline.text: "",  # (any character that does not end text: `_InlineRules`)
}


def _image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    src = token.attrGet("src") or ""
    figures: Figures | None = env.get("figures")
    if figures is None:
        # No build's figures (a renderer test, say): a link to the image, labelled with its alt text.
        return f'<a class="image" href="{escape(src)}">[{escape(alt) or "image"}]</a>'
    return figures.image(src, alt, escape(alt))


def _heading_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    level = int(token.tag[1])
    if level in (2, 3):
        headings: list[Heading] = env.setdefault("headings", [])
        anchor = f"{env.get('docId', 'doc')}-h{len(headings) + 1}"
        title = self.renderInlineAsText(tokens[idx + 1].children or [], options, env)
        headings.append(Heading(level, title, anchor))
        token.attrSet("id", anchor)
    return str(self.renderToken(tokens, idx, options, env))


def render(md: MarkdownIt, text: str, doc_id: str, figures: Figures | None = None) -> Rendered:
    """HTML for one chapter. `doc_id` prefixes footnote and heading ids, so chapters in one page never
    collide."""
    env: dict[str, Any] = {"docId": doc_id, "figures": figures}
    html = md.render(text, env)
    return Rendered(html, env.get("headings", []))


def render_chapter(md: MarkdownIt, text: Any, missed: list[Any], figures: Figures | None = None) -> Rendered:
    """A chapter's HTML; or, when it cannot be rendered, a note in its place and its name in `missed`.
    One bad chapter must not sink the book."""
    from bindery.engine import skipped

    if figures is not None:
        figures.chapter = (text.ordinal, text.title)
    markdown = text.markdown  # read here, outside the skip: a failed read of the text fails the build
    try:
        return render(md, markdown, f"ch{text.ordinal}", figures)
    except Exception as exc:
        missed.append(skipped(text, exc))
        return Rendered(UNRENDERED)


def with_note_roles(md: MarkdownIt) -> MarkdownIt:
    """Footnotes with the EPUB structural semantics and the DPUB-ARIA roles that match them, as EPUB
    Accessibility asks: the references are noterefs, the list is the chapter's endnotes."""
    marked = {
        "footnote_ref": ("<a href=", '<a epub:type="noteref" role="doc-noteref" href='),
        "footnote_block_open": (
            '<section class="footnotes">',
            '<section class="footnotes" epub:type="endnotes" role="doc-endnotes">',
        ),
        "footnote_anchor": ("<a href=", '<a role="doc-backlink" href='),
    }
    for name, (plain, semantic) in marked.items():
        md.add_render_rule(name, _marked(md.renderer.rules[name], plain, semantic))  # type: ignore[attr-defined]
    return md


def _marked(rule: Any, plain: str, semantic: str) -> Any:
    def marked(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        return str(rule(tokens, idx, options, env)).replace(plain, semantic, 1)

    return marked


def contents(chapters: list[tuple[str, str, list[Heading]]], depth: int, page: Callable[[str], str]) -> str:
    """A table of contents as nested lists: each chapter (href, title, headings), and to `depth` 2 or 3
    its ## and ### headings, linked as `page(chapter href)#anchor` (a ### before any ## stands at the ##
    level)."""
    items = []
    for href, title, headings in chapters:
        groups: list[tuple[Heading, list[Heading]]] = []
        for heading in (h for h in headings if h.level <= depth):
            if heading.level == 3 and groups:
                groups[-1][1].append(heading)
            else:
                groups.append((heading, []))

        def link(heading: Heading, at: str = page(href)) -> str:
            return f'<a href="{at}#{heading.anchor}">{escape(heading.title)}</a>'

        inner = "".join(
            f"<li>{link(h)}"
            + (f"<ol>{''.join(f'<li>{link(s)}</li>' for s in subs)}</ol>" if subs else "")
            + "</li>"
            for h, subs in groups
        )
        items.append(
            f'<li><a href="{href}">{escape(title)}</a>' + (f"<ol>{inner}</ol>" if inner else "") + "</li>"
        )
    return f"<ol>{''.join(items)}</ol>"
