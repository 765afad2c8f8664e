"""The Typst source a pdf build writes (`bindery.engine.pdf` compiles it): the page sizes, each run's chapters
parsed (or their parse reused from the book's cache of built pieces), the preamble every piece opens with,
and the front matter's lines."""

from __future__ import annotations

import hashlib
import json
import shutil
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bindery.engine import Pieces, Report, Skipped, Source, Text, highlighting, skipped
from bindery.engine.anchors import Links
from bindery.engine.breaks import fitted
from bindery.engine.chapter_pieces import DIALECT, reused
from bindery.engine.figures import Figures
from bindery.engine.literals import literal, text
from bindery.engine.measures import Block, head
from bindery.engine.pdf_outline import Opened
from bindery.engine.typefaces import cjk_face
from bindery.engine.typeset import Chapter, Parse, chapter_source
from bindery.language import text_direction
from bindery.metadata import Metadata

HERE = Path(__file__).resolve().parent
# A run ends at pdf.py's RUN_BYTES or RUN_CHAPTERS, or, past three quarters of either, after a chapter whose
# title marks an end (one title in ANCHOR_EVERY, by its hash): where runs end then depends on the chapters'
# titles, not on their lengths, so an edit that makes a chapter longer leaves every later run's chapters,
# and so its piece in the cache, as they were. (Past half, runs were shorter: the bench's 0.5 MB book took
# two runs and a restart of the typesetter.)
ANCHOR_EVERY = 4
MAX_CHAPTER_BYTES = 2 * 1024 * 1024  # one compile: about 0.5 GB of Typst's memory a MB
UNRENDERED = text("This chapter could not be rendered.")
# The sizes book.typ sets the book's own lines in (each wraps inside the block: `breaks.fitted`).
TITLE_PT, BOOK_TITLE_PT, AUTHORS_PT, IMPRINT_PT, ENTRY_PT = 17.0, 22.0, 13.0, 8.5, 10.0
ENTRY_INDENT = 13.0  # a line of the contents is indented 1.3 em a level below the first


@dataclass(frozen=True)
class PageSize:
    """A page and its margins in mm: inside is the bound edge, so a recto's left and a verso's right."""

    width: float
    height: float
    inside: float
    outside: float
    top: float
    bottom: float

    @property
    def block(self) -> Block:
        return Block(self.width - self.inside - self.outside, self.height - self.top - self.bottom - 12)

    def typst(self) -> str:
        return (
            f"width: {self.width}mm, height: {self.height}mm, margin: (inside: {self.inside}mm, "
            f"outside: {self.outside}mm, top: {self.top}mm, bottom: {self.bottom}mm)"
        )


PAGE_SIZES = {
    "a5": PageSize(148, 210, 20, 15, 18, 20),
    "6x9in": PageSize(152.4, 228.6, 21, 16, 19, 21),
    "a4": PageSize(210, 297, 28, 22, 25, 28),
    "letter": PageSize(215.9, 279.4, 28, 22, 24, 27),
}


