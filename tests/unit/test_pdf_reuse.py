"""The PDF's pieces in the book's cache (bindery/engine/pdf.py, bindery/engine/join.py): the body's runs are
set without folios, as if each opened the book, so a run is the same piece wherever it falls. A warm build
equals a cold one byte for byte, sets again only the runs whose own chapters changed even when every later
page moved, lays each folio on its page, and survives a damaged piece, a pack the GC removed mid-build and a
write whose answer was lost.
"""

from __future__ import annotations

import io
from dataclasses import asdict
from pathlib import Path
from typing import Any

import boto3
import pikepdf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from bindery import engine
from bindery.config import Settings
from bindery.engine import pdf, segments
from bindery.objects import Objects, cut_key
from bindery.piece_cache import BuildPieces
from tests.unit.conftest import Stack
from tests.unit.test_piece_cache import CHAPTERS, _book, _built, _edit, _head, _pack_key
from tests.unit.test_piece_invalidation import Book, apply, steps
from tests.validators import pdftotext

RENDERER: Any = engine.renderer_for("pdf")
WORDS = " ".join(f"word{n} and some more of the ordinary words a chapter holds." for n in range(60))


def _chapter(n: int, paragraphs: int) -> str:
    return f"# Chapter {n}\n\n" + "\n\n".join([WORDS] * paragraphs) + "\n"


@pytest.fixture
def short_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of one or two chapters, so that a book of a few chapters is set in several."""
    monkeypatch.setattr(pdf, "RUN_CHAPTERS", 2)


def _folios(data: bytes, path: Path) -> list[tuple[str, str]]:
    """Each body page's label and the last line of its text (its folio, or "" on a blank page)."""
    with pikepdf.open(io.BytesIO(data)) as book:
        labels = [page.label for page in book.pages]
    path.write_bytes(data)
    pages = pdftotext(path).split("\f")[:-1]
    body = labels.index("1")
    return [(labels[n], (pages[n].strip().splitlines() or [""])[-1].strip()) for n in range(body, len(pages))]


def test_a_chapter_that_grows_by_pages_sets_again_only_its_own_run(
    stack: Stack, short_runs: None, tmp_path: Path
) -> None:
    book = stack.create_book("".join(_chapter(n, 2) for n in range(1, 9)), title="Runs")
    first, _ = _built(stack, book, "pdf")
    assert RENDERER.runs_set >= 4  # the book is set in several runs, all cold
    # Chapter 1 grows by pages: every later page moves, and so does every later chapter's opening.
    _edit(stack, book, [_chapter(1, 9), *(_chapter(n, 2) for n in range(2, 9))])
    warm, report = _built(stack, book, "pdf")
    assert RENDERER.runs_set == 1  # its own run alone; every later one came from the cache as it was
    joined = RENDERER.joined
    assert (warm, report) == _built(stack, book, "pdf", cache=False)
    runs = RENDERER.runs_set
    assert runs >= 4
    # The join copied every later run as the last one wrote it (a run's numbers are its own: they did not
    # move), and wrote the grown run afresh, and every folio sheet (each run's first page moved), and the
    # contents (their pages moved).
    assert (joined.copied, joined.written) == (runs - 1, runs + 2)
    before, after = _folios(first, tmp_path / "first.pdf"), _folios(warm, tmp_path / "warm.pdf")
    assert len(after) > len(before) + 2
    # Each page with text shows its own label as its folio, the moved pages included; blank versos none.
    assert all(folio in (label, "") for label, folio in after) and sum(f == "" for _, f in after) >= 1
    assert [label for label, folio in after if folio] == [folio for _, folio in after if folio]


