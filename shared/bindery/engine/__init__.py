"""The engine: a registry of renderers, one module each, imported only when a build needs it.

A renderer streams: it is handed the book and an iterator of (chapter, text) and writes bytes to `out` as
it goes, so a build holds one chapter in memory at a time, never the whole book.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import import_module
from typing import Protocol

# format -> module. Submit reads only the names; a build imports the one it needs.
FORMATS: dict[str, str] = {
    "markdown": "bindery.engine.markdown",
    "html": "bindery.engine.html",
}


@dataclass(frozen=True)
class Source:
    """What a renderer knows of a book: its title and the titles of its chapters, in order."""

    title: str
    chapter_titles: tuple[str, ...]


class Sink(Protocol):
    """Where a renderer writes: an S3 upload in a build, a BytesIO in a test."""

    def write(self, data: bytes, /) -> int: ...


class Renderer(Protocol):
    extension: str
    content_type: str

    def render(self, source: Source, chapters: Iterable[tuple[int, str, str]], out: Sink) -> None:
        """Write the artifact. `chapters` yields (ordinal, title, markdown text) one at a time."""


def renderer_for(fmt: str) -> Renderer:
    module = import_module(FORMATS[fmt])
    renderer: Renderer = module.RENDERER
    return renderer


def extension_for(fmt: str) -> str:
    return renderer_for(fmt).extension