class RunParser:
    """A build's parse of its runs: each chapter as Typst source, reused from the book's cache of built pieces
    where it holds it (`chapter_pieces.reused`), its account added to the build's."""

    def __init__(
        self,
        parse: Parse,
        page: PageSize,
        engine: str,
        figures: Figures,
        report: Report,
        source: Source,
    ):
        self.parse, self.page, self.engine, self.anchors = parse, page, engine, source.anchors
        self.quotes = source.quotes  # (the parse sets the text with them: `engine.typography`)
        self.by_chapter = source.option("figure_numbers") == "chapter"
        self.pages = source.option("reference_pages") == "on"
        pieces = source.pieces
        self.figures, self.report = figures, report
        self.pieces = _Held(pieces) if pieces is not None else None

    def flush(self) -> None:
        """Keep the chapters parsed since the last flush (`_Held`)."""
        if self.pieces is not None:
            self.pieces.flush()

    def parsed(self, texts: list[Text]) -> tuple[list[tuple[Text, Chapter]], str]:
        """A run's chapters as Typst source, each in its `#chapter` (`opened_in`), and the body of the run's
        source. The book's cache may hold a chapter's from an earlier build (the same ordinal, title and
        text; the page size; the code that writes Typst; and, checked by its key, every image it names, as
        the revision has it now), so an edit parses, and reads the text of, only the chapters it touched."""
        run = [(chapter, self._parsed(chapter)) for chapter in texts]
        return run, chapters_source(run)

    def _parsed(self, chapter: Text) -> Chapter:
        if self.pieces is None:
            return self.chapter(chapter, self.figures, self.report.skipped)

        def make(own: Figures, missed: list[Any]) -> tuple[Any, bytes]:
            parsed = self.chapter(chapter, own, missed)
            return {
                "images": [a.name for a in parsed.images.values()],
                "listed": parsed.listed,
            }, parsed.source.encode()

        anchors = self.anchors
        own = anchors.own(chapter.ordinal) if anchors is not None else None
        head = [
            self.engine,
            parse_code(),
            DIALECT,
            self.page.typst(),
            own,
            self.by_chapter,
            self.pages,
            self.quotes,
        ]
        said, source = reused(
            chapter, self.report, self.figures, self.pieces, head=head, make=make, anchors=anchors
        )
        assets = self.figures.assets
        images = {assets[n].object_id: assets[n] for n in said["images"]}
        return Chapter(source.decode(), images, listed=said["listed"])

    def chapter(self, chapter: Text, figures: Figures, missed: list[Skipped]) -> Chapter:
        if len(chapter.markdown.encode()) > MAX_CHAPTER_BYTES:
            reason = f"ValueError: a chapter over {MAX_CHAPTER_BYTES // 2**20} MB is too long to typeset"
            missed.append({"ordinal": chapter.ordinal, "title": chapter.title, "reason": reason})
            return self.unrendered(chapter)
        figures.chapter = (chapter.ordinal, chapter.title)
        links = (
            Links(
                self.anchors,
                chapter.ordinal,
                lambda a: f"#{a.id}",
                by_chapter=self.by_chapter,
                pages=self.pages,
            )
            if self.anchors is not None
            else None
        )
        try:
            label = f"ch{chapter.ordinal}"
            body = chapter_source(self.parse, chapter.markdown, label, self.page.block, figures, links)
            if links is not None:
                figures.named.update(links.asked)  # each `#id` and `[label` it asked of the book: the key's
        except Exception as exc:  # one bad chapter must not sink the book
            missed.append(skipped(chapter, exc))
            return self.unrendered(chapter)
        return opened_in(self.page, chapter, body)

    def unrendered(self, chapter: Text) -> Chapter:
        return opened_in(self.page, chapter, Chapter(UNRENDERED))


class _Held:
    """The book's cache, each chapter kept held back until `flush`. A run's chapters are parsed while the
    run before is set, so a cold build kept them ahead of that run's pdf, where a warm build, which finds
    them after it, stepped back in the pack: a ranged GET a run, 32 of the 1,200-chapter book's re-export.
    Flushed once the run before is kept, the pack is in the order a warm build reads it."""

    def __init__(self, pieces: Pieces):
        self.pieces, self.held = pieces, list[tuple[str, str, Sequence[str], bytes, bool]]()

    def find(self, lookup: str, key_for: Callable[[Sequence[str]], str]) -> bytes | None:
        return self.pieces.find(lookup, key_for)

    def keep(
        self, lookup: str, key: str, names: Sequence[str], data: bytes, *, compressed: bool = False
    ) -> None:
        self.held.append((lookup, key, names, data, compressed))

    def flush(self) -> None:
        held, self.held = self.held, []
        for lookup, key, names, data, compressed in held:
            self.pieces.keep(lookup, key, names, data, compressed=compressed)


def opened_in(page: PageSize, chapter: Text, body: Chapter) -> Chapter:
    """A chapter's body in its `#chapter`: its heading, set to fit, its labels and its direction (kept so
    in the cache, where a warm build finds it whole)."""
    anchor = f", anchor: label({literal(body.anchor)})" if body.anchor else ""
    return Chapter(
        f"#chapter({head(chapter.title, page.block)}, [{fitted_in(page, chapter.title, TITLE_PT)}], "
        f"<c{chapter.ordinal}>, <e{chapter.ordinal}>{anchor}, "
        f"dir: {text_direction(chapter.title + chapter.markdown[:2000])})"
        f"[#metadata(none)<c{chapter.ordinal}>\n{body.source}\n#metadata(none)<e{chapter.ordinal}>]\n",
        body.images,
        listed=body.listed,
    )


def chapters_source(run: list[tuple[Text, Chapter]]) -> str:
    return "".join(body.source for _, body in run)


def fitted_in(page: PageSize, value: str, size: float, indent: float = 0.0) -> str:
    """A title, a name or a line of the imprint, `size` pt, as Typst text that wraps inside the block."""
    return fitted(value, page.block.width_pt - indent, size, literal)


def preamble(source: Source, page: PageSize, first: int, numbering: str, *, folios: bool = True) -> str:
    meta = source.metadata
    lang, region = _language(meta.language)
    title = source.title
    return (
        '#import "book.typ": *\n'
        f"#show: book.with(title: {literal(title)}, head: {head(title, page.block)}, "
        f"authors: {_array(meta.authors)}, "
        f"lang: {literal(lang)}, region: {literal(region) if region else 'none'}, "
        f"cjk: {literal(cjk_face(meta.language))}, {page.typst()}, "
        f'numbering: "{numbering}", first: {first}, folios: {str(folios).lower()})\n'
    )