def test_a_warm_build_finds_the_runs_after_an_edited_one_while_it_is_set_and_reuses_the_contents(
    stack: Stack, short_runs: None
) -> None:
    from bindery.engine.compiler import Compiler
    from bindery.engine.pdf_source import RunParser

    chapters = [_chapter(n, 2) for n in range(1, 9)]
    book = stack.create_book("".join(chapters), title="Runs")
    _built(stack, book, "pdf")
    runs = RENDERER.runs_set
    chapters[4] = chapters[4].replace("word7 ", "word8 ", 1)  # a word: no page moves
    _edit(stack, book, chapters)
    events: list[str] = []
    parsed, send, receive = RunParser.parsed, Compiler.send, Compiler.receive

    def parsing(self: RunParser, texts: list[Any]) -> object:
        events.append("parse")
        return parsed(self, texts)

    def sending(self: Compiler, source: Path, output: Path, **kwargs: object) -> None:
        events.append(f"send {source.stem}")
        send(self, source, output, **kwargs)

    def receiving(self: Compiler) -> list[str]:
        events.append("receive")
        return receive(self)

    with pytest.MonkeyPatch.context() as spies:
        spies.setattr(RunParser, "parsed", parsing)
        spies.setattr(Compiler, "send", sending)
        spies.setattr(Compiler, "receive", receiving)
        warm = _built(stack, book, "pdf")
    # The title page and imprint (they name the revision) and the edited chapter's run are set; the
    # contents, no page having moved, and every folio sheet are found in the cache.
    sent = [event for event in events if event.startswith("send")]
    assert len(sent) == 2 and sent[0] == "send front" and sent[1].startswith("send run-"), events
    # The runs after the edited one are found while it is set: its answer is awaited after every parse.
    after = events[events.index(sent[1]) + 1 :]
    assert after.count("parse") == runs - int(sent[1].split("-")[1]) > 0
    assert after[-1] == "receive" and after[:-1] == ["parse"] * (len(after) - 1), events
    assert warm == _built(stack, book, "pdf", cache=False)


