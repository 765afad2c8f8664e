"""docx: a Word document that Word, LibreOffice and pandoc read as the book, for the people who work on it
(a copy-editor, a translator, a production team) in a word processor.

Its structure is Word's own: every paragraph names a style (`docx_parts.styles`), notes are footnotes,
lists are Word numbering nested as in the manuscript, a table's header row repeats on every page it runs
onto, each chapter starts a page (its `heading 1` style breaks the page), and a table-of-contents field
lists the chapters, and to `toc_depth` their headings, which Word fills in with page numbers when the file
is opened. Images are in the package at their size, shrunk to the text block, each with its alt text as
the picture's description; the cover is the first page. The book's language is the document's, and a
chapter in another script carries that script's language (see `chapter_language`); a paragraph whose first
strong character is right to left is set right to left, as HTML's dir="auto" reads it.

The package is written with zipfile into a temporary file on the function's ephemeral storage, then
streamed up, as the EPUB is. The body (word/document.xml) is one zip entry; its contents, at the top, list
headings the chapters have not yet shown (as the HTML's do), so the chapters are written first, a chapter
at a time, to a spool (gzip at its fastest level: the body is 2 to 6 times the manuscript), and copied
into the entry after the front matter. What the chapters add to other parts (their notes, their lists'
numbering, their links' targets) is spooled to temporary files too and copied into the package once the
body is done. Memory holds one chapter, the contents' headings, or one piece of one image, however long
the book.

Written by hand, not with python-docx (measured by tests/bench/docx_probe.py): python-docx builds the whole
document as an lxml tree in memory and has no footnotes API, so it would cost the layer 2.5 MB and a cold
import of about 146 ms (these modules: 48 KB, about 5 ms) and still leave the notes to be written by hand.
"""

from __future__ import annotations

import gzip
import tempfile
import time
import unicodedata
import zipfile
from collections.abc import Callable, Iterable
from typing import IO

from bindery.engine import Report, Sink, Source, Text, markup, skipped, typography
from bindery.engine import docx_parts as parts
from bindery.engine.anchors import Anchors, Links
from bindery.engine.docx_notes import custom_styles
from bindery.engine.figures import Figures, image_bytes
from bindery.engine.ooxml import paragraph, run, text
from bindery.engine.wordml import Chapter, Counters, Image, Writer
from bindery.images import Asset
from bindery.language import text_direction
from bindery.metadata import package_identifier

COPY_CHUNK = 1024 * 1024
DEFLATE = zipfile.ZIP_DEFLATED
ZIP_EPOCH = 315532800  # 1980-01-01 UTC: a zip's earliest date
# The largest manuscript a docx is built from. Its body is one part, and a part must stay under zipfile's
# 2 GiB without Zip64, which pandoc cannot read: the XML is 2 to 6 times the manuscript (a book of short
# paragraphs, lists or tables the most), so 100 MiB leaves room for 20 times. It is also about what the
# worker builds in half its timeout (1.2 s a MB here, 50 MB in 43 s: tests/bench/docx_probe.py).
MAX_MANUSCRIPT_BYTES = 100 * 1024 * 1024

# The language a chapter in another script than the book's is most likely written in, by script; a
# script with many languages (Latin) names none, and such a chapter keeps the book's.
SCRIPT_LANGUAGE = {
    "ARABIC": "ar", "HEBREW": "he", "GREEK": "el", "CYRILLIC": "ru", "HIRAGANA": "ja", "KATAKANA": "ja",
    "HANGUL": "ko", "CJK": "zh", "THAI": "th", "DEVANAGARI": "hi", "ARMENIAN": "hy", "GEORGIAN": "ka",
}  # fmt: skip
BOOK_SCRIPT = {"ar": "ARABIC", "fa": "ARABIC", "ur": "ARABIC", "he": "HEBREW", "yi": "HEBREW", "el": "GREEK",
               "ru": "CYRILLIC", "uk": "CYRILLIC", "bg": "CYRILLIC", "sr": "CYRILLIC", "ja": "CJK",
               "zh": "CJK", "ko": "HANGUL", "th": "THAI", "hi": "DEVANAGARI", "hy": "ARMENIAN",
               "ka": "GEORGIAN"}  # fmt: skip
RTL_LANGUAGES = frozenset({"ar", "he"})
CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})
SAMPLE = 500  # letters a chapter's script is judged by
EMU_PER_PX = 9525  # an image's pixels at 96 per inch