def _array(values: Iterable[str]) -> str:
    items = [literal(v) for v in values]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _language(tag: str) -> tuple[str, str | None]:
    """Typst's lang and region from a BCP 47 tag: `pt-BR` is ("pt", "BR"); a script subtag is skipped."""
    parts = tag.split("-")
    lang = parts[0].lower() if 2 <= len(parts[0]) <= 3 and parts[0].isalpha() else "en"
    region = next((p.upper() for p in parts[1:] if len(p) == 2 and p.isalpha()), None)
    return lang, region


def imprint(source: Source, meta: Metadata) -> list[str]:
    lines = [source.title]
    if meta.authors:
        lines.append("By " + ", ".join(meta.authors))
    if meta.publisher:
        lines.append(f"Published by {meta.publisher}" + (f", {meta.published}" if meta.published else ""))
    elif meta.published:
        lines.append(f"Published {meta.published}")
    if meta.identifier:
        lines.append(f"ISBN {meta.identifier}")
    if meta.rights:
        lines.append(meta.rights)
    lines.append(f"Revision {source.revision}. Typeset by Bindery.")
    return lines


@cache
def parse_code() -> str:
    """The hash of the code that writes a chapter's Typst source: a run's parse is reused only by the same."""
    digest = hashlib.sha256()
    code = (
        *("typeset", "pdf_tables", "paragraphs", "breaks", "measures", "literals", "figures", "token_tree"),
        *("pdf_source", "anchors", "page_refs"),
        *(
            "markup",
            "block_rules",
            "inline_rules",
            "comments",
            "headings",
            "crossrefs",
        ),  # the parser, whose tokens they write
    )
    for module in code:
        digest.update((HERE / f"{module}.py").read_bytes())
    return digest.hexdigest()


def ends_run(size: int, chapters: int, title: str, run_bytes: int, run_chapters: int) -> bool:
    """Whether a run that holds `size` bytes of manuscript in `chapters` chapters, the last titled `title`,
    ends here, with its bounds `run_bytes` and `run_chapters` (pdf.py's RUN_BYTES and RUN_CHAPTERS)."""
    if size >= run_bytes or chapters >= run_chapters:
        return True
    late = size >= run_bytes * 3 // 4 or chapters >= run_chapters * 3 // 4
    return late and zlib.crc32(title.encode()) % ANCHOR_EVERY == 0


def placed_design(root: Path, fonts: list[Path], design: Path, piece_version: str) -> str:
    """book.typ and the code's theme it names put in the compile root, and what every piece of the build is
    compiled with: Typst's version, those two, the fonts (each file's name and size), the piece version."""
    faces = [[face.name, face.stat().st_size] for folder in fonts for face in sorted(folder.iterdir())]
    digest = hashlib.sha256(json.dumps([piece_version, version("typst"), faces]).encode())
    shutil.copy(design, root / "book.typ")
    (root / highlighting.THEME).write_text(theme := highlighting.theme())
    digest.update(design.read_bytes() + theme.encode())
    return digest.hexdigest()


def front_matter(source: Source, page: PageSize) -> str:
    """The front matter's first piece: the title page and the imprint, which names the revision (the
    contents are a piece apart, `contents`, so an edit that moves no page finds them in the cache)."""
    meta = source.metadata
    names = ", ".join(meta.authors)
    authors = f"[{fitted_in(page, names, AUTHORS_PT)}]" if names else "none"
    lines = ", ".join(f"[{fitted_in(page, line, IMPRINT_PT)}]" for line in imprint(source, meta))
    return (
        preamble(source, page, 1, "i")
        + f"#title-page([{fitted_in(page, source.title, BOOK_TITLE_PT)}], {authors})\n"
        + f"#imprint(({lines},))\n"
    )


def contents(
    source: Source, page: PageSize, opened: list[Opened], goto: str, first: int
) -> tuple[str, dict[int, tuple[int, float]]]:
    """The contents' Typst source, its first page (roman) `first`, and where each of its entries goes: its
    link is `goto` and a number, the key of its (page, top) in what is returned."""
    depth = int(source.option("toc_depth"))
    entries: list[str] = []
    targets: dict[int, tuple[int, float]] = {}
    for chapter in (c for c in opened if c.listed):
        rows = [(1, chapter.title, chapter.number, chapter.top)]
        rows += [h for h in chapter.headings if h[0] <= depth]
        for level, title, number, top in rows:
            targets[len(targets)] = (number, top)
            entries.append(
                f"#entry({level}, [{fitted_in(page, title, ENTRY_PT, ENTRY_INDENT * (level - 1))}], "
                f"{literal(str(number))}, "
                f"{literal(goto + str(len(targets) - 1))})\n"
            )
    return (
        preamble(source, page, first, "i") + f"#contents({literal('Contents')}, [\n{''.join(entries)}])\n"
    ), targets
