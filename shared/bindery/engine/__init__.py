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

# format -> module. Submit reads only the names; a build imports the one it needs.
FORMATS: dict[str, str] = {
    "markdown": "bindery.engine.markdown",
    "html": "bindery.engine.html",
    "epub": "bindery.engine.epub",
    "pdf": "bindery.engine.pdf",
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
    extension: str
    content_type: str

    def render(self, source: Source, chapters: Iterable[Text], out: Sink) -> list[Skipped]:
        """Write the artifact; return the chapters that could not be rendered, and why."""


def renderer_for(fmt: str) -> Renderer:
    module = import_module(FORMATS[fmt])
    renderer: Renderer = module.RENDERER
    return renderer


def extension_for(fmt: str) -> str:
    return renderer_for(fmt).extension


def skipped(text: Text, exc: BaseException) -> Skipped:
    return {"ordinal": text.ordinal, "title": text.title, "reason": f"{type(exc).__name__}: {exc}"[:300]}