def script_of(sample: str) -> str | None:
    """The script most of `sample`'s letters are written in (Unicode's name for it), or None for none."""
    counts: dict[str, int] = {}
    seen = 0
    for ch in sample:
        if ch < "\x80":  # ASCII: Latin, when a letter (the usual character, told without its name)
            name = "LATIN" if ch.isalpha() else ""
        elif ch.isalpha():
            name = unicodedata.name(ch, "").split(" ", 1)[0]
        else:
            continue
        if not name:
            continue
        counts[name] = counts.get(name, 0) + 1
        seen += 1
        if seen >= SAMPLE:
            break
    if not counts:
        return None
    script = max(counts, key=lambda k: counts[k])
    if script in ("HIRAGANA", "KATAKANA") or (
        script == "CJK" and ("HIRAGANA" in counts or "KATAKANA" in counts)
    ):
        return "HIRAGANA"
    return script


def chapter_language(markdown: str, book: str) -> str | None:
    """The language of a chapter written in another script than the book's, as a BCP 47 tag; None when
    the chapter is in the book's script (or one that names no language), and so in the book's language."""
    script = script_of(markdown[: SAMPLE * 4])
    primary = book.split("-", 1)[0].lower()
    if script is None or script == BOOK_SCRIPT.get(primary, "LATIN"):
        return None
    if script == "HIRAGANA" and BOOK_SCRIPT.get(primary) == "CJK":
        return None if primary == "ja" else "ja"
    return SCRIPT_LANGUAGE.get(script)


def _lang(tag: str) -> str:
    """A run's language: Word keeps one per kind of script, so the tag goes where its script is read."""
    if tag in RTL_LANGUAGES:
        return f'<w:lang w:bidi="{tag}"/>'
    if tag in CJK_LANGUAGES:
        return f'<w:lang w:eastAsia="{tag}"/>'
    return f'<w:lang w:val="{tag}"/>'


def picture(rel: str, number: int, asset: Asset, alt: str, max_cx: int, max_cy: int) -> str:
    """An inline picture at the image's size, shrunk (never stretched) to fit `max_cx` x `max_cy` EMU, with
    its alt text as the description a screen reader reads."""
    cx, cy = asset.width * EMU_PER_PX, asset.height * EMU_PER_PX
    scale = min(1.0, max_cx / max(cx, 1), max_cy / max(cy, 1))
    cx, cy = max(1, int(cx * scale)), max(1, int(cy * scale))
    descr = text(alt)
    return (
        f'<w:r><w:drawing><wp:inline distT="0" distB="0" distL="0" distR="0"><wp:extent cx="{cx}" cy="{cy}"/>'
        f'<wp:docPr id="{number}" name="Picture {number}" descr="{descr}"/>'
        '<wp:cNvGraphicFramePr><a:graphicFrameLocks noChangeAspect="1"/></wp:cNvGraphicFramePr>'
        '<a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:pic>'
        f'<pic:nvPicPr><pic:cNvPr id="{number}" name="{text(asset.file_name)}" descr="{descr}"/>'
        "<pic:cNvPicPr/>"
        f'</pic:nvPicPr><pic:blipFill><a:blip r:embed="{rel}"/><a:stretch><a:fillRect/></a:stretch>'
        f'</pic:blipFill><pic:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="{cx}" cy="{cy}"/></a:xfrm>'
        '<a:prstGeom prst="rect"><a:avLst/></a:prstGeom></pic:spPr></pic:pic></a:graphicData></a:graphic>'
        "</wp:inline></w:drawing></w:r>"
    )


def _packaged(asset: Asset) -> str:
    """Where an image goes in the package. Word reads no WebP: a WebP goes in as the PNG of its pixels."""
    if asset.content_type == "image/webp":
        return f"media/{asset.object_id}.png"
    name = asset.file_name
    return f"media/{name[:-5]}.jpg" if name.endswith(".jpeg") else f"media/{name}"


def _copy(spool: IO[bytes], entry: IO[bytes]) -> None:
    spool.seek(0)
    while chunk := spool.read(COPY_CHUNK):
        entry.write(chunk)


