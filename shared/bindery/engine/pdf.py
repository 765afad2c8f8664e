"""pdf: a typeset book with fpdf2: a title page, a table of contents with page numbers, running heads and
page numbers, and embedded (subset) Unicode fonts.

Why fpdf2: it is pure Python on fontTools (a few MB in the layer), embeds and subsets TrueType fonts,
falls back per glyph to other fonts (CJK, emoji), shapes Arabic and reorders RTL text with HarfBuzz, and
lays out the HTML our Markdown parser makes — headings, lists, quotes, code, tables. WeasyPrint typesets
better, but needs Pango and Cairo, which no Lambda runtime carries; ReportLab has no text shaping.

fpdf2 keeps the whole document in memory until it writes it, so a PDF's memory grows with the book.
MAX_MANUSCRIPT_BYTES is the largest manuscript that builds inside the worker's memory (measured by
`make bench`); a larger book fails at once with `too_large_for_format` instead of dying of memory.
"""

from __future__ import annotations

import io
import os
import re
import textwrap
import warnings
from collections.abc import Iterable
from functools import cache
from html import escape
from pathlib import Path
from typing import Any

from bindery.engine import Report, Sink, Source, Text, markup, skipped
from bindery.engine.figures import Figures
from bindery.images import Asset

MAX_MANUSCRIPT_BYTES = 8 * 1024 * 1024
# Page sizes in mm, as fpdf2 takes them; 6x9in is the common trade paperback.
PAGE_SIZES = {"a5": (148.0, 210.0), "a4": (210.0, 297.0), "letter": (215.9, 279.4), "6x9in": (152.4, 228.6)}
IMAGE_DPI = 150  # an image no wider than the text block is set at this resolution; a wider one, to fit it
MAX_IMAGE_HEIGHT = 0.6  # of the text block's height, so a tall figure leaves room for its paragraph
CODE_COLUMNS = 62  # the widest code line that fits the text block at the code size; longer ones wrap
PACKAGED_FONTS = Path(__file__).resolve().parent / "fonts"
SYSTEM_FONTS = (
    Path("/usr/share/fonts/truetype/dejavu"),
    Path("/usr/share/fonts/truetype/wqy"),
    Path("/usr/share/fonts/truetype/ancient-scripts"),
)
FONTS = {
    ("serif", ""): "DejaVuSerif.ttf",
    ("serif", "B"): "DejaVuSerif-Bold.ttf",
    ("serif", "I"): "DejaVuSerif-Italic.ttf",
    ("serif", "BI"): "DejaVuSerif-BoldItalic.ttf",
    ("sans", ""): "DejaVuSans.ttf",
    ("sans", "B"): "DejaVuSans-Bold.ttf",
    ("mono", ""): "DejaVuSansMono.ttf",
    ("cjk", ""): "wqy-microhei.ttc",
    ("symbols", ""): "Symbola_hint.ttf",
}


@cache
def font_path(name: str) -> Path:
    """A font file: BINDERY_FONT_DIR, then the fonts packaged into the layer, then the system's."""
    folders = [Path(os.environ["BINDERY_FONT_DIR"])] if os.environ.get("BINDERY_FONT_DIR") else []
    for folder in (*folders, PACKAGED_FONTS, *SYSTEM_FONTS):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"font {name} not found (set BINDERY_FONT_DIR, or `make fonts`)")


