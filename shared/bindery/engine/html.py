"""html: one standalone page with a table of contents and CSS for screen and print; no external fetches."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from bindery.engine import Sink, Skipped, Source, Text, markup

CSS = """
body{font:1.05rem/1.6 Georgia,'DejaVu Serif',serif;max-width:42rem;margin:2rem auto;padding:0 1rem;color:#222}
h1,h2,h3{font-family:'DejaVu Sans',Helvetica,sans-serif;line-height:1.25}
nav.toc ol{padding-left:1.2rem}
pre{overflow-x:auto;background:#f6f6f6;padding:.6rem}
code{font-family:'DejaVu Sans Mono',monospace;font-size:.92em}
table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2rem .5rem}
blockquote{margin-left:0;padding-left:1rem;border-left:3px solid #ccc;color:#555}
.footnotes{font-size:.9em}
@media print{body{max-width:none;margin:0;font-size:11pt}section.chapter{break-before:page}
nav.toc{break-after:page}a{color:inherit;text-decoration:none}pre{white-space:pre-wrap}}
"""


class HtmlRenderer:
    def __init__(self) -> None:
        self._md = markup.parser()

    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> list[Skipped]:
        title = escape(source.title)
        toc = "".join(
            f'<li><a href="#ch-{n}">{escape(t)}</a></li>'
            for n, t in enumerate(source.chapter_titles, start=1)
        )
        out.write(
            (
                f'<!DOCTYPE html>\n<html lang="{source.language}"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{title}</title><style>{CSS}</style></head><body>\n"
                f'<header><h1 class="book-title">{title}</h1></header>\n'
                f'<nav class="toc"><h2>Contents</h2><ol>{toc}</ol></nav>\n'
            ).encode()
        )
        missed: list[Skipped] = []
        for text in chapters:
            body = markup.render_chapter(self._md, text, missed)
            out.write(
                f'<section class="chapter" id="ch-{text.ordinal}" dir="auto">\n{body}</section>\n'.encode()
            )
        out.write(b"</body></html>\n")
        return missed


RENDERER = HtmlRenderer()