class DocxRenderer:
    max_manuscript_bytes = MAX_MANUSCRIPT_BYTES

    def __init__(self) -> None:
        self._md = markup.parser()

    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> Report:
        figures = Figures({a.name: a for a in source.assets}, lambda asset, alt: "")
        typography.configure(self._md, source.quotes)
        report = Report(notes=figures.notes)
        meta = source.metadata
        primary = source.language.split("-", 1)[0].lower()
        rtl = meta.direction == "rtl"
        cover = next((a for a in source.assets if a.name == meta.cover), None)
        images: dict[str, tuple[str, Asset]] = {}  # asset name -> (relationship id, asset)
        counters = Counters()
        when = time.gmtime(max(source.modified, ZIP_EPOCH))[:6]

        def entry(name: str, compress: int = DEFLATE) -> zipfile.ZipInfo:
            """A part, dated the revision's time as the epub's are: a revision is the same bytes each time."""
            info = zipfile.ZipInfo(name, date_time=when)
            info.compress_type = compress
            return info

        def image_run(asset: Asset, alt: str, max_cy: int = parts.TEXT_CY * 9 // 10) -> str:
            rel = images.setdefault(asset.name, (f"rIdImg{len(images) + 1}", asset))[0]
            counters.picture += 1
            return picture(rel, counters.picture, asset, alt, parts.TEXT_CX, max_cy)

        contents: list[tuple[int, str]] = []  # (level, text) of each heading the contents list
        depth = int(source.option("toc_depth"))
        with (
            tempfile.TemporaryFile() as spool,
            tempfile.TemporaryFile() as body,
            tempfile.TemporaryFile() as notes,
            tempfile.TemporaryFile() as lists,
            tempfile.TemporaryFile() as links,
            tempfile.TemporaryFile() as note_links,
        ):
            with zipfile.ZipFile(spool, "w") as book:
                book.writestr(entry("[Content_Types].xml"), parts.CONTENT_TYPES)
                book.writestr(entry("_rels/.rels"), parts.PACKAGE_RELATIONSHIPS)
                identifier = package_identifier(source.book_id, meta)
                book.writestr(entry("docProps/core.xml"), parts.core(
                    source.title, meta.authors, source.language, meta.subjects, meta.description, identifier,
                    source.modified,
                ))  # fmt: skip
                book.writestr(entry("docProps/app.xml"), parts.APP)
                # The cover's picture is the document's first, as it is the first thing shown.
                front = self._front(source, cover, image_run)
                with gzip.GzipFile(fileobj=body, mode="wb", compresslevel=1) as spooled:
                    for chapter in chapters:
                        written = self._chapter(
                            chapter, figures, counters, image_run, rtl, primary, report, source.anchors,
                            by_chapter=source.option("figure_numbers") == "chapter",
                        )  # fmt: skip
                        contents += [(level, shown) for level, shown in written.headings if level <= depth]
                        spooled.write("".join(written.body).encode())
                        notes.write("".join(written.notes).encode())
                        lists.write("".join(parts.numbered_list(*n) for n in written.lists).encode())
                        links.write(_relationships(written.links))
                        note_links.write(_relationships(written.note_links))
                with book.open(entry("word/document.xml"), "w") as document:
                    document.write(f"{parts.HEAD}<w:document {parts.DOCUMENT_NAMESPACES}><w:body>".encode())
                    document.write((front + _contents(depth, contents)).encode())
                    body.seek(0)
                    with gzip.GzipFile(fileobj=body, mode="rb") as chapters_xml:
                        while chunk := chapters_xml.read(COPY_CHUNK):
                            document.write(chunk)
                    document.write(f"{parts.section(rtl)}</w:body></w:document>".encode())
                cjk = primary in CJK_LANGUAGES
                known = parts.styles(source.language, rtl, cjk)  # and the custom styles the chapters named
                made = custom_styles(counters.styles, known)
                book.writestr(entry("word/styles.xml"), known.replace("</w:styles>", made + "</w:styles>"))
                book.writestr(entry("word/settings.xml"), parts.SETTINGS)
                self._part(
                    book, entry("word/numbering.xml"), parts.NUMBERING_HEAD, lists, parts.NUMBERING_TAIL
                )
                self._part(
                    book, entry("word/footnotes.xml"), parts.FOOTNOTES_HEAD, notes, parts.FOOTNOTES_TAIL
                )
                kind = parts.IMAGE_RELATIONSHIP
                pictures = "".join(
                    f'<Relationship Id="{rel}" Type="{kind}" Target="{_packaged(asset)}"/>'
                    for rel, asset in images.values()
                )
                self._part(
                    book,
                    entry("word/_rels/document.xml.rels"),
                    parts.DOCUMENT_RELATIONSHIPS + pictures,
                    links,
                    "</Relationships>",
                )
                # The notes' own: their links, and every picture (a note may show one; at most 500).
                self._part(
                    book,
                    entry("word/_rels/footnotes.xml.rels"),
                    f'{parts.HEAD}<Relationships xmlns="{parts.PACKAGE_RELS}">{pictures}',
                    note_links,
                    "</Relationships>",
                )
                for _, asset in images.values():
                    # Already compressed: stored, not deflated again.
                    with book.open(entry(f"word/{_packaged(asset)}", zipfile.ZIP_STORED), "w") as stored:
                        for piece in image_bytes(asset, source.read_asset):
                            stored.write(piece)
            spool.seek(0)
            while chunk := spool.read(COPY_CHUNK):
                out.write(chunk)
        return report

    @staticmethod
    def _part(
        book: zipfile.ZipFile, entry: zipfile.ZipInfo, head: str, spooled: IO[bytes], tail: str
    ) -> None:
        with book.open(entry, "w") as part:
            part.write(head.encode())
            _copy(spooled, part)
            part.write(tail.encode())

    def _chapter(
        self,
        chapter: Text,
        figures: Figures,
        counters: Counters,
        image_run: Image,
        rtl: bool,
        primary: str,
        report: Report,
        anchors: Anchors | None = None,
        *,
        by_chapter: bool = False,
    ) -> Chapter:
        """One chapter as WordprocessingML; or, when it cannot be rendered, a note in its place and its name
        in the report. One bad chapter must not sink the book, nor leave half its XML in the document.
        With the book's `anchors`, each heading is a bookmark named as its id, and a link to one goes
        there."""
        figures.chapter = (chapter.ordinal, chapter.title)
        language = chapter_language(chapter.markdown, primary)
        saved = Counters(**vars(counters))
        written = Chapter()
        try:
            links = (
                Links(anchors, chapter.ordinal, lambda anchor: f"#{anchor.id}", by_chapter=by_chapter)
                if anchors
                else None
            )
            markdown = links.with_notes(chapter.markdown) if links else chapter.markdown
            tokens = self._md.parse(markdown, {"references": links.labels} if links else {})
            lang = _lang(language) if language else ""
            writer = Writer(
                written, counters, figures, image_run, base_rtl=rtl, lang=lang, title=chapter.title,
                anchors=links,
            )  # fmt: skip
            if not tokens or tokens[0].type != "heading_open" or tokens[0].tag != "h1":
                # A chapter with no title of its own (the text before the first) still starts a page.
                written.body.append('<w:p><w:r><w:br w:type="page"/></w:r></w:p>')
            writer.chapter(tokens)
        except Exception as exc:
            report.skipped.append(skipped(chapter, exc))
            for name, value in vars(saved).items():
                setattr(counters, name, value)
            written = Chapter(body=[paragraph("Heading1", run(chapter.title)), paragraph("BodyText", run(
                "This chapter could not be rendered."))], headings=[(1, chapter.title)])  # fmt: skip
        return written

    @staticmethod
    def _front(source: Source, cover: Asset | None, image_run: Callable[..., str]) -> str:
        """The cover on the first page, then the title page (the table of contents follows)."""
        meta = source.metadata
        out = []
        if cover is not None:
            shown = image_run(cover, f"The cover of {source.title}", parts.TEXT_CY)
            out.append(paragraph("Cover", shown + '<w:r><w:br w:type="page"/></w:r>'))
        rtl = text_direction(source.title) == "rtl"
        out.append(paragraph("Title", run(source.title), rtl=rtl and meta.direction != "rtl"))
        if meta.authors:
            out.append(paragraph("Subtitle", run(", ".join(meta.authors))))
        for line in (meta.publisher, meta.rights):
            if line:
                out.append(paragraph("Subtitle", run(line)))
        return "".join(out)


def _contents(depth: int, headings: list[tuple[int, str]]) -> str:
    """A table-of-contents field to `toc_depth`, which Word updates on opening (settings.xml asks it to).
    Until then it shows what Word would fill in but the page numbers: the body's headings to `depth`, each
    as the body shows it, so a reader that updates no field still lists them."""
    begin = (
        '<w:r><w:fldChar w:fldCharType="begin" w:dirty="true"/></w:r>'
        f'<w:r><w:instrText xml:space="preserve"> TOC \\o "1-{depth}" \\h \\z \\u </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
    )
    end = '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    shown = headings or [(1, "")]
    lines = []
    for n, (level, title) in enumerate(shown):
        runs = (begin if n == 0 else "") + run(title) + (end if n == len(shown) - 1 else "")
        lines.append(paragraph(f"TOC{level}", runs))
    return paragraph("TOCHeading", run("Contents")) + "".join(lines)


RENDERER = DocxRenderer()


def _relationships(links: list[tuple[str, str]]) -> bytes:
    """External hyperlinks as a part's relationships."""
    return "".join(
        f'<Relationship Id="{rel}" Type="{parts.LINK_RELATIONSHIP}" '
        f'Target="{text(target)}" TargetMode="External"/>'
        for rel, target in links
    ).encode()
