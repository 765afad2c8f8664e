"""markdown: the manuscript of the built revision, normalised (see `bindery.manuscript.Normalised`).

Every revision is kept normalised, and its chapters are byte ranges that tile it, so this format has
nothing to render: a build copies the revision's manuscript object server-side (`COPIES_MANUSCRIPT`),
and its bytes never pass through the function. `render` writes the same bytes from the chapters, for
builds that are handed chapter texts instead (tests, and any other sink).
"""

from __future__ import annotations

from collections.abc import Iterable

from bindery.engine import Sink, Skipped, Source, Text


class MarkdownRenderer:
    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> list[Skipped]:
        for text in chapters:
            out.write(text.markdown.encode("utf-8"))
        return []


RENDERER = MarkdownRenderer()
