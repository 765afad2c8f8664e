"""markdown: the manuscript of the built revision, normalised: LF line endings, no trailing blanks, one
blank line between chapters, one final newline."""

from __future__ import annotations

from collections.abc import Iterable

from bindery.engine import Sink, Skipped, Source, Text


class MarkdownRenderer:
    extension = "md"
    content_type = "text/markdown; charset=utf-8"

    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> list[Skipped]:
        first = True
        for text in chapters:
            body = "\n".join(
                line.rstrip() for line in text.markdown.replace("\r\n", "\n").strip("\n").split("\n")
            )
            out.write(("" if first else "\n").encode() + body.encode("utf-8") + b"\n")
            first = False
        return []


RENDERER = MarkdownRenderer()
