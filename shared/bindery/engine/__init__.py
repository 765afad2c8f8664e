"""The engine: a registry of renderers, one module each, imported only when a build needs it.

A renderer streams: it is handed the book and an iterator of chapter texts and writes bytes to `out` as
it goes, so a build holds one chapter in memory at a time, never the whole book. A chapter it cannot
render is skipped and named in what `render` returns; the build goes on without it.
"""

from __future__ import annotations

import gc
import hashlib
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol

from bindery import errors
from bindery.images import Asset, Notes
from bindery.metadata import Metadata

if TYPE_CHECKING:
    from bindery.engine.anchors import Anchors  # (markdown-it's, loaded by a build, not a cold poll)


@dataclass(frozen=True)
class Option:
    default: Any
    allowed: tuple[Any, ...]


TOC_DEPTH = Option(1, (1, 2, 3))  # 1: chapters; 2 and 3: their ## and ### headings too
PAGE_SIZE = Option("a5", ("a5", "a4", "letter", "6x9in"))
# Figures and tables: "Figure 7" through the book, or "Figure 3.2" in each chapter (`engine.crossrefs`).
FIGURE_NUMBERS = Option("book", ("book", "chapter"))
# The pdf's numbered references with their targets' pages: "Figure 3 on page 41" (`engine.page_refs`).
REFERENCE_PAGES = Option("off", ("off", "on"))
# Quotes as the book's language sets them, dashes and ellipses (`engine.typography`); off: as typed.
TYPOGRAPHY = Option("on", ("on", "off"))


@dataclass(frozen=True)
class Format:
    """What the rest of Bindery knows of a format without importing its renderer: a submit checks the name,
    a poll names the download, and only a build imports `module`."""

    module: str
    extension: str
    content_type: str
    options: dict[str, Option] = field(default_factory=dict)


_BOOK_OPTIONS = {"toc_depth": TOC_DEPTH, "figure_numbers": FIGURE_NUMBERS, "typography": TYPOGRAPHY}
FORMATS: dict[str, Format] = {
    "markdown": Format("bindery.engine.markdown", "md", "text/markdown; charset=utf-8"),
    "html": Format("bindery.engine.html", "html", "text/html; charset=utf-8", _BOOK_OPTIONS),
    "epub": Format("bindery.engine.epub", "epub", "application/epub+zip", _BOOK_OPTIONS),
    "pdf": Format(
        "bindery.engine.pdf",
        "pdf",
        "application/pdf",
        {**_BOOK_OPTIONS, "page_size": PAGE_SIZE, "reference_pages": REFERENCE_PAGES},
    ),
    "docx": Format(
        "bindery.engine.docx",
        "docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        _BOOK_OPTIONS,
    ),
}
# A format whose file is packaged with its images as a zip (a markdown manuscript and its images/).
ZIP = Format("", "zip", "application/zip")


def format_and_options(fmt: Any, options: Any) -> tuple[str, dict[str, Any]]:
    """A known format and its options with their defaults filled in, or the 4xx that names the problem."""
    if not isinstance(fmt, str):
        raise errors.BadRequest("format must be a string", code="invalid_format", known=sorted(FORMATS))
    if fmt not in FORMATS:
        raise errors.Unprocessable(
            f"unknown format {fmt[:40]!r}; known formats: {', '.join(sorted(FORMATS))}",
            code="unknown_format",
            known=sorted(FORMATS),
        )
    return fmt, options_for(fmt, options)


