"""markdown: the book as one .md file, chapters in order, each ending in exactly one blank line."""

from __future__ import annotations

from collections.abc import Iterable

from bindery.engine import Sink, Source


class MarkdownRenderer:
    extension = "md"
    content_type = "text/markdown; charset=utf-8"

    def render(self, source: Source, chapters: Iterable[tuple[int, str, str]], out: Sink) -> None:
        for _ordinal, _title, text in chapters:
            out.write(text.rstrip().encode("utf-8") + b"\n\n")


RENDERER = MarkdownRenderer()
