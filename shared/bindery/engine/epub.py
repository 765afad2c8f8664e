"""epub: EPUB 3 that meets EPUB Accessibility 1.1: the book's metadata, its images in the package, a cover,
a navigation document to `toc_depth`, landmarks, and schema.org accessibility metadata that is true of
the book as built.

The container is written (`engine.zipped`) into a temporary file on the function's ephemeral storage,
then streamed up: a plain zip (no data descriptors, a stored `mimetype` first, as OCF requires), and
memory holds at most one chapter, or one piece of one image, however long the book. A chapter's page is
kept in the cache of built pieces deflated, as the zip holds it, so a warm build copies it in without
compressing it again. The package document is written last, once the chapters have said which images
they show.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from html import escape

from bindery.engine import Report, Sink, Source, Text, chapter_pieces, highlighting, markup, typography
from bindery.engine.anchors import Anchor
from bindery.engine.figures import Figures, image_bytes
from bindery.engine.zipped import Deflated, ZipWriter
from bindery.images import Asset
from bindery.metadata import package_identifier

COPY_CHUNK = 1024 * 1024  # the spool goes up a piece at a time; a larger piece is only more memory
# Bump on any change to what a chapter's piece holds or how it is rendered: built pieces are keyed by it.
PIECE_VERSION = "epub-3"
# The earliest time a zip entry can carry (DOS time starts in 1980).
ZIP_EPOCH = datetime(1980, 1, 1, tzinfo=UTC).timestamp()

CONTAINER = """<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>
"""

CSS = """body{font-family:serif;line-height:1.5;margin:0 5%}
h1,h2,h3{font-family:sans-serif;line-height:1.25}
pre{white-space:pre-wrap;font-size:.9em;padding:.5em}
img{max-width:100%;height:auto}
table{border-collapse:collapse}td,th{border:1px solid #999;padding:.2em .4em}
blockquote{margin-inline-start:1em;padding-inline-start:1em;border-inline-start:2px solid #bbb}
.cover{text-align:center;margin-top:5%}.cover img{max-height:95vh}
.title-page{text-align:center;margin-top:20%}.authors{font-size:1.2em}
.footnotes{font-size:.9em}.smallcaps{font-variant:small-caps}ul.task-list{list-style:none}
.note,.tip,.warning,.caution,.important{margin:1em 0;padding:.3em 1em;border-left:.25em solid #4a6f96}
.note,.tip,.warning,.caution,.important{background:#f2f5f8}.tip{border-color:#2f7a4f}
.warning,.caution{border-color:#a5521b}.important{border-color:#6b46a8}
""" + highlighting.css()


def _page_of(ordinal: int) -> Callable[[Anchor], str]:
    """Where a link in chapter `ordinal` to a heading goes: its id on this page, or on its chapter's."""
    return lambda anchor: (
        f"#{anchor.id}" if anchor.chapter == ordinal else f"{_file(anchor.chapter)}#{anchor.id}"
    )


def _file(ordinal: int) -> str:
    return f"chapter-{ordinal:06d}.xhtml"


def _page(title: str, body: str, source: Source) -> str:
    lang = source.language
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
        f'xml:lang="{lang}" lang="{lang}" dir="{source.metadata.direction}">\n'
        f'<head><meta charset="utf-8"/><title>{escape(title)}</title>'
        '<link rel="stylesheet" type="text/css" href="style.css"/></head>\n'
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def _chapter_page(text: Text, source: Source) -> Callable[[str], bytes]:
    """The chapter's page, deflated as the zip keeps it (with its CRC-32 and size first)."""

    def made(html: str) -> bytes:
        body = (
            f'<section id="ch-{text.ordinal}" epub:type="chapter" role="doc-chapter" dir="auto">'
            f"\n{html}</section>"
        )
        return Deflated.of(_page(text.title, body, source).encode()).kept()

    return made


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


def _packaged(asset: Asset) -> tuple[str, str]:
    """Where an image goes in the package, and its media type there. EPUB 3.2's core media types have no
    WebP (3.3 added it, but readers and epubcheck 4 in the field follow 3.2), so a WebP goes in as the
    PNG of its pixels: the reader sees exactly the image the author uploaded."""
    if asset.content_type == "image/webp":
        return f"images/{asset.object_id}.png", "image/png"
    return f"images/{asset.file_name}", asset.content_type


def _image_tag(asset: Asset, alt: str) -> str:
    return f'<img src="{_packaged(asset)[0]}" alt="{alt}" width="{asset.width}" height="{asset.height}"/>'


XHTML = "application/xhtml+xml"
_MATHML = ' properties="mathml"'  # a page that holds MathML says so
# (ordinal, title, headings, holds MathML, listed: its title not `.unlisted`)
Contents = list[tuple[int, str, list[markup.Heading], bool, bool]]


class EpubRenderer:
    def __init__(self) -> None:
        self._md = markup.with_note_roles(markup.parser(xhtml=True))

    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> Report:
        figures = Figures({a.name: a for a in source.assets}, _image_tag)
        typography.configure(self._md, source.quotes)
        report = Report(notes=figures.notes)
        cover = next((a for a in source.assets if a.name == source.metadata.cover), None)
        contents: Contents = []
        # Every entry carries the revision's time, never the build's: a build of the same revision (a warm
        # one, a retry) writes the same bytes.
        when = datetime.fromtimestamp(max(source.modified, ZIP_EPOCH), UTC).timetuple()[:6]
        # On disk, not in memory: the zip is written forward (only an image's header is set right after it),
        # so a file costs little, and memory stays what one chapter needs (an 8 MiB spool in memory was 1.29x
        # the 2 MB book's peak on the 200 MB one).
        with tempfile.TemporaryFile() as spool:
            book = ZipWriter(spool, when)
            book.stored("mimetype", b"application/epub+zip", dated=False)
            book.deflated("META-INF/container.xml", Deflated.of(CONTAINER.encode()))
            book.deflated("OEBPS/style.css", Deflated.of(CSS.encode()))
            book.deflated("OEBPS/cover.xhtml", Deflated.of(self._cover_page(source, cover).encode()))
            if cover is None:
                book.deflated("OEBPS/cover.svg", Deflated.of(_cover_svg(source.title).encode()))
            book.deflated("OEBPS/title.xhtml", Deflated.of(self._title_page(source).encode()))
            reads = [source.language, source.metadata.direction]
            for text in chapters:
                made = chapter_pieces.render_chapter(
                    self._md, text, report, figures, source.pieces, version=PIECE_VERSION,
                    made=_chapter_page(text, source), reads=reads, compressed=True,
                    anchors=source.anchors, href=_page_of(text.ordinal),
                    by_chapter=source.option("figure_numbers") == "chapter",
                )  # fmt: skip
                contents.append((text.ordinal, text.title, made.headings, made.math, made.listed))
                book.deflated(f"OEBPS/chapter-{text.ordinal:06d}.xhtml", Deflated.from_kept(made.data))
            images = dict(figures.used)
            if cover is not None:
                images.setdefault(cover.name, cover)
            for asset in images.values():
                # Already compressed: stored, not deflated again.
                book.stream_stored(f"OEBPS/{_packaged(asset)[0]}", image_bytes(asset, source.read_asset))
            book.deflated("OEBPS/nav.xhtml", Deflated.of(self._nav(source, contents).encode()))
            package = self._package(source, contents, images, cover, report)
            book.deflated("OEBPS/content.opf", Deflated.of(package.encode()))
            book.close()
            spool.seek(0)
            while chunk := spool.read(COPY_CHUNK):
                out.write(chunk)
        return report

    @staticmethod
    def _cover_page(source: Source, cover: Asset | None) -> str:
        src = _packaged(cover)[0] if cover is not None else "cover.svg"
        img = f'<img role="doc-cover" src="{src}" alt="The cover of {escape(source.title)}"/>'
        return _page(source.title, f'<section class="cover" epub:type="cover">{img}</section>', source)

    @staticmethod
    def _title_page(source: Source) -> str:
        meta = source.metadata
        parts = [f'<h1 class="book-title">{escape(source.title)}</h1>']
        if meta.authors:
            parts.append(f'<p class="authors">{escape(", ".join(meta.authors))}</p>')
        if meta.publisher:
            parts.append(f'<p class="publisher">{escape(meta.publisher)}</p>')
        if meta.rights:
            parts.append(f'<p class="rights">{escape(meta.rights)}</p>')
        body = f'<section class="title-page" epub:type="titlepage">{"".join(parts)}</section>'
        return _page(source.title, body, source)

    @staticmethod
    def _package(
        source: Source, contents: Contents, images: dict[str, Asset], cover: Asset | None, report: Report
    ) -> str:
        meta = source.metadata
        modified = datetime.fromtimestamp(source.modified, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        described = [
            f'<dc:identifier id="book-id">{package_identifier(source.book_id, meta)}</dc:identifier>',
            f"<dc:title>{escape(source.title)}</dc:title>",
            f"<dc:language>{source.language}</dc:language>",
            f'<meta property="dcterms:modified">{modified}</meta>',
        ]
        for n, author in enumerate(meta.authors, start=1):
            described.append(f'<dc:creator id="creator{n}">{escape(author)}</dc:creator>')
            described.append(f'<meta refines="#creator{n}" property="role" scheme="marc:relators">aut</meta>')
        for element, value in (("publisher", meta.publisher), ("description", meta.description),
                               ("date", meta.published), ("rights", meta.rights)):  # fmt: skip
            if value:
                described.append(f"<dc:{element}>{escape(value)}</dc:{element}>")
        described += [f"<dc:subject>{escape(subject)}</dc:subject>" for subject in meta.subjects]
        described += _accessibility(images, report, any(math for _, _, _, math, _ in contents))
        if cover is not None:
            described.append(f'<meta name="cover" content="img-{cover.object_id}"/>')
        manifest = [
            '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>',
            '<item id="cover" href="cover.xhtml" media-type="application/xhtml+xml"/>',
            '<item id="title" href="title.xhtml" media-type="application/xhtml+xml"/>',
            '<item id="css" href="style.css" media-type="text/css"/>',
        ]
        if cover is None:
            svg = 'href="cover.svg" media-type="image/svg+xml"'
            manifest.append(f'<item id="cover-image" {svg} properties="cover-image"/>')
        for asset in images.values():
            properties = ' properties="cover-image"' if asset is cover else ""
            href, media_type = _packaged(asset)
            manifest.append(
                f'<item id="img-{asset.object_id}" href="{href}" media-type="{media_type}"{properties}/>'
            )
        manifest += [
            f'<item id="ch{n}" href="chapter-{n:06d}.xhtml" media-type="{XHTML}"{_MATHML * math}/>'
            for n, _, _, math, _ in contents
        ]
        spine = ['<itemref idref="cover" linear="no"/>', '<itemref idref="title"/>', '<itemref idref="nav"/>']
        spine += [f'<itemref idref="ch{n}"/>' for n, *_ in contents]
        progression = ' page-progression-direction="rtl"' if source.metadata.direction == "rtl" else ""
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="book-id"
 xml:lang="{source.language}" dir="{source.metadata.direction}">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
{chr(10).join(described)}
</metadata>
<manifest>
{chr(10).join(manifest)}
</manifest>
<spine{progression}>
{chr(10).join(spine)}
</spine>
</package>
"""

    @staticmethod
    def _nav(source: Source, contents: Contents) -> str:
        listed = [(n, title, headings) for n, title, headings, _, shown in contents if shown]
        if not listed and contents:  # (a navigation document's contents hold one entry at least)
            listed = [(contents[0][0], contents[0][1], [])]
        chapters = [(f"chapter-{n:06d}.xhtml", title, headings) for n, title, headings in listed]
        toc = markup.contents(chapters, source.option("toc_depth"), lambda href: href, every_level=True)
        start = (
            '<li><a epub:type="bodymatter" href="chapter-000001.xhtml">Start</a></li>\n' if contents else ""
        )
        body = (
            f'<nav epub:type="toc" role="doc-toc" id="toc"><h1>Contents</h1>\n{toc}</nav>\n'
            '<nav epub:type="landmarks" aria-label="Landmarks" hidden="hidden"><ol>\n'
            '<li><a epub:type="cover" href="cover.xhtml">Cover</a></li>\n'
            '<li><a epub:type="titlepage" href="title.xhtml">Title page</a></li>\n'
            '<li><a epub:type="toc" href="nav.xhtml">Contents</a></li>\n'
            f"{start}</ol></nav>"
        )
        return _page("Contents", body, source)


def _accessibility(images: dict[str, Asset], report: Report, math: bool) -> list[str]:
    """schema.org accessibility metadata, each statement true of this book as built: the images it shows
    and whether each has a text alternative, and its formulas (MathML, each with its TeX as its text)."""
    notes = report.notes  # (past the warnings it keeps, it cannot tell: then it says less)
    kept_all = notes.warnings_total == len(notes.warnings)
    every_alt = kept_all and not any(note.get("code") == "empty_alt" for note in notes.warnings)
    modes = ["textual", "visual"] if images else ["textual"]
    sufficient = ["textual"] if every_alt else []
    if images:
        sufficient.append("textual,visual")
    features = ["structuralNavigation", "tableOfContents", "readingOrder", "displayTransformability"]
    if images and every_alt:
        features.append("alternativeText")
    if math:
        features += ["MathML", "describedMath"]
    if not images:
        summary = "A text-only book: every page is text, with a navigable table of contents and headings."
    elif every_alt:
        summary = (
            "Every image has a text alternative. The book has a navigable table of contents and headings, "
            "and its text reflows."
        )
    else:
        summary = (
            "Some images have no text alternative, and a reader who cannot see them may miss what they show. "
            "The book has a navigable table of contents and headings, and its text reflows."
        )
    if math:
        summary += " Its formulas are MathML, each with its TeX as a text alternative."
    out = [f'<meta property="schema:accessMode">{mode}</meta>' for mode in modes]
    out += [f'<meta property="schema:accessModeSufficient">{s}</meta>' for s in sufficient]
    out += [f'<meta property="schema:accessibilityFeature">{f}</meta>' for f in features]
    out += [
        '<meta property="schema:accessibilityHazard">none</meta>',
        f'<meta property="schema:accessibilitySummary">{summary}</meta>',
    ]
    if every_alt and not report.notes.missing_total:
        out.append('<meta property="dcterms:conformsTo">EPUB Accessibility 1.1 - WCAG 2.2 Level AA</meta>')
    return out


RENDERER = EpubRenderer()
