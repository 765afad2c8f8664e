"""epub: EPUB 3 with a navigation document, a table of contents, metadata and a cover page from the title.

The container is written with zipfile into a temporary file on the function's ephemeral storage, then
streamed up: zipfile can then write a plain central directory (no data descriptors, a stored `mimetype`
first, as OCF requires), and memory holds one chapter, however long the book.
"""

from __future__ import annotations

import tempfile
import uuid
import zipfile
from collections.abc import Iterable
from datetime import UTC, datetime
from html import escape

from bindery.engine import Sink, Skipped, Source, Text, markup

COPY_CHUNK = 8 * 1024 * 1024

CONTAINER = """<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>
"""

CSS = """body{font-family:serif;line-height:1.5;margin:0 5%}
h1,h2,h3{font-family:sans-serif;line-height:1.25}
pre{white-space:pre-wrap;font-size:.9em}
table{border-collapse:collapse}td,th{border:1px solid #999;padding:.2em .4em}
blockquote{margin-left:1em;padding-left:1em;border-left:2px solid #bbb}
.cover{text-align:center;margin-top:20%}.cover img{max-width:100%;height:auto}
.footnotes{font-size:.9em}
"""


def _page(title: str, body: str, language: str, extra_ns: str = "") -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        f'<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"{extra_ns} '
        f'xml:lang="{language}" lang="{language}">\n'
        f'<head><meta charset="utf-8"/><title>{escape(title)}</title>'
        '<link rel="stylesheet" type="text/css" href="style.css"/></head>\n'
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def _cover_svg(title: str) -> str:
    # The title, wrapped by words onto lines short enough for the page, on a plain cover.
    lines: list[str] = []
    for word in title.split():
        if lines and len(lines[-1]) + 1 + len(word) <= 18:
            lines[-1] += " " + word
        else:
            lines.append(word)
    lines = lines[:8] or ["Untitled"]
    top = 400 - 36 * len(lines)
    text = "".join(
        f'<text x="300" y="{top + 72 * i}" font-size="56" text-anchor="middle" font-family="serif" '
        f'fill="#f4efe6">{escape(line)}</text>'
        for i, line in enumerate(lines)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="600" height="900" '
        'viewBox="0 0 600 900">'
        '<rect width="600" height="900" fill="#2d3e50"/>'
        '<rect x="30" y="30" width="540" height="840" fill="none" stroke="#c9a45c" stroke-width="4"/>'
        f"{text}</svg>\n"
    )


class EpubRenderer:
    def __init__(self) -> None:
        self._md = markup.parser(xhtml=True)

    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> list[Skipped]:
        missed: list[Skipped] = []
        with tempfile.TemporaryFile() as spool:
            with zipfile.ZipFile(spool, "w") as book:
                book.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", zipfile.ZIP_STORED)
                deflate = zipfile.ZIP_DEFLATED
                book.writestr("META-INF/container.xml", CONTAINER, deflate)
                book.writestr("OEBPS/content.opf", self._package(source), deflate)
                book.writestr("OEBPS/nav.xhtml", self._nav(source), deflate)
                book.writestr("OEBPS/style.css", CSS, deflate)
                book.writestr("OEBPS/cover.svg", _cover_svg(source.title), deflate)
                alt = escape(source.title)
                cover = (
                    f'<section class="cover" epub:type="cover"><img src="cover.svg" alt="{alt}"/></section>'
                )
                book.writestr("OEBPS/cover.xhtml", _page(source.title, cover, source.language), deflate)
                for text in chapters:
                    body = markup.render_chapter(self._md, text, missed)
                    page = _page(
                        text.title,
                        f'<section id="ch-{text.ordinal}" epub:type="chapter" dir="auto">\n{body}</section>',
                        source.language,
                    )
                    book.writestr(f"OEBPS/chapter-{text.ordinal:06d}.xhtml", page, deflate)
            spool.seek(0)
            while chunk := spool.read(COPY_CHUNK):
                out.write(chunk)
        return missed

    @staticmethod
    def _package(source: Source) -> str:
        identifier = uuid.uuid5(uuid.NAMESPACE_URL, f"bindery:book:{source.book_id}")
        modified = datetime.fromtimestamp(source.modified, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        count = len(source.chapter_titles)
        manifest = "".join(
            f'<item id="ch{n}" href="chapter-{n:06d}.xhtml" media-type="application/xhtml+xml"/>\n'
            for n in range(1, count + 1)
        )
        spine = "".join(f'<itemref idref="ch{n}"/>\n' for n in range(1, count + 1))
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="book-id"
 xml:lang="{source.language}">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
<dc:identifier id="book-id">urn:uuid:{identifier}</dc:identifier>
<dc:title>{escape(source.title)}</dc:title>
<dc:language>{source.language}</dc:language>
<meta property="dcterms:modified">{modified}</meta>
<meta name="cover" content="cover-image"/>
</metadata>
<manifest>
<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
<item id="cover-image" href="cover.svg" media-type="image/svg+xml" properties="cover-image"/>
<item id="cover" href="cover.xhtml" media-type="application/xhtml+xml"/>
<item id="css" href="style.css" media-type="text/css"/>
{manifest}</manifest>
<spine>
<itemref idref="cover"/>
<itemref idref="nav"/>
{spine}</spine>
</package>
"""

    @staticmethod
    def _nav(source: Source) -> str:
        entries = "".join(
            f'<li><a href="chapter-{n:06d}.xhtml">{escape(t)}</a></li>\n'
            for n, t in enumerate(source.chapter_titles, start=1)
        )
        body = (
            f'<nav epub:type="toc" id="toc"><h1>Contents</h1>\n<ol>\n{entries}</ol></nav>\n'
            '<nav epub:type="landmarks" hidden="hidden"><ol>\n'
            '<li><a epub:type="cover" href="cover.xhtml">Cover</a></li>\n'
            '<li><a epub:type="toc" href="nav.xhtml">Contents</a></li>\n'
            + (
                '<li><a epub:type="bodymatter" href="chapter-000001.xhtml">Start</a></li>\n'
                if source.chapter_titles
                else ""
            )
            + "</ol></nav>"
        )
        return _page("Contents", body, source.language)


RENDERER = EpubRenderer()
