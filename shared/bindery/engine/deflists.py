"""Definition lists, as pandoc writes them: a term on one line, then (after at most one blank line) each of
its definitions opened by `:` or `~` and a space, their later lines indented.

    Term
    :   its definition

        its second paragraph

The rule is mdit-py-plugins' (markdown-it-deflist's), with two changes of what it reads, so that the cut
(`bindery.manuscript`), which cuts a chapter at any `# Title` in column 0 and starts afresh at a line in
column 0 after a blank one, reads the same chapters, headings and targets as the parse: an ATX heading line
is never a term, and a line that opens another block (a list item, a quote) is never a later term. (The
plugin, and pandoc, took `# Title` or `- ## A` after a definition for the list's next term when a `:` line
followed it; pandoc's headings need a blank line before them, and Bindery's, like CommonMark's, do not.)
Each line is read once: a term looks at most two lines ahead.
"""

from __future__ import annotations

from markdown_it import MarkdownIt, rules_block
from markdown_it.rules_block import StateBlock


def install(md: MarkdownIt) -> None:
    md.block.ruler.before("paragraph", "deflist", deflist, {"alt": ["paragraph", "reference", "blockquote"]})


def _is_heading(state: StateBlock, line: int) -> bool:
    """Whether `line` opens an ATX heading (`#` to `######`, then a space, a tab or the line's end)."""
    pos, end = state.bMarks[line] + state.tShift[line], state.eMarks[line]
    hashes = 0
    while pos + hashes < end and state.src[pos + hashes] == "#":
        hashes += 1
    return 1 <= hashes <= 6 and (pos + hashes == end or state.src[pos + hashes] in " \t")


def _marker_end(state: StateBlock, line: int) -> int:
    """Where a definition's marker (`:` or `~`, then at least one space, then text) ends at `line`, or -1."""
    start, end = state.bMarks[line] + state.tShift[line], state.eMarks[line]
    if start >= end or state.src[start] not in ":~":
        return -1
    pos = state.skipSpaces(start + 1)
    return start + 1 if start + 1 < pos < end else -1


def _term_at(state: StateBlock, line: int, end: int) -> tuple[int, int] | None:
    """The first definition's line and where its marker ends, if `line` is a term (not a heading, not blank,
    and a definition on the next line or the one after a blank)."""
    if state.isEmpty(line) or state.sCount[line] < state.blkIndent or _is_heading(state, line):
        return None
    dd = line + 1
    if dd < end and state.isEmpty(dd):
        dd += 1
    if dd >= end or state.sCount[dd] < state.blkIndent:
        return None
    content = _marker_end(state, dd)
    return (dd, content) if content >= 0 else None


def _opens_block(state: StateBlock, line: int, end: int) -> bool:
    """Whether a rule asked before this one (a list, a quote, a note, a fence...) opens a block at `line`:
    such a line is no later term of a list, but that block, as it is where a list starts. (The cut starts
    afresh at a line in column 0 after a blank one, and reads `- ## A` there as a list holding a heading.)"""
    parent, state.parentType = state.parentType, "dl"  # (asked where a block starts, not inside a paragraph)
    written, at = len(state.tokens), state.line
    try:
        for rule in state.md.block.ruler.getRules(""):
            if rule is deflist:
                return False
            if rule is not rules_block.code and rule(state, line, end, True):  # (code: none past a dd)
                return True
        return False
    finally:
        # A rule with no silent reading (markdown-it's setext heading) wrote its block: none of it is kept.
        del state.tokens[written:]
        state.parentType, state.line = parent, at


def deflist(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    if state.is_code_block(start):
        return False
    if silent:  # as a terminator: a definition's marker ends the block before it, inside a definition only
        return state.ddIndent >= 0 and _marker_end(state, start) >= 0
    found = _term_at(state, start, end)
    if found is None:
        return False
    dd_line, content = found
    first = len(state.tokens)
    opened = state.push("dl_open", "dl", 1)
    opened.map = lines = [start, 0]
    tight, term = True, start
    while True:
        state.push("dt_open", "dt", 1).map = [term, term]
        inline = state.push("inline", "", 0)
        inline.map = [term, term]
        inline.content = state.getLines(term, term + 1, state.blkIndent, False).strip()
        inline.children = []
        state.push("dt_close", "dt", -1)
        if dd_line > term + 1:
            tight = False  # a blank line between a term and its definition makes it paragraphs, as in pandoc
        while True:  # each definition of this term
            line, _ = _definition(state, dd_line, content, end)  # (its paragraphs or blank lines, too,
            # leave a list tight, as in pandoc: a blank line between term and definition alone loosens it)
            if line >= end or state.sCount[line] < state.blkIndent:
                break
            content = _marker_end(state, line)
            if content < 0:
                break
            dd_line = line
        if line >= end or state.sCount[line] < state.blkIndent:
            break
        found = None if _opens_block(state, line, end) else _term_at(state, line, end)
        if found is None:
            break
        term, (dd_line, content) = line, found
    state.push("dl_close", "dl", -1)
    lines[1] = state.line = line
    if tight:
        _tighten(state, first)
    return True


# What a definition's parse changes of the state, and puts back after it (with its line's indent).
_KEPT = ("tight", "ddIndent", "blkIndent", "parentType")


def _definition(state: StateBlock, line: int, content: int, end: int) -> tuple[int, bool]:
    """A `dd` of the definition at `line`, whose marker ends at `content`, parsed as a container of blocks
    indented past the marker (the plugin's reading): the line after it, and whether it was loose."""
    opened = state.push("dd_open", "dd", 1)
    opened.map = lines = [line, 0]
    pos, limit = content, state.eMarks[line]
    offset = state.sCount[line] + content - (state.bMarks[line] + state.tShift[line])
    while pos < limit and state.src[pos] in " \t":
        offset += 4 - offset % 4 if state.src[pos] == "\t" else 1
        pos += 1
    kept = [getattr(state, name) for name in _KEPT], state.tShift[line], state.sCount[line]
    state.blkIndent = state.ddIndent = state.sCount[line] + 2
    state.tShift[line] = pos - state.bMarks[line]
    state.sCount[line] = offset
    state.tight = True
    state.parentType = "deflist"
    state.md.block.tokenize(state, line, end)
    loose = not state.tight
    for name, value in zip(_KEPT, kept[0], strict=True):
        setattr(state, name, value)
    state.tShift[line], state.sCount[line] = kept[1], kept[2]
    state.push("dd_close", "dd", -1)
    lines[1] = state.line
    return state.line, loose


def _tighten(state: StateBlock, first: int) -> None:
    """A tight list's paragraphs are hidden, as a tight bullet list's are (their text is the item's)."""
    level = state.level + 2
    tokens, i = state.tokens, first + 2
    while i < len(tokens) - 2:
        if tokens[i].level == level and tokens[i].type == "paragraph_open":
            tokens[i].hidden = tokens[i + 2].hidden = True
            i += 2
        i += 1