def options_for(fmt: str, given: Any) -> dict[str, Any]:
    """The format's options with their defaults filled in, or a 422 that lists the known ones."""
    known = FORMATS[fmt].options
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise errors.BadRequest("options must be a JSON object", code="invalid_options")
    chosen: dict[str, Any] = {}
    for name, value in given.items():
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise errors.Unprocessable(
                f"{fmt} has no option {name[:40]!r}; its options: {listed}",
                code="unknown_option",
                known={k: list(o.allowed) for k, o in known.items()},
            )
        if isinstance(value, bool) or value not in known[name].allowed:
            raise errors.Unprocessable(
                f"options.{name} must be one of {', '.join(map(str, known[name].allowed))}",
                code="invalid_option",
                field=f"options.{name}",
                allowed=list(known[name].allowed),
            )
        # The allowed value itself, not the one equal to it: JSON's 2.0 is the integer 2 (as JSON Schema
        # counts it), and left a float it would be echoed as 2.0, reach a renderer as "1-2.0" and hash to
        # another request under the same Idempotency-Key than 2.
        allowed = known[name].allowed
        chosen[name] = allowed[allowed.index(value)]
    return {name: chosen.get(name, option.default) for name, option in known.items()}


# Formats whose artifact is the revision's normalised manuscript itself: a build copies it server-side and
# reads no chapter.
COPIES_MANUSCRIPT = frozenset({"markdown"})
# html's spool of chapters is kept in memory up to this size, and rolls over to the function's storage past
# it: a spool on disk cost a warm build of the 1,200-chapter book (7 MB of html) 15-40 ms of 330-370. (The
# epub's zip, written forward by engine.zipped, spools on disk: in memory it raised a big book's peak.)
SPOOL_IN_MEMORY = 8 * 1024 * 1024
# Formats whose renderer reuses what it built for an earlier revision from the book's cache of built pieces
# (a chapter's rendering for html and epub; a run of chapters, the front matter and the folios for pdf).
REUSES_PIECES = frozenset({"html", "epub", "pdf"})


class Pieces(Protocol):
    """Where a build finds and keeps built pieces (`bindery.piece_cache`; `engine.chapter_pieces` and
    `engine.pdf` use it)."""

    def find(self, lookup: str, key_for: Callable[[Sequence[str]], str]) -> bytes | None:
        """The piece stored under `lookup`, if its key is `key_for(the names it resolved)` and its bytes
        are whole; else None."""

    def keep(
        self, lookup: str, key: str, names: Sequence[str], data: bytes, *, compressed: bool = False
    ) -> None:
        """Keep a piece just built, for a later build; `compressed` bytes are kept as they are."""