def _wrap_code(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """Code keeps its lines, but a line wider than the page wraps rather than running off its edge."""
    lines = []
    for line in tokens[idx].content.rstrip("\n").split("\n"):
        lines += textwrap.wrap(line, CODE_COLUMNS, drop_whitespace=False, replace_whitespace=False) or [""]
    return "<pre>" + escape("\n".join(lines)) + "</pre>\n"


_COMPLEX_SCRIPT = re.compile("[\u0590-\u08ff\u0900-\u0dff\u0e00-\u0eff\u1000-\u109f\ufb1d-\ufeff]")


def _needs_shaping(text: str) -> bool:
    return _COMPLEX_SCRIPT.search(text) is not None


_FIGURE = re.compile(r"<p>(<img [^>]*>)</p>")
_INTERNAL_LINK = re.compile(r'<a href="#[^"]*"[^>]*>(.*?)</a>', re.S)


def _for_pdf(html: str) -> str:
    """Our own HTML, trimmed for fpdf2: the chapter's leading h1 is already its section title; links to
    anchors within the page (footnotes) keep their text and lose the jump fpdf2 cannot resolve."""
    if html.startswith("<h1>"):
        html = html[html.index("</h1>") + 5 :]
    html = _FIGURE.sub(r'<p align="center">\1<br></p>', html)  # a figure: an image alone in its paragraph
    return _INTERNAL_LINK.sub(r"\1", html).replace("\ufe0e", "")


class PdfRenderer:
    max_manuscript_bytes = MAX_MANUSCRIPT_BYTES

    def __init__(self) -> None:
        self._md = markup.parser()
        self._md.add_render_rule("fence", _wrap_code)
        self._md.add_render_rule("code_block", _wrap_code)

    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> Report:
        from fpdf import FPDF
        from fpdf.enums import XPos, YPos
        from fpdf.fonts import FontFace, TextStyle

        title = source.title

        class Book(FPDF):
            def header(self) -> None:
                if self.page_no() <= 1:
                    return
                self.set_font("sans", "", 8)
                self.set_text_color(110)
                self.cell(0, 6, title, align="C", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
                self.set_text_color(0)
                self.ln(2)

            def footer(self) -> None:
                if self.page_no() <= 1:
                    return
                self.set_y(-14)
                self.set_font("sans", "", 8)
                self.cell(0, 8, str(self.page_no()), align="C")

        with warnings.catch_warnings():  # fpdf2 notes that its A5 was corrected in 2.8.5: ours is
            warnings.simplefilter("ignore", UserWarning)
            pdf = Book(format=PAGE_SIZES[source.option("page_size")], unit="mm")
        pdf.set_margins(16, 16, 16)
        pdf.set_auto_page_break(True, margin=18)
        meta = source.metadata
        pdf.set_title(title)
        pdf.set_lang(source.language)
        pdf.set_creator("Bindery")
        if meta.authors:
            pdf.set_author(", ".join(meta.authors))
        if meta.description:
            pdf.set_subject(meta.description)
        if meta.subjects:
            pdf.set_keywords(", ".join(meta.subjects))
        images = _Images(source, pdf)
        for (family, style), name in FONTS.items():
            pdf.add_font(family, style, str(font_path(name)))
        # DejaVu Serif has no Arabic or Hebrew; DejaVu Sans has both; CJK and emoji come from their own fonts.
        pdf.set_fallback_fonts(["sans", "cjk", "symbols"], exact_match=False)

        cover = next((a for a in source.assets if a.name == meta.cover), None)
        if cover is not None:
            # The cover: its image, as large as the page allows, centred.
            pdf.add_page()
            width, height = _fit(cover, pdf.w - 20, pdf.h - 20)
            pdf.image(
                images.bytes_of(cover), x=(pdf.w - width) / 2, y=(pdf.h - height) / 2, w=width, h=height
            )

        # The title page.
        pdf.add_page()
        pdf.set_font("serif", "B", 26)
        pdf.set_y(pdf.h / 3)
        pdf.multi_cell(0, 12, title, align="C", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        if meta.authors:
            pdf.ln(6)
            pdf.set_font("serif", "", 14)
            pdf.multi_cell(0, 8, ", ".join(meta.authors), align="C", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        pdf.set_font("serif", "", 11)
        pdf.ln(8)
        pdf.cell(0, 8, f"Revision {source.revision}", align="C")

        # The table of contents, filled in with page numbers once every chapter is laid out.
        pdf.add_page()
        depth = source.option("toc_depth")
        pdf.insert_toc_placeholder(
            lambda pdf, outline: _render_toc(pdf, outline, depth),
            pages=max(1, len(source.chapter_titles) // 28 + 1),
            allow_extra_pages=True,
        )

        tags = {
            "h1": TextStyle(font_family="sans", font_style="B", font_size_pt=15, t_margin=4, b_margin=3),
            "h2": TextStyle(font_family="sans", font_style="B", font_size_pt=13, t_margin=4, b_margin=2),
            "h3": TextStyle(font_family="sans", font_style="B", font_size_pt=11.5, t_margin=3, b_margin=2),
            "pre": FontFace(family="mono", size_pt=8),
            "code": FontFace(family="mono"),
            "blockquote": FontFace(color=80),
        }
        report = Report(notes=images.figures.notes)
        missed = report.skipped
        # The placeholder leaves us on a fresh page: the first chapter starts there, each later one anew.
        for n, text in enumerate(chapters):
            if n:
                pdf.add_page()
            # HarfBuzz shaping (Arabic joining, RTL order, Indic clusters) is slow, so only text that needs it
            # pays for it.
            pdf.set_text_shaping(_needs_shaping(text.title + text.markdown))
            pdf.start_section(text.title, level=0)
            pdf.set_font("sans", "B", 18)
            pdf.multi_cell(0, 9, text.title, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
            pdf.ln(4)
            pdf.set_font("serif", "", 10.5)
            images.figures.chapter = (text.ordinal, text.title)
            try:
                html = _for_pdf(
                    markup.render(self._md, text.markdown, f"ch{text.ordinal}", images.figures).html
                )
                pdf.write_html(html, tag_styles=tags, font_family="serif", image_map=images.bytes_for)
            except Exception as exc:  # one bad chapter must not sink the book
                missed.append(skipped(text, exc))
                pdf.set_font("serif", "I", 10.5)
                pdf.multi_cell(0, 6, "This chapter could not be rendered.")
        out.write(bytes(pdf.output()))
        return report


def _fit(asset: Asset, width: float, height: float) -> tuple[float, float]:
    """The size in mm to set an image at: IMAGE_DPI, shrunk to fit `width` x `height`, never enlarged."""
    natural_w, natural_h = asset.width * 25.4 / IMAGE_DPI, asset.height * 25.4 / IMAGE_DPI
    scale = min(1.0, width / natural_w, height / natural_h)
    return natural_w * scale, natural_h * scale


class _Images:
    """The book's images for fpdf2: an <img> names an asset by its object id, and fpdf2 asks for its bytes
    (once an image: fpdf2 embeds each image once however often it is shown)."""

    def __init__(self, source: Source, pdf: Any):
        self.source, self.pdf = source, pdf
        self.by_id = {a.object_id: a for a in source.assets}
        self.figures = Figures({a.name: a for a in source.assets}, self.tag)
        self._read: dict[str, bytes] = {}

    def tag(self, asset: Asset, alt: str) -> str:
        width, height = _fit(asset, self.pdf.epw, self.pdf.eph * MAX_IMAGE_HEIGHT)
        points = (
            f'width="{width * self.pdf.k:.1f}" height="{height * self.pdf.k:.1f}"'  # as fpdf2 reads <img>
        )
        return f'<img src="asset:{asset.object_id}" {points}>'

    def bytes_for(self, src: str) -> Any:
        return self.bytes_of(self.by_id[src.removeprefix("asset:")])

    def bytes_of(self, asset: Asset) -> io.BytesIO:
        if asset.object_id not in self._read:
            self._read[asset.object_id] = b"".join(self.source.read_asset(asset))
        return io.BytesIO(self._read[asset.object_id])


def _render_toc(pdf: Any, outline: list[Any], depth: int = 1) -> None:
    from fpdf.enums import XPos, YPos

    pdf.set_x(pdf.l_margin)  # fpdf2 renders this at the end, wherever the last page left x
    pdf.set_text_shaping(any(_needs_shaping(s.name) for s in outline))
    pdf.set_font("sans", "B", 16)
    pdf.cell(0, 12, "Contents", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.ln(2)
    pdf.set_font("serif", "", 10.5)
    for section in (s for s in outline if s.level < depth):  # chapters, and their ## and ### to `depth`
        page = str(section.page_number)
        link = pdf.add_link(page=section.page_number)
        name = section.name
        indent = 5.0 * section.level
        pdf.set_x(pdf.l_margin + indent)
        width = pdf.epw - indent
        number_width = pdf.get_string_width(page) + 2
        while name and pdf.get_string_width(name + " …") > width - number_width - 4:
            name = name[:-1]
        if name != section.name:
            name = name.rstrip() + " …"
        dots = width - number_width - pdf.get_string_width(name) - 2
        pdf.cell(pdf.get_string_width(name) + 1, 6.5, name, link=link)
        pdf.cell(dots, 6.5, "." * max(0, int(dots / pdf.get_string_width("."))), align="R", link=link)
        pdf.cell(number_width, 6.5, page, align="R", link=link, new_x=XPos.LMARGIN, new_y=YPos.NEXT)


RENDERER = PdfRenderer()
