"""html: one standalone page with a table of contents, and no external fetches."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from markdown_it import MarkdownIt

from bindery.engine import Sink, Source

_CSS = """
body{font:1.05rem/1.6 Georgia,'DejaVu Serif',serif;max-width:42rem;margin:2rem auto;padding:0 1rem;color:#222}
h1,h2,h3{font-family:'DejaVu Sans',Helvetica,sans-serif;line-height:1.25}
nav.toc ol{padding-left:1.2rem}
pre{overflow-x:auto;background:#f6f6f6;padding:.6rem}
table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2rem .5rem}
blockquote{margin-left:0;padding-left:1rem;border-left:3px solid #ccc;color:#555}
@media print{body{max-width:none;margin:0}section.chapter{break-before:page}nav.toc{break-after:page}
a{color:inherit;text-decoration:none}}
"""


class HtmlRenderer:
    extension = "html"
    content_type = "text/html; charset=utf-8"

    def __init__(self) -> None:
        # Raw HTML in a manuscript is shown as text, never passed through: the page is the author's words.
        self._md = MarkdownIt("commonmark", {"html": False}).enable("table")

    def render(self, source: Source, chapters: Iterable[tuple[int, str, str]], out: Sink) -> None:
        title = escape(source.title)
        toc = "".join(
            f'<li><a href="#ch-{n}">{escape(t)}</a></li>'
            for n, t in enumerate(source.chapter_titles, start=1)
        )
        out.write(
            (
                '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{title}</title><style>{_CSS}</style></head><body>\n"
                f'<header><h1 class="book-title">{title}</h1></header>\n'
                f'<nav class="toc"><h2>Contents</h2><ol>{toc}</ol></nav>\n'
            ).encode()
        )
        for ordinal, _title, text in chapters:
            body = self._md.render(text)
            out.write(f'<section class="chapter" id="ch-{ordinal}">\n{body}</section>\n'.encode())
        out.write(b"</body></html>\n")


RENDERER = HtmlRenderer()