@dataclass(frozen=True)
class Source:
    """What a renderer knows of a book before its chapters arrive."""

    book_id: str
    title: str
    revision: int
    chapter_titles: tuple[str, ...]
    modified: float = 0.0  # when this revision was made, as epoch seconds
    metadata: Metadata = field(default_factory=Metadata)
    assets: tuple[Asset, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    # The bytes of one asset, a piece at a time (a build reads them from S3; a test, from memory).
    read_asset: Callable[[Asset], Iterator[bytes]] = lambda asset: iter(())
    # The book's built pieces, for a renderer that reuses them (REUSES_PIECES); None: everything cold.
    pieces: Pieces | None = None
    # Every heading's id and chapter (`engine.anchors`), found as the book was cut; None: a cut made before
    # they were kept, whose chapters give their headings ids of their own.
    anchors: Anchors | None = None

    @property
    def language(self) -> str:
        return self.metadata.language

    def option(self, name: str) -> Any:
        return self.options.get(name, FORMATS_OPTION_DEFAULTS.get(name))

    @property
    def quotes(self) -> tuple[str, str, str, str] | None:
        """The quotes the book's text is set with (`engine.typography`), or None: set as typed."""
        from bindery.engine.typography import quotes_for

        return quotes_for(self.language) if self.option("typography") == "on" else None

    def set_titles(self) -> Source:
        """This source with its title and its chapters' set as their text is (`quotes`)."""
        from bindery.engine.typography import plain

        quotes = self.quotes
        titles = tuple(plain(title, quotes) for title in self.chapter_titles)
        return replace(self, title=plain(self.title, quotes), chapter_titles=titles)


class Text:
    """A chapter as a renderer reads it: its ordinal, title and markdown, and `digest`, the SHA-256 of its
    text's bytes, and `size`, their count. A build's text is read only when its markdown is first asked for
    (`load` gives its bytes): a chapter whose built piece is reused is found by its digest, and its text
    never read.

    Reading `markdown` may raise a StorageError: a renderer reads it before the handler that skips a
    chapter it cannot render, so that a read that failed fails the build (to be retried), never silently
    drops a chapter."""

    __slots__ = ("_digest", "_load", "_markdown", "_size", "ordinal", "title")

    def __init__(
        self,
        ordinal: int,
        title: str,
        markdown: str | None = None,
        *,
        load: Callable[[], bytes] | None = None,
        digest: str | None = None,
        size: int | None = None,
    ):
        self.ordinal, self.title = ordinal, title
        self._markdown, self._load, self._digest, self._size = markdown, load, digest, size

    @property
    def markdown(self) -> str:
        if self._markdown is None:
            if self._load is None:
                raise ValueError("a text is given its markdown or a way to load it")
            data, self._load = self._load(), None
            if self._digest is None:
                self._digest = hashlib.sha256(data).hexdigest()
            self._markdown = data.decode("utf-8", errors="replace")
        return self._markdown

    @property
    def size(self) -> int:
        """The bytes of its text (as its chapter list gives them, or counted)."""
        if self._size is None:
            self._size = len(self.markdown.encode())
        return self._size

    @property
    def digest(self) -> str:
        if self._digest is None:
            markdown = self.markdown  # a text loaded here has its digest now, taken of its bytes
            if self._digest is None:
                self._digest = hashlib.sha256(markdown.encode()).hexdigest()
        return self._digest

    def __repr__(self) -> str:
        return f"Text({self.ordinal!r}, {self.title!r})"


Skipped = dict[str, object]  # {"ordinal": 3, "title": "...", "reason": "..."}
FORMATS_OPTION_DEFAULTS = {
    "toc_depth": TOC_DEPTH.default, "page_size": PAGE_SIZE.default, "figure_numbers": FIGURE_NUMBERS.default,
    "reference_pages": REFERENCE_PAGES.default, "typography": TYPOGRAPHY.default,
}  # fmt: skip


@dataclass
class Report:
    """What a renderer says of what it wrote: the chapters it could not render, and its images' notes.
    `package` is "zip" when the artifact is the format's file zipped with its images."""

    skipped: list[Skipped] = field(default_factory=list)
    notes: Notes = field(default_factory=Notes)
    package: str | None = None


class Sink(Protocol):
    """Where a renderer writes: an S3 upload in a build, a BytesIO in a test."""

    def write(self, data: bytes, /) -> int: ...


class Renderer(Protocol):
    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> Report:
        """Write the artifact; return the chapters that could not be rendered, and why, and its notes."""


# How many passes of the collector's middle generation a full pass waits for (Python's own: 10).
FULL_PASS_EVERY = 1000


def renderer_for(fmt: str) -> Renderer:
    name = FORMATS[fmt].module
    first = name not in sys.modules
    module = import_module(name)
    if first:
        # What a worker's process has imported by its first build (boto3, PynamoDB, the renderer) lives as
        # long as the process: frozen, the collector's full passes no longer walk it, which they did twice
        # in a warm build of 1,200 chapters (about 80 ms of its 450).
        gc.freeze()
        # With so little left unfrozen, a full pass ran every tenth pass of the middle generation: 90 of
        # them in an epub of 50 MB, a sixth of its time (2.8 s of 16). A build's objects are a chapter's,
        # freed as it ends (by reference counting: markdown-it's tokens hold no cycles), so the full pass
        # waits a hundred times longer; the young generations are collected as before.
        gc.set_threshold(*gc.get_threshold()[:2], FULL_PASS_EVERY)
    renderer: Renderer = module.RENDERER
    return renderer


def skipped(text: Text, exc: BaseException) -> Skipped:
    return {"ordinal": text.ordinal, "title": text.title, "reason": f"{type(exc).__name__}: {exc}"[:300]}
