"""The engine: a registry of renderers, one module each, imported only when a build needs it.

A renderer streams: it is handed the book and an iterator of chapter texts and writes bytes to `out` as
it goes, so a build holds one chapter in memory at a time, never the whole book. A chapter it cannot
render is skipped and named in what `render` returns; the build goes on without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import import_module
from typing import NamedTuple, Protocol


@dataclass(frozen=True)
class Format:
    """What the rest of Bindery knows of a format without importing its renderer: a submit checks the name,
    a poll names the download, and only a build imports `module`."""

    module: str
    extension: str
    content_type: str


FORMATS: dict[str, Format] = {
    "markdown": Format("bindery.engine.markdown", "md", "text/markdown; charset=utf-8"),
    "html": Format("bindery.engine.html", "html", "text/html; charset=utf-8"),
    "epub": Format("bindery.engine.epub", "epub", "application/epub+zip"),
    "pdf": Format("bindery.engine.pdf", "pdf", "application/pdf"),
}
# Formats whose artifact is the revision's normalised manuscript itself: a build copies it server-side and
# reads no chapter.
COPIES_MANUSCRIPT = frozenset({"markdown"})


@dataclass(frozen=True)
class Source:
    """What a renderer knows of a book before its chapters arrive."""

    book_id: str
    title: str
    revision: int
    chapter_titles: tuple[str, ...]
    modified: float = 0.0  # when this revision was made, as epoch seconds
    language: str = "en"


class Text(NamedTuple):
    ordinal: int
    title: str
    markdown: str


Skipped = dict[str, object]  # {"ordinal": 3, "title": "...", "reason": "..."}


class Sink(Protocol):
    """Where a renderer writes: an S3 upload in a build, a BytesIO in a test."""

    def write(self, data: bytes, /) -> int: ...


class Renderer(Protocol):
    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> list[Skipped]:
        """Write the artifact; return the chapters that could not be rendered, and why."""


def renderer_for(fmt: str) -> Renderer:
    module = import_module(FORMATS[fmt].module)
    renderer: Renderer = module.RENDERER
    return renderer


def skipped(text: Text, exc: BaseException) -> Skipped:
    return {"ordinal": text.ordinal, "title": text.title, "reason": f"{type(exc).__name__}: {exc}"[:300]}
