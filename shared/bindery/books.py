"""Cutting a manuscript into chapters: at every level-1 heading, as markdown-it-py parses it."""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt

OPENING_TITLE = "Opening"


@dataclass(frozen=True)
class Section:
    title: str
    text: str


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def cut_chapters(manuscript: str) -> list[Section]:
    """One section per top-level `#` heading (ATX or setext), each holding its heading line.

    Text before the first heading becomes an opening chapter when it is not blank. Headings nested in
    lists or block quotes do not cut: they belong to the chapter around them.
    """
    lines = manuscript.splitlines(keepends=True)
    tokens = _parser().parse(manuscript)
    starts: list[tuple[int, str]] = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h1" and token.level == 0 and token.map:
            inline = tokens[i + 1]
            title = "".join(
                child.content for child in inline.children or [] if child.type in ("text", "code_inline")
            ).strip()
            starts.append((token.map[0], title or "Untitled"))
    sections: list[Section] = []
    first = starts[0][0] if starts else len(lines)
    opening = "".join(lines[:first])
    if opening.strip():
        sections.append(Section(OPENING_TITLE, opening))
    for n, (start, title) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        sections.append(Section(title, "".join(lines[start:end])))
    return sections
