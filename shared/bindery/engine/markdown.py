"""markdown: the manuscript of the built revision, normalised (see `bindery.normalising.Normalised`).

Every revision is kept normalised, and its chapters are byte ranges that tile it, so a book without images
has nothing to render: a build copies the revision's manuscript object server-side (`COPIES_MANUSCRIPT`),
and its bytes never pass through the function. `render` writes the same bytes from the chapters, for
builds that are handed chapter texts instead (tests, and any other sink).

A book with images is a zip: `manuscript.md`, and each asset under its own name beside it, so every
`![...](images/coast.png)` in the manuscript still finds its picture. Its images are checked as every
other format checks them: a missing one, or one without alt text, is in the build's notes.
"""

from __future__ import annotations

import tempfile
import zipfile
from collections.abc import Iterable
from typing import Any

from bindery.engine import Report, Sink, Source, Text
from bindery.engine.figures import Figures

COPY_CHUNK = 1024 * 1024


class MarkdownRenderer:
    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> Report:
        if not source.assets:
            for text in chapters:
                out.write(text.markdown.encode("utf-8"))
            return Report()
        from bindery.engine import markup

        md = markup.parser()
        figures = Figures({a.name: a for a in source.assets}, lambda asset, alt: "")
        with tempfile.TemporaryFile() as spool:
            with zipfile.ZipFile(spool, "w") as bundle:
                text_entry = zipfile.ZipInfo("manuscript.md")
                text_entry.compress_type = zipfile.ZIP_DEFLATED  # images are compressed already; text is not
                with bundle.open(text_entry, "w") as manuscript:
                    for text in chapters:
                        figures.chapter = (text.ordinal, text.title)
                        _check_images(md, text.markdown, figures)
                        manuscript.write(text.markdown.encode("utf-8"))
                for asset in source.assets:
                    with bundle.open(asset.name, "w") as entry:
                        for piece in source.read_asset(asset):
                            entry.write(piece)
            spool.seek(0)
            while chunk := spool.read(COPY_CHUNK):
                out.write(chunk)
        return Report(notes=figures.notes, package="zip")


def _check_images(md: Any, text: str, figures: Figures) -> None:
    """Run each image of the chapter past `figures`, which notes the missing ones and those with no alt."""
    for token in md.parse(text):
        for child in token.children or ():
            if child.type == "image":
                alt = "".join(c.content for c in child.children or ())
                figures.image(child.attrGet("src") or "", alt, alt)


RENDERER = MarkdownRenderer()
