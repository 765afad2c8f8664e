"""pdf: a book typeset by Typst, in pieces, joined into one tagged PDF.

Typst sets the text the way books are set: justified with Knuth–Plass line breaking, hyphenated in the
book's language, footnotes at the foot of their page, tables whose header repeats across a page break,
Arabic and Hebrew shaped and set right to left, CJK lines broken between characters. It writes tagged PDF
(a structure tree a screen reader follows), and PDF/UA-1 where the book allows it (see `_Book.compile`).

**Pieces, for flat memory.** Typst lays out a whole document in memory, about 0.5 GB for each MB of
manuscript. So a book is compiled in *runs* of whole chapters, about RUN_BYTES of manuscript each (the
first a quarter: it is set while the next is parsed), one after another by a child process
(`bindery.engine.compiler`), and only then joined (`bindery.engine.join`). A run knows the page it starts
on, so folios run on from one run to the next; each chapter opens on a recto, and a run whose last page is
a recto is followed by a blank verso. The front matter is joined first: its title page and imprint set
while the first run is parsed, its contents last, when every chapter's page is known. Memory is one
run's, whatever the book's size; MAX_MANUSCRIPT_BYTES is bounded by time (`make bench` measures the
largest book against the worker's timeout), and MAX_CHAPTER_BYTES by the memory a single chapter's
compile takes: a longer chapter is skipped, named, and the book goes on.

**The manuscript is data.** `bindery.engine.typeset` hands every word to Typst as a string literal, and
each compile runs under the build's time limit: a compile that overruns is killed, and the export fails as
`render_failed`, never hanging the worker.

**Fonts** (the layer carries them; no system font is read): Typst's own, and the pinned wheels that
`bindery.engine.typefaces` names and finds where pip installed them, so a venv and the layer hold the same.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bindery.engine import Report, Sink, Source, Text, markup, page_refs, skipped, typography
from bindery.engine.compiler import CompileError, Compiler
from bindery.engine.figures import Figures, image_file
from bindery.engine.join import GOTO, Folios, Joined, join
from bindery.engine.literals import literal
from bindery.engine.pdf_outline import opened_of, outline, page_labels
from bindery.engine.pdf_source import (
    PAGE_SIZES,
    RunParser,
    chapters_source,
    contents,
    ends_run,
    front_matter,
    placed_design,
    preamble,
)
from bindery.engine.pieces import Kept, Piece, from_summary, read_piece
from bindery.engine.typefaces import font_dirs
from bindery.engine.typeset import Chapter, Parse
from bindery.images import Asset
from bindery.observability import logger

DESIGN = Path(__file__).resolve().parent / "book.typ"

MAX_MANUSCRIPT_BYTES = 50 * 1024 * 1024  # measured by `make bench` against the worker's timeout
RUN_BYTES = 512 * 1024  # a run of chapters is compiled once it holds this much manuscript
RUN_CHAPTERS = 50  # or this many: a run is what an edit sets again (at 100: 1,200 chapters' re-export +0.4 s)
# The first run holds a quarter of either: the typesetter sets it while the parent parses the next, so a
# book of one run's size is set in two, overlapped (on two cores), instead of parsed whole and then set.
FIRST_RUN_SHARE = 4
# Bump on any change to how a piece is compiled that neither its source nor book.typ shows: a built piece is
# kept in the book's cache under a hash of its source, book.typ, Typst's version, the fonts and this.
PIECE_VERSION = "pdf-1"
# Kept in the cache, in place of a piece set with the PDF/UA-1 claim, when its source cannot meet it.
REFUSED = b"refuses PDF/UA-1"
TIME_LIMIT_SECONDS = 240.0  # all of a book's compiles; the worker's timeout is 300 s


class PdfRenderer:
    max_manuscript_bytes = MAX_MANUSCRIPT_BYTES
    time_limit = TIME_LIMIT_SECONDS

    def __init__(self) -> None:
        self._md = markup.parser()
        self.peak_child_rss = 0  # the typesetter's most memory, over this process's builds (for the bench)
        self.runs_set = 0  # how many of its last build's runs were set, not reused (for the bench)
        self.joined = Joined(0, 0, 0)  # and what its join copied and wrote afresh

    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> Report:
        fonts = font_dirs()
        typography.configure(self._md, source.quotes)
        with tempfile.TemporaryDirectory(prefix="bindery-pdf-") as tmp:
            book = _Book(source, Path(tmp), self._md.parse, time.monotonic() + self.time_limit, fonts)
            try:
                path, report = book.typeset(chapters)
                self.runs_set, self.joined = book.runs_set, book.joined
                with path.open("rb") as pdf:
                    while chunk := pdf.read(1 << 20):
                        out.write(chunk)
            finally:
                book.compiler.close()
                self.peak_child_rss = max(self.peak_child_rss, book.compiler.peak_rss)
        return report


# A run begun: its name, chapters, opening, images, and what `_begin` gave (a piece found, or its source).
_Setting = tuple[str, list[tuple[Text, Chapter]], str, dict[str, Asset], Piece | Path]


class _Book:
    def __init__(self, source: Source, root: Path, parse: Parse, deadline: float, fonts: list[Path]):
        self.source, self.root, self.parse, self.deadline = source, root, parse, deadline
        self.page = PAGE_SIZES[source.option("page_size")]
        self.figures = Figures({a.name: a for a in source.assets}, lambda asset, alt: "")
        self.report = Report(notes=self.figures.notes)
        self.compiler = Compiler(root, fonts)
        self.standards = ["ua-1"]  # dropped, for every piece, when one cannot meet it
        self.written: set[str] = set()
        self.runs: list[Piece] = []
        self.kept: list[Piece] = []  # every piece of the book compiled or found so far
        self.engine = placed_design(root, fonts, DESIGN, PIECE_VERSION)  # book.typ, and its theme of code
        self.parser = RunParser(parse, self.page, self.engine, self.figures, self.report, source)
        self.images_of: dict[str, dict[str, Asset]] = {}  # the images a piece places, by its name
        self.cached: set[str] = set()  # the pieces kept in the book's cache (runs, contents, folios)
        self.kept_pieces = Kept(source.pieces)
        self.runs_set, self.joined = 0, Joined(0, 0, 0)
        self.begun: list[_Setting] = []  # the runs begun and not yet counted, in order (`_count`)
        self.titles: list[list[tuple[str, bool]]] = []  # each run's chapters' titles, and whether listed
        self.front: Piece | Path | None = None  # the title page and imprint: sent first (`typeset`)
        (root / "img").mkdir()
        self.compiler.start()  # last, so nothing here fails with it running; it loads as chapters are parsed

    # ---- the body ----------------------------------------------------------------------------------

    def typeset(self, chapters: Iterable[Text]) -> tuple[Path, Report]:
        # The title page and imprint need no chapter's page: set while the first run is parsed (or found).
        self.front = self._begin("front", front_matter(self.source, self.page))
        run: list[Text] = []
        size = 0
        for chapter in chapters:
            run.append(chapter)
            size += chapter.size
            # The first run is a quarter of the others: it is set while the next is parsed.
            share = 1 if self.runs or self.begun else FIRST_RUN_SHARE
            if ends_run(size, len(run), chapter.title, RUN_BYTES // share, RUN_CHAPTERS // share):
                self._start_run(run)
                run, size = [], 0
        if run:
            self._start_run(run)
        self._free()
        if self.runs:
            if self.parser.pages:  # (else no run holds a page reference: none is read again)
                page_refs.number(self.runs, self._set_again)
            self.runs[-1].blank_after = False  # nothing follows the last chapter
        return self._bound(), self.report

    def _start_run(self, texts: list[Text]) -> None:
        """Parse a run of chapters, while the typesetter sets the piece before, and begin it (`_begin`). A run
        found in the cache is counted later, so a build goes on finding runs while one is set again."""
        run, body = self.parser.parsed(texts)
        name = f"run-{len(self.runs) + len(self.begun) + 1}"
        images = {object_id: asset for _, body in run for object_id, asset in body.images.items()}
        # Set as if it opened the book, without folios (see join): the same run is the same piece wherever
        # it falls, so a later build reuses it even when the pages before it moved.
        opening = preamble(self.source, self.page, 1, "1", folios=False)
        begun = self._begin(name, opening + body, images=images, reused=True)
        if isinstance(begun, Piece):
            self.kept.append(begun)  # now: were the claim dropped before it is counted, it is set again
        self.begun.append((name, run, opening, images, begun))

    def _free(self) -> None:
        """Wait for the piece being set: count every run begun, in order, finish the front matter, then keep
        the chapters parsed since (`RunParser.flush`), after their runs before: as a warm build finds them."""
        begun, self.begun = self.begun, []
        for setting in begun:
            self._count(setting)
        if isinstance(self.front, Path):
            self.front = self._finish(self.front, keep=True)
        self.parser.flush()

    def _count(self, setting: _Setting) -> None:
        """A run begun, done and counted, and its chapters' titles (their pages are `opened_of` it)."""
        name, run, opening, images, begun = setting
        try:
            piece = begun if isinstance(begun, Piece) else self._finish(begun, keep=True)
        except CompileError:
            # Typst refused the run: find the chapters it refuses alone, set them as unrendered, go on.
            # (This run is not kept in the cache: a hit would not know which chapters it set as unrendered.)
            for n, (chapter, alone) in enumerate(run):
                try:
                    self._compile(f"{name}-{n}", opening + alone.source, images=images)
                except CompileError as exc:
                    self.report.skipped.append(skipped(chapter, exc))
                    run[n] = (chapter, self.parser.unrendered(chapter))
            piece = self._compile(name, opening + chapters_source(run), keep=True, images=images)
        piece.blank_after = piece.pages % 2 == 1
        self.runs.append(piece)
        self.titles.append([(chapter.title, body.listed) for chapter, body in run])

    def _set_again(self, run: Piece, source: str) -> Piece:
        """A run set again with the pages its references name (`bindery.engine.page_refs`)."""
        self.kept.remove(run)
        name = run.path.stem
        return self._compile(name, source, keep=True, images=self.images_of[name], reused=True)

    def _compile(
        self, name: str, source: str, *, keep: bool = False, images: dict[str, Asset] | None = None,
        reused: bool = False,
    ) -> Piece:  # fmt: skip
        """Compile one piece, placing `images`; `keep` it among the book's pieces (a trial compile of one
        chapter is not). A piece `reused` is taken from the book's cache of built pieces when it holds one
        of the same source, and kept there when it did not."""
        return self._finish(self._begin(name, source, images=images, reused=reused), keep=keep)

    def _begin(
        self, name: str, source: str, *, images: dict[str, Asset] | None = None, reused: bool = False
    ) -> Piece | Path:
        """A piece found in the cache, or its source, sent to the typesetter (`_finish` waits for it)."""
        path = self.root / f"{name}.typ"
        path.write_text(source)
        self.images_of[name] = images or {}
        if reused:
            self.cached.add(name)
            if (found := self._found(path)) is not None:
                return found
        claimed = self.standards
        self._free()  # the typesetter sets one piece at a time
        if reused and self.standards != claimed and (found := self._found(path)) is not None:
            return found  # the claim was dropped meanwhile: the cache may hold the piece set without it
        self._send(path)
        return path

    def _found(self, path: Path) -> Piece | None:
        if self._reuse(path):
            try:
                return self._read(path, hit=True)
            except Exception:  # checked whole, yet not a piece pikepdf reads: set it, as any miss
                logger.warning("a reused piece does not open; setting it again", extra={"piece": path.stem})
        return None

    def _finish(self, begun: Piece | Path, *, keep: bool) -> Piece:
        if isinstance(begun, Path):  # sent: set it
            self._set(begun)
            begun = self._read(begun, hit=False)
        self.kept += [begun] if keep else []
        return begun

    def _send(self, path: Path) -> None:
        """Send a piece to the typesetter, its images written first (a piece reused wrote none)."""
        self._write_images(self.images_of[path.stem])
        if path.stem.startswith("run-") and path.stem.count("-") == 1:  # a run, not a trial of one chapter
            self.runs_set += 1
        self.compiler.send(path, path.with_suffix(".pdf"), **self._how(path))

    def _set(self, path: Path) -> None:
        """Wait for a piece sent, and keep it in the cache, if it is kept there."""
        try:
            self.compiler.receive()
        except CompileError as exc:
            if not self.standards or "PDF/UA" not in str(exc):
                raise
            # PDF/UA-1 asks what a book may lack (a text alternative for something, say): the book is then
            # tagged PDF without the claim. The cache remembers that this piece refuses it, so a later build
            # drops the claim at once rather than set the piece only to be refused again.
            self._keep(path, REFUSED)
            self._drop_claim(exc)
            self.compiler.compile(path, path.with_suffix(".pdf"), **self._how(path))
        self._keep(path, path.with_suffix(".pdf").read_bytes())

    def _drop_claim(self, cause: Exception) -> None:
        """Set the book as tagged PDF without the PDF/UA-1 claim, every piece alike: the ones kept so far
        are set again (or found so set in the cache)."""
        self.standards = []
        for earlier in self.kept:
            path = earlier.path.with_suffix(".typ")
            if not (path.stem in self.cached and self._reuse(path)):
                self._write_images(self.images_of[path.stem])
                self.compiler.compile(path, path.with_suffix(".pdf"), **self._how(path))
                self._keep(path, earlier.path.read_bytes())
            again = self._read(path, hit=path.stem in self.cached)
            if (again.pages, again.marks) != (earlier.pages, earlier.marks):
                # Its pages were counted into every later piece's folios and the contents.
                raise CompileError(f"{earlier.path.name} set out differently without PDF/UA-1") from cause
            earlier.size, earlier.page_objects = again.size, again.page_objects
            earlier.keys, earlier.digest = again.keys, again.digest

    def _how(self, path: Path) -> dict[str, Any]:
        """How a piece is compiled: with the claim or not, in the build's time left, dated (`_dated`)."""
        seconds = self.deadline - time.monotonic()
        return {"standards": self.standards, "seconds": seconds, "timestamp": self._dated(path.stem)}

    def _dated(self, name: str) -> int:
        """The date a piece is compiled with: the revision's for the title page's piece and the cover, one
        of which is first, whose catalog is the book's; 0 for the contents, the runs and their folios, so
        they are the same pieces whatever the revision (the join keeps no date of theirs)."""
        return int(self.source.modified) if name in ("front", "cover") else 0

    # ---- the cache of built pieces -------------------------------------------------------------------

    def _lookup(self, path: Path) -> str:
        """A piece's key: everything its PDF depends on. Its source holds the text it sets, the chapters'
        titles and the images' object ids (whose bytes are never rewritten); the engine, the design and
        the fonts; and how it is compiled (its date, and whether the PDF/UA-1 claim is made)."""
        digest = hashlib.sha256(json.dumps([self.engine, self.standards, self._dated(path.stem)]).encode())
        digest.update(b"\0" + path.read_bytes())
        return digest.hexdigest()

    def _reuse(self, path: Path) -> bool:
        """Whether the book's cache held this piece, now written where its compile would have put it."""
        found = self.kept_pieces.find(self._lookup(path))
        if found == REFUSED and self.standards:
            self._free()  # the piece being set, and every run begun, set again without the claim too
            self._drop_claim(CompileError(f"{path.name} refused PDF/UA-1 in an earlier build"))
            found = self.kept_pieces.find(self._lookup(path))
        if found is None or found == REFUSED:
            return False
        path.with_suffix(".pdf").write_bytes(found)
        return True

    def _read(self, path: Path, *, hit: bool) -> Piece:
        """The piece compiled from `path`: for one taken from the cache, what an earlier build read of it
        (when it is these bytes), else read (and, for a piece kept in the cache, kept beside it)."""
        pdf, kept = path.with_suffix(".pdf"), path.stem in self.cached and self.source.pieces is not None
        lookup = f"read:{self._lookup(path)}"
        found = self.kept_pieces.find(lookup) if hit and kept else None
        piece = from_summary(pdf, found) if found is not None else None
        if piece is None:
            piece = read_piece(pdf)
            if kept:
                self.kept_pieces.keep(lookup, piece.summary())
        return piece

    def _keep(self, path: Path, data: bytes) -> None:
        if path.stem in self.cached:
            self.kept_pieces.keep(self._lookup(path), data)

    def _write_images(self, images: dict[str, Asset]) -> None:
        for object_id, asset in images.items():
            if object_id not in self.written:
                with (self.root / image_file(asset)).open("wb") as file:
                    for piece in self.source.read_asset(asset):
                        file.write(piece)
                self.written.add(object_id)

    # ---- the front matter and the join -------------------------------------------------------------

    def _bound(self) -> Path:
        source, meta = self.source, self.source.metadata
        pieces: list[Piece] = []
        # The title page and imprint (which names the revision); the contents, reused while no page moved.
        front = self.front
        assert isinstance(front, Piece)  # finished by `_free`
        self.opened = opened_of(self.runs, self.titles)
        front.blank_after = front.pages % 2 == 1
        listed, targets = contents(source, self.page, self.opened, GOTO, front.pages + front.blank_after + 1)
        toc = self._compile("contents", listed, keep=True, reused=True)
        toc.blank_after = toc.pages % 2 == 1 and bool(self.runs)
        cover = next((a for a in source.assets if a.name == meta.cover), None)
        if cover is not None:
            alt = literal(f"The cover of {source.title}")
            page = f"#cover({literal(image_file(cover))}, {alt})\n"
            images = {cover.object_id: cover}
            opening = preamble(self.source, self.page, 1, "i")
            pieces.append(self._compile("cover", opening + page, keep=True, images=images))
            # Its verso is left blank, so the title page, and every chapter after it, is a recto.
            pieces[0].blank_after = True
        pieces += [front, toc]
        # The chapters' runs were compiled before the front matter knew their pages (and, if a later
        # piece dropped PDF/UA-1, compiled again without it: see _compile).
        before = sum(p.pages + p.blank_after for p in pieces)  # pages before the body's page 1
        pieces += self.runs
        out = self.root / "book.pdf"
        self.joined = join(
            pieces,
            out,
            outline=outline(self.opened, before),
            labels=page_labels(cover is not None, before if self.runs else None),
            targets={n: (before + number - 1, top) for n, (number, top) in targets.items()},
            contents=pieces.index(toc),
            folios=Folios(self._folio_sheets(), pieces.index(self.runs[0])) if self.runs else None,
            kept=self.kept_pieces if source.pieces is not None else None,
        )
        return out

    def _folio_sheets(self) -> list[Piece]:
        """The body's folios, a sheet for each run, a page for each of its pages: the runs were set without
        them (see join). A run's sheet is the same piece while the run starts on the same page."""
        sheets, first = [], 1
        for n, run in enumerate(self.runs):
            shown = [*run.shown, *[False] * run.blank_after]
            flags = "".join("true," if on else "false," for on in shown)
            opening = preamble(self.source, self.page, first, "1")
            sheet = self._compile(f"folios-{n}", opening + f"#folio-sheet(({flags}))\n", reused=True)
            sheet.shown = shown
            sheets.append(sheet)
            first += len(shown)
        return sheets


RENDERER = PdfRenderer()
