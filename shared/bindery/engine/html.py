"""html: one standalone page with a table of contents and CSS for screen and print; no external fetches.

Images are embedded as data: URIs, so the file stays standalone. A page with images cannot be written in
order (its table of contents, at the top, lists headings the chapters have not yet shown), so the
chapters are spooled first (in memory up to `SPOOL_IN_MEMORY`, then on the function's ephemeral storage),
each image written as a placeholder; then the head, the cover and the contents are written, and the spool
is copied after them, each placeholder replaced by its image's bytes, streamed from S3 in base64. Memory
holds at most the spool's in-memory part, one chapter and one piece of one image, however large the book.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator
from html import escape

from bindery.engine import (
    SPOOL_IN_MEMORY,
    Report,
    Sink,
    Source,
    Text,
    chapter_pieces,
    highlighting,
    markup,
    typography,
)
from bindery.engine.figures import Figures
from bindery.images import Asset
from bindery.spools import RollingSpool

COPY_CHUNK = 1024 * 1024
# Bump on any change to what a chapter's piece holds or how it is rendered: built pieces are keyed by it.
PIECE_VERSION = "html-3"
MARK = b"\x00"  # markdown-it turns a NUL in the manuscript into U+FFFD, so this is only ever our own

CSS = """
body{font:1.05rem/1.6 Georgia,'DejaVu Serif',serif;max-width:42rem;margin:2rem auto;padding:0 1rem;color:#222}
h1,h2,h3{font-family:'DejaVu Sans',Helvetica,sans-serif;line-height:1.25}
header .authors{font-size:1.15rem;margin-top:-.5rem}
header img.cover{display:block;max-width:min(100%,22rem);height:auto;margin:0 auto 1.5rem}
img{max-width:100%;height:auto}
nav.toc ol{padding-inline-start:1.2rem}
pre{overflow-x:auto;padding:.6rem}
code{font-family:'DejaVu Sans Mono',monospace;font-size:.92em}
table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2rem .5rem}
blockquote{margin-inline-start:0;padding-inline-start:1rem;border-inline-start:3px solid #ccc;color:#555}
.footnotes{font-size:.9em}.missing-image{color:#a33}.smallcaps{font-variant:small-caps}ul.task-list{list-style:none}
.note,.tip,.warning,.caution,.important{margin:1em 0;padding:.3em 1em;border-left:.25em solid #4a6f96}
.note,.tip,.warning,.caution,.important{background:#f2f5f8}.tip{border-color:#2f7a4f}
.warning,.caution{border-color:#a5521b}.important{border-color:#6b46a8}
@media print{body{max-width:none;margin:0;font-size:11pt}section.chapter{break-before:page}
nav.toc{break-after:page}a{color:inherit;text-decoration:none}pre{white-space:pre-wrap}}
""" + highlighting.css()


def _placeholder(asset: Asset, alt: str) -> str:
    return (
        f'<img src="{MARK.decode()}{asset.object_id}{MARK.decode()}" alt="{alt}" '
        f'width="{asset.width}" height="{asset.height}">'
    )


class HtmlRenderer:
    def __init__(self) -> None:
        self._md = markup.parser()

    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> Report:
        figures = Figures({a.name: a for a in source.assets}, _placeholder)
        typography.configure(self._md, source.quotes)
        report = Report(notes=figures.notes)
        contents: list[tuple[int, str, list[markup.Heading]]] = []
        spool = RollingSpool(SPOOL_IN_MEMORY)
        try:
            for text in chapters:
                made = chapter_pieces.render_chapter(
                    self._md,
                    text,
                    report,
                    figures,
                    source.pieces,
                    version=PIECE_VERSION,
                    made=_section(text),
                    anchors=source.anchors,
                    by_chapter=source.option("figure_numbers") == "chapter",
                )
                if made.listed:  # (an `.unlisted` chapter is left out of the contents, its headings too)
                    contents.append((text.ordinal, text.title, made.headings))
                spool.write(made.data)
            self._head(source, contents, out)
            used = {a.object_id: a for a in figures.used.values()}
            _copy_with_images(spool.chunks(COPY_CHUNK), out, used, source)
        finally:
            spool.close()
        out.write(b"</body></html>\n")
        return report

    def _head(self, source: Source, contents: list[tuple[int, str, list[markup.Heading]]], out: Sink) -> None:
        meta = source.metadata
        title = escape(source.title)
        described = "".join(
            f'<meta name="{name}" content="{escape(value)}">'
            for name, value in (
                ("author", ", ".join(meta.authors)),
                ("description", meta.description or ""),
                ("keywords", ", ".join(meta.subjects)),
            )
            if value
        )
        out.write(
            (
                f'<!DOCTYPE html>\n<html lang="{source.language}" dir="{source.metadata.direction}"><head>'
                '<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{title}</title>{described}<style>{CSS}</style></head><body>\n<header>"
            ).encode()
        )
        cover = (
            source.assets and meta.cover and next((a for a in source.assets if a.name == meta.cover), None)
        )
        if cover:
            out.write(b'<img class="cover" src="')
            _write_data_uri(cover, source, out)
            out.write(f'" alt="The cover of {title}" width="{cover.width}" height="{cover.height}">'.encode())
        out.write(f'<h1 class="book-title">{title}</h1>'.encode())
        if meta.authors:
            out.write(f'<p class="authors">{escape(", ".join(meta.authors))}</p>'.encode())
        out.write(b"</header>\n")
        chapters = [(f"#ch-{n}", title, headings) for n, title, headings in contents]
        toc = markup.contents(chapters, source.option("toc_depth"), lambda href: "")
        out.write(f'<nav class="toc"><h2>Contents</h2>{toc}</nav>\n'.encode())


def _section(text: Text) -> Callable[[str], bytes]:
    """The chapter's section of the page, as written."""
    opening = f'<section class="chapter" id="ch-{text.ordinal}" dir="auto">\n'
    return lambda html: f"{opening}{html}</section>\n".encode()


def _copy_with_images(chunks: Iterator[bytes], out: Sink, used: dict[str, Asset], source: Source) -> None:
    """Copy the spool's chunks to `out`, each MARK<object id>MARK replaced by that image as a data: URI."""
    if not used:  # no placeholder: each chunk as it is (a chapter's, held in memory, is never copied)
        for chunk in chunks:
            out.write(chunk)
        return
    pending = b""
    for chunk in chunks:
        parts = (pending + chunk).split(MARK)
        # Text and ids alternate; an even count means the chunk ended inside an id, kept for the next one.
        pending = MARK + parts.pop() if len(parts) % 2 == 0 else b""
        for n, part in enumerate(parts):
            if n % 2 == 0:
                out.write(part)
            else:
                _write_data_uri(used[part.decode()], source, out)
    out.write(pending)


def _write_data_uri(asset: Asset, source: Source, out: Sink) -> None:
    out.write(f"data:{asset.content_type};base64,".encode())
    rest = b""  # base64 takes 3 bytes at a time: what is left over waits for the next piece
    for piece in source.read_asset(asset):
        rest += piece
        whole = len(rest) - len(rest) % 3
        if whole:
            out.write(base64.b64encode(rest[:whole]))
            rest = rest[whole:]
    out.write(base64.b64encode(rest))


RENDERER = HtmlRenderer()