def test_a_cold_build_sends_the_typesetter_the_same_sources_with_the_cache_on_or_off(
    stack: Stack, short_runs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `make bench` counts of the cache's cost in a cold pdf is the worker's process alone: the
    typesetter's work is the same either way, the same sources in the same order."""
    import hashlib

    from bindery.engine.compiler import Compiler

    sent: list[tuple[str, str]] = []
    send = Compiler.send

    def sending(self: Compiler, source: Path, output: Path, **kwargs: object) -> None:
        sent.append((source.name, hashlib.sha256(source.read_bytes()).hexdigest()))
        send(self, source, output, **kwargs)

    monkeypatch.setattr(Compiler, "send", sending)
    book = stack.create_book("".join(_chapter(n, 2) for n in range(1, 9)), title="Runs")
    off = _built(stack, book, "pdf", cache=False)
    without, sent[:] = list(sent), []
    assert _built(stack, book, "pdf") == off  # the first with the cache: nothing in it
    assert sent == without and len(without) > 8  # runs, the front, the contents, the folios


def test_a_warm_pdf_reads_no_text_but_the_edited_chapters(stack: Stack) -> None:
    """Runs are sized by each chapter's bytes as its cut's list gives them, and a chapter found in the cache
    is kept with its heading and direction: the text of a chapter not edited is never read."""
    book = _book(stack)
    _built(stack, book, "pdf")
    _edit(stack, book, [*CHAPTERS[:4], "# Home\n\nThe end, again.\n"])
    ranges: list[tuple[str, str | None]] = []

    def seen(params: dict[str, Any], **_: Any) -> None:
        ranges.append((params["Key"], params.get("Range")))

    stack.objects.client.meta.events.register("before-parameter-build.s3.GetObject", seen)
    try:
        _built(stack, book, "pdf")
    finally:
        stack.objects.client.meta.events.unregister("before-parameter-build.s3.GetObject", seen)
    found = stack.store.books.read_book(book)
    assert found is not None and RENDERER.runs_set == 1
    last = stack.store.books.read_chapters(book, found.cut)[-1]
    assert [r for k, r in ranges if k == cut_key(book, found.cut)] == [f"bytes={last.offset}-"]


def test_a_warm_pdf_of_many_runs_reads_its_pack_forward_in_one_get(stack: Stack, short_runs: None) -> None:
    """A run's chapters are parsed while the run before is set; a cold build keeps them after that run, in
    the order a warm build finds them, so the warm one never steps back in the pack (a ranged GET a run)."""
    book = stack.create_book("".join(_chapter(n, 2) for n in range(1, 9)), title="Runs")
    first = _built(stack, book, "pdf")
    assert RENDERER.runs_set >= 4
    read: list[str] = []

    def reading(params: dict[str, Any], **_: Any) -> None:
        read.append(params["Key"])

    event = "before-parameter-build.s3.GetObject"
    stack.objects.client.meta.events.register(event, reading)
    try:
        assert _built(stack, book, "pdf") == first and RENDERER.runs_set == 0
    finally:
        stack.objects.client.meta.events.unregister(event, reading)
    prefix = f"books/pieces/{book}/pdf/"
    packs = [key for key in read if key.startswith(prefix) and key != prefix + "head"]
    assert len(packs) == 1, read


def test_a_warm_build_of_the_same_revision_sets_nothing(stack: Stack) -> None:
    book = _book(stack)
    first = _built(stack, book, "pdf")
    assert _built(stack, book, "pdf") == first and RENDERER.runs_set == 0
    # The run, its folios and the contents, copied.
    assert (RENDERER.joined.copied, RENDERER.joined.written) == (3, 0)
    entries = _head(stack, book, "pdf")["entries"]
    # Each chapter parsed; that the run refuses PDF/UA-1 (a picture without alt text), so a warm build drops
    # the claim without trying it again; the run, the contents and the folios, each with what was read of
    # it (bindery.engine.pieces); and, as the join wrote them, the folios, the run and the contents
    # (bindery.engine.segments). (Not the cover, nor the title page and imprint: they name the revision.)
    assert len(entries) == len(CHAPTERS) + 10 and entries[len(CHAPTERS)][5] < 100
    kinds = [entry[0].split(":")[0] if ":" in entry[0] else "pdf" for entry in entries[len(CHAPTERS) + 1 :]]
    assert kinds == ["pdf", "read", "pdf", "read", "pdf", "read", "joined", "joined", "joined"]
    # Every pdf piece is kept deflated (index 7, how: "z"): Typst leaves all but its streams as they are.
    assert {entry[7] for entry in entries[len(CHAPTERS) :]} == {"z"}
    # The image names each chapter's parse resolved, and the labels it looked up in the book (`[^1]`, a
    # note's, is looked up as a link's label first, as markdown-it reads it).
    names = [entry[2] for entry in entries[:3]]
    assert names == [["images/coast.png"], ["[^1", "images/coast.png"], ["images/missing.png"]]


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_a_damaged_pdf_piece_is_set_again(stack: Stack, damage: str) -> None:
    book = _book(stack)
    _built(stack, book, "pdf")
    key = _pack_key(stack, book, "pdf")
    data = stack.objects.client.get_object(Bucket=stack.services.settings.bucket, Key=key)["Body"].read()
    damaged = data[: len(data) // 2] if damage == "truncated" else data[:40] + b"#" + data[41:]
    stack.objects.put_bytes(key, damaged, "application/octet-stream")
    assert _built(stack, book, "pdf") == _built(stack, book, "pdf", cache=False)
    # What was damaged was built again and kept whole: the next build sets nothing.
    assert _built(stack, book, "pdf") == _built(stack, book, "pdf", cache=False)
    _built(stack, book, "pdf")
    assert RENDERER.runs_set == 0


def test_a_written_run_kept_whole_but_not_one_is_written_afresh(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the join kept passes its SHA-256 yet is not what this code reads (kept by code that wrote
    another layout under the same version, say): the join writes the piece afresh, and keeps it right."""
    book = _book(stack)
    with monkeypatch.context() as patched:
        patched.setattr(segments, "pack", lambda written, part: b"not a written piece")
        _built(stack, book, "pdf")
    warm = _built(stack, book, "pdf")
    assert (RENDERER.runs_set, RENDERER.joined.copied, RENDERER.joined.written) == (0, 0, 3)
    assert warm == _built(stack, book, "pdf", cache=False)
    _built(stack, book, "pdf")
    assert (RENDERER.joined.copied, RENDERER.joined.written) == (3, 0)


def test_a_pdf_pack_the_gc_removes_in_the_middle_of_a_build_is_set_again(stack: Stack) -> None:
    book = _book(stack)
    _built(stack, book, "pdf")
    key = _pack_key(stack, book, "pdf")

    def gc_first(model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name == "GetObject" and params.get("Key") == key:
            stack.objects.client.delete_object(Bucket=params["Bucket"], Key=key)

    stack.objects.client.meta.events.register("before-parameter-build.s3.GetObject", gc_first)
    try:
        warm = _built(stack, book, "pdf")
    finally:
        stack.objects.client.meta.events.unregister("before-parameter-build.s3.GetObject", gc_first)
    assert RENDERER.runs_set == 1
    assert warm == _built(stack, book, "pdf", cache=False)
    assert key.rsplit("/", 1)[1] not in _head(stack, book, "pdf")["packs"]


# ---- random edits -------------------------------------------------------------------------------------

HITS = {"n": 0}
grow = st.tuples(st.just("grow"), st.integers(0, 20), st.integers(1, 6))
pdf_steps = st.one_of(steps, grow)


def _render(book: Book, objects: Objects | None, book_id: str, design: Path) -> tuple[bytes, dict[str, Any]]:
    pieces = None
    if objects is not None:
        pieces = BuildPieces(objects, book_id, "pdf", max_bytes=64 * 1024 * 1024)
        pieces.start()
    source = engine.Source(
        book_id,
        book.title,
        book.revision,
        tuple(name for name, _ in book.chapters),
        1_700_000_000.0 + book.revision * 60,
        metadata=book.metadata,
        assets=tuple(book.assets.values()),
        options={"toc_depth": book.toc_depth, "page_size": "a5"},
        read_asset=lambda asset: iter([book.data[asset.object_id]]),
        pieces=pieces,
    )
    texts = [engine.Text(n, name, text) for n, (name, text) in enumerate(book.chapters, start=1)]
    out = io.BytesIO()
    original = pdf.DESIGN
    if book.versions:
        # A new design (its text a little larger): no version is bumped by hand, its bytes are in the key.
        design.write_text(original.read_text().replace("size: 10pt", f"size: {10 + book.versions / 4}pt"))
        pdf.DESIGN = design
    try:
        report = RENDERER.render(source, texts, out)
    finally:
        pdf.DESIGN = original
    if pieces is not None:
        pieces.finish()
        HITS["n"] += pieces.counts.hits
    return out.getvalue(), {"skipped": report.skipped, "notes": asdict(report.notes)}


def test_after_every_random_edit_a_warm_pdf_equals_a_cold_one(tmp_path: Path, short_runs: None) -> None:
    """As test_piece_invalidation's, for the PDF, with one more edit: a chapter grows by pages."""
    config = Settings(bucket="bindery-pdf-pieces-hypothesis")
    counts = {"examples": 0}
    design = tmp_path / "book.typ"
    with mock_aws():
        boto3.client("s3", region_name=config.region).create_bucket(Bucket=config.bucket)
        objects = Objects(config)

        @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(edits=st.lists(pdf_steps, min_size=1, max_size=5))
        def holds(edits: list[tuple[Any, ...]]) -> None:
            counts["examples"] += 1
            book_id = f"book{counts['examples']:05d}"
            book = Book()
            book.upload("images/a.png", 20)
            book.upload("images/b.png", 30)
            assert _render(book, objects, book_id, design) == _render(book, None, book_id, design)
            for step in edits:
                if step[0] == "grow":
                    n = step[1] % len(book.chapters)
                    name, text = book.chapters[n]
                    book.chapters[n] = (name, f"{text}\n\n" + "\n\n".join([WORDS] * step[2]))
                    book.revision += 1
                else:
                    apply(book, step)
                warm = _render(book, objects, book_id, design)
                assert warm == _render(book, None, book_id, design), step

        holds()
    assert counts["examples"] >= 10
    assert HITS["n"] > 10  # and warm builds did reuse pieces
