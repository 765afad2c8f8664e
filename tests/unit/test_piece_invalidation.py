"""Invalidation is total: random sequences of edits to a book (a chapter edited, added, removed or moved; its
metadata changed; an image replaced or deleted; an option changed; a renderer's piece version bumped; a
heading that other chapters link to renamed; a link reference or note definition moved to another
chapter), and after each step the warm epub and html, each rendered against the book's anchors as its cut
finds them, built with the book's cache of built pieces in S3 (bindery/piece_cache.py, as a build uses
it), equal cold ones byte for byte, and so do their reports.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import boto3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from bindery import engine
from bindery.config import Settings
from bindery.engine import epub, html, markup
from bindery.engine.anchors import Anchors
from bindery.images import Asset
from bindery.manuscript import cut
from bindery.metadata import Metadata
from bindery.objects import Objects
from bindery.piece_cache import BuildPieces
from tests.books.illustrated import picture

NAMES = ("images/a.png", "images/b.png", "images/c.png")
BLOCKS = (
    "Plain words.",
    "## A section",
    "### A subsection",
    "Text with a note.[^n]\n\n[^n]: The note.",
    "![A picture](images/a.png)",
    "![](images/b.png)",
    "![Not there](images/c.png)",
    "```\ncode <here>\n```",
    "- one\n- two",
    "Ünïcödé and العربية.",
    "> quoted",
    # What a chapter may ask of the rest of the book (bindery.engine.anchors): a heading's id, a label, a
    # heading's words, a note defined elsewhere; and the definitions, which a step moves between chapters.
    "See [the section](#a-section), [the start](#one) and [nowhere](#no-such-id).",
    "[A section], [Two] and [the site][site].",
    "A far note.[^far]",
)
DEFINITIONS = (
    "[site]: https://example.org/a",
    "[^far]: Defined far away.",
    "[site]: https://example.org/b",
    "[^far]: Defined elsewhere.",
)
MODULES = {"epub": epub, "html": html}
# Chapters that show two images, so that an image replaced or deleted meets a piece that depends on it, and
# one that asks of the book what another (Three) defines.
FIRST_CHAPTERS = (
    ("One", BLOCKS[0]),
    ("Two", f"{BLOCKS[4]}\n\n{BLOCKS[1]}\n\n{BLOCKS[11]}\n\n{BLOCKS[12]}\n\n{BLOCKS[13]}"),
    ("Three", f"{BLOCKS[5]}\n\n{DEFINITIONS[0]}\n\n{DEFINITIONS[1]}"),
)


@dataclass
class Book:
    """What a build reads of a book's revision: its chapters, metadata, images and an export's options."""

    chapters: list[tuple[str, str]] = field(default_factory=lambda: list(FIRST_CHAPTERS))
    title: str = "A Book"
    metadata: Metadata = field(default_factory=Metadata)
    assets: dict[str, Asset] = field(default_factory=dict)
    data: dict[str, bytes] = field(default_factory=dict)  # an object id's bytes
    toc_depth: int = 1
    revision: int = 1
    versions: int = 0  # how many times the renderers' piece versions were bumped
    uploads: int = 0

    def upload(self, name: str, width: int) -> None:
        self.uploads += 1
        object_id = f"obj{self.uploads:04d}"  # a new upload is a new object, as the service makes one
        data = picture("PNG", width, 10, seed=self.uploads)
        self.assets[name] = Asset(name, object_id, "image/png", width, 10, len(data))
        self.data[object_id] = data


chapter_text = st.lists(st.sampled_from(BLOCKS), min_size=1, max_size=4).map("\n\n".join)
title = st.sampled_from(["One", "Two", "Three", "Ünï"])
steps = st.one_of(
    st.tuples(st.just("edit"), st.integers(0, 20), chapter_text),
    st.tuples(st.just("add"), st.integers(0, 20), title, chapter_text),
    st.tuples(st.just("remove"), st.integers(0, 20)),
    st.tuples(st.just("reorder"), st.integers(0, 20), st.integers(0, 20)),
    st.tuples(st.just("retitle"), st.integers(0, 20), title),
    st.tuples(st.just("language"), st.sampled_from(["en", "fr", "ar", "he"])),
    st.tuples(st.just("authors"), st.lists(st.sampled_from(["Ann", "Bo"]), max_size=2)),
    st.tuples(st.just("cover"), st.sampled_from([None, *NAMES])),
    st.tuples(st.just("book_title"), st.sampled_from(["A Book", "Another"])),
    st.tuples(st.just("image"), st.sampled_from(NAMES), st.integers(5, 40)),
    st.tuples(st.just("delete_image"), st.sampled_from(NAMES)),
    st.tuples(st.just("toc_depth"), st.sampled_from([1, 2, 3])),
    st.tuples(
        st.just("bump"),
    ),
    st.tuples(st.just("rename"), st.integers(0, 20), st.sampled_from(["A section", "Another section"])),
    st.tuples(st.just("move_definition"), st.sampled_from(DEFINITIONS), st.integers(0, 20)),
)


def apply(book: Book, step: tuple[Any, ...]) -> None:
    kind, *args = step
    chapters = book.chapters
    if kind == "edit":
        n, text = args
        chapters[n % len(chapters)] = (chapters[n % len(chapters)][0], text)
    elif kind == "add":
        n, name, text = args
        chapters.insert(n % (len(chapters) + 1), (name, text))
    elif kind == "remove" and len(chapters) > 1:
        chapters.pop(args[0] % len(chapters))
    elif kind == "reorder":
        a, b = args[0] % len(chapters), args[1] % len(chapters)
        chapters[a], chapters[b] = chapters[b], chapters[a]
    elif kind == "retitle":
        n, name = args
        chapters[n % len(chapters)] = (name, chapters[n % len(chapters)][1])
    elif kind == "language":
        book.metadata = replace(book.metadata, language=args[0])
    elif kind == "authors":
        book.metadata = replace(book.metadata, authors=tuple(args[0]))
    elif kind == "cover":
        book.metadata = replace(book.metadata, cover=args[0])
    elif kind == "book_title":
        book.title = args[0]
    elif kind == "image":
        book.upload(*args)
    elif kind == "delete_image":
        book.assets.pop(args[0], None)
    elif kind == "toc_depth":
        book.toc_depth = args[0]
    elif kind == "bump":
        book.versions += 1
    elif kind == "rename":
        n, name = args  # the chapter's first second-level heading, which links elsewhere may name
        at = n % len(chapters)
        lines = chapters[at][1].split("\n")
        first = next((i for i, line in enumerate(lines) if line.startswith("## ")), None)
        if first is not None:
            lines[first] = f"## {name}"
        chapters[at] = (chapters[at][0], "\n".join(lines))
    elif kind == "move_definition":
        definition, n = args  # the label's definition, perhaps changed, moved to chapter n
        label = definition.split(":")[0]
        chapters[:] = [
            (name, "\n\n".join(b for b in text.split("\n\n") if b.split(":")[0] != label) or BLOCKS[0])
            for name, text in chapters
        ]
        name, text = chapters[n % len(chapters)]
        chapters[n % len(chapters)] = (name, f"{text}\n\n{definition}")
    if kind != "bump":
        book.revision += 1  # every edit makes a revision (a version bump is new code, not a new revision)


HITS = {"n": 0}


def render(book: Book, fmt: str, objects: Objects | None, book_id: str) -> tuple[bytes, dict[str, Any]]:
    pieces = None
    if objects is not None:
        pieces = BuildPieces(objects, book_id, fmt, max_bytes=64 * 1024 * 1024)
        pieces.start()
    # The book as a build has it: its manuscript cut into chapters, and the anchors the cut found.
    manuscript = "".join(f"# {name}\n\n{text}\n\n" for name, text in book.chapters).encode()
    anchors = Anchors()
    sections = list(cut(manuscript.splitlines(keepends=True), anchors))
    source = engine.Source(
        book_id,
        book.title,
        book.revision,
        tuple(section.title for section in sections),
        1_700_000_000.0 + book.revision * 60,
        metadata=book.metadata,
        assets=tuple(book.assets.values()),
        options={"toc_depth": book.toc_depth},
        read_asset=lambda asset: iter([book.data[asset.object_id]]),
        pieces=pieces,
        anchors=anchors,
    )
    texts = [
        engine.Text(n, section.title, manuscript[section.offset : section.offset + section.length].decode())
        for n, section in enumerate(sections, start=1)
    ]
    out = io.BytesIO()
    module = MODULES[fmt]
    renderer: Any = module.RENDERER
    original, parser = module.PIECE_VERSION, renderer._md
    if book.versions:
        # A new renderer: it renders otherwise (its paragraphs carry its version), and says so by its
        # piece version.
        module.PIECE_VERSION = f"{original}+{book.versions}"  # type: ignore[attr-defined]
        renderer._md = markup.parser(xhtml=fmt == "epub")
        if fmt == "epub":
            markup.with_note_roles(renderer._md)
        mark = f'<p class="v{book.versions}">'
        renderer._md.add_render_rule("paragraph_open", lambda *_: mark)
    try:
        report = renderer.render(source, texts, out)
    finally:
        module.PIECE_VERSION, renderer._md = original, parser  # type: ignore[attr-defined]
    if pieces is not None:
        pieces.finish()
        HITS["n"] += pieces.counts.hits
    return out.getvalue(), {"skipped": report.skipped, "notes": asdict(report.notes)}


def test_after_every_random_edit_a_warm_build_equals_a_cold_one() -> None:
    config = Settings(bucket="bindery-pieces-hypothesis")
    examples = {"n": 0, "hits": 0}
    with mock_aws():
        boto3.client("s3", region_name=config.region).create_bucket(Bucket=config.bucket)
        objects = Objects(config)

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(edits=st.lists(steps, min_size=1, max_size=8))
        def holds(edits: list[tuple[Any, ...]]) -> None:
            examples["n"] += 1
            book_id = f"book{examples['n']:05d}"  # a book of each example's own: a fresh cache
            book = Book()
            book.upload(NAMES[0], 20)
            book.upload(NAMES[1], 30)
            for fmt in MODULES:  # the first, cold build fills the cache
                assert render(book, fmt, objects, book_id) == render(book, fmt, None, book_id)
            for step in edits:
                apply(book, step)
                for fmt in MODULES:
                    warm = render(book, fmt, objects, book_id)
                    assert warm == render(book, fmt, None, book_id), (fmt, step)

        holds()
    assert examples["n"] >= 60
    assert HITS["n"] > 100  # and warm builds did reuse pieces
