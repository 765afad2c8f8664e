"""The cache of built pieces (bindery/piece_cache.py, bindery/engine/chapter_pieces.py): a warm epub or html
build equals a cold one byte for byte, reuses every chapter that did not change, costs an exact number of
S3 calls, survives a damaged or vanished piece and a write whose answer was lost, and is bounded by the GC.

The random edit sequences that hold warm to cold after every step are in test_piece_invalidation.py.
"""

from __future__ import annotations

import errno
import io
import json
import random
import string
import threading
import time
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import moto.s3.models
import pytest
from botocore.exceptions import ReadTimeoutError

import bindery.objects
import bindery.piece_cache
import bindery.streams
import bindery.writers
from bindery import wiring
from bindery.builds import RetryLater
from bindery.faults import StorageError
from bindery.objects import cut_key
from bindery.piece_cache import MAX_PACKS
from tests.books.illustrated import picture
from tests.calls import recording
from tests.unit.conftest import Stack
from tests.unit.test_illustrated import add_asset

FORMATS = ("epub", "html")
CHAPTERS = [
    "# Harbour\n\nThe boats came in at dusk.\n\n## The quay\n\nRopes.\n\n![The coast](images/coast.png)\n",
    "# Lighthouse\n\nA light, turning.[^1]\n\n[^1]: Every ten seconds.\n\n![](images/coast.png)\n",
    "# Storm\n\nWind. ![gone](images/missing.png)\n\n### Later\n\nCalm.\n",
    "# Morning\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    "# Home\n\nThe end.\n",
]


def _wall_clock(stack: Stack) -> None:
    """The cache's age is read from S3's own time stamps: the test clock starts where the wall clock is."""
    stack.clock.now = time.time()


def _book(stack: Stack) -> str:
    _wall_clock(stack)
    book = stack.create_book("\n".join(CHAPTERS), title="The Coast")
    assert add_asset(stack, book, "images/coast.png", "image/png", picture("PNG", 40, 30)).status == 200
    return book


def _edit(stack: Stack, book: str, chapters: list[str]) -> None:
    reply = stack.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "\n".join(chapters)})
    assert reply.status == 200, reply.body


def _built(stack: Stack, book: str, fmt: str, *, cache: bool = True) -> tuple[bytes, dict[str, Any]]:
    """An export of the book's revision, built with the cache (the stack's worker) or without it; its
    bytes and what a poll says of it."""
    export_id = stack.submit(book, fmt).body["id"]
    settings = stack.services.settings
    builds = stack.services.builds
    if not cache:
        off = replace(settings, piece_cache="off")
        builds = wiring.build_worker(off, stack.store, stack.objects, stack.clock)
    assert builds.build(book, export_id) == "ready"
    view = stack.poll(book, export_id).body
    found = stack.store.exports.read_export_for_owner(book, export_id, "user-alice", stack.clock())
    assert found is not None
    data = stack.objects.client.get_object(Bucket=settings.bucket, Key=found[0].path)["Body"].read()
    return data, {k: view.get(k) for k in ("skipped", "notes", "sha256", "size_bytes")}


def _head(stack: Stack, book: str, fmt: str) -> dict[str, Any]:
    return dict(json.loads(stack.objects.read_text(f"books/pieces/{book}/{fmt}/head")))


def _cache_keys(stack: Stack, book: str) -> list[str]:
    return sorted(stack.objects.keys(f"books/pieces/{book}/"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_warm_build_after_a_one_chapter_edit_equals_a_cold_one_and_reuses_the_rest(
    stack: Stack, fmt: str
) -> None:
    book = _book(stack)
    first, _ = _built(stack, book, fmt)
    assert first == _built(stack, book, fmt, cache=False)[0]  # a cold build with the cache on is the same
    head = _head(stack, book, fmt)
    assert len(head["entries"]) == len(CHAPTERS) and len(head["packs"]) == 1
    edited = [*CHAPTERS]
    edited[2] = edited[2].replace("Calm.", "Calm, at last.")
    _edit(stack, book, edited)

    warm = _built(stack, book, fmt)
    cold = _built(stack, book, fmt, cache=False)
    assert warm == cold
    assert warm[0] != first  # the edit is in it
    # Four chapters came from the first build's pack; the edited one alone was rendered, into a new pack.
    after = _head(stack, book, fmt)
    (old_pack,) = head["packs"]
    assert [row[3] == old_pack for row in after["entries"]] == [True, True, False, True, True]
    assert len(after["packs"]) == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_second_build_of_the_same_revision_is_byte_for_byte_the_first(stack: Stack, fmt: str) -> None:
    """No time stamp of the build's own leaks in: the epub's zip entries carry the revision's time."""
    book = _book(stack)
    first = _built(stack, book, fmt)
    stack.clock.advance(3_600)
    time.sleep(2)  # past the zip format's two-second grain, had a wall clock leaked in
    assert _built(stack, book, fmt) == first


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_failed_read_of_a_chapter_built_again_fails_the_build_to_be_retried_never_drops_it(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """A warm build reads a chapter's text only when it renders it again, deep inside the renderer, where
    a chapter that cannot be rendered is skipped: a read that fails there must still fail the build."""
    book = _book(stack)
    _built(stack, book, fmt)
    _edit(stack, book, [*CHAPTERS[:4], "# Home\n\nThe end, again.\n"])

    found = stack.store.books.read_book(book)
    assert found is not None
    manuscript, real = cut_key(book, found.cut), type(stack.objects).open_from

    def throttled(objects: Any, key: str, first: int) -> Any:
        if key == manuscript:  # the edited chapter's text, read from where it starts
            raise StorageError("SlowDown: injected")
        return real(objects, key, first)

    export_id = stack.submit(book, fmt).body["id"]
    monkeypatch.setattr(type(stack.objects), "open_from", throttled)
    with pytest.raises(RetryLater):
        stack.services.builds.build(book, export_id)
    monkeypatch.undo()
    assert stack.services.builds.build(book, export_id) == "ready"
    assert (
        stack.poll(book, export_id).body.get("skipped") == _built(stack, book, fmt, cache=False)[1]["skipped"]
    )


def test_exact_s3_calls_of_a_cold_and_a_warm_build(stack: Stack) -> None:
    book = _book(stack)
    # The cut's chapter list and its manuscript; the image, once for each place it is shown (embedded in
    # the html); and this test's own read of the artifact.
    book_reads = {"GetObject": 2 + 2 + 1}

    def counted(cache: bool) -> Any:
        with recording(stack.objects.client) as calls:
            _built(stack, book, "html", cache=cache)
        return calls.count()

    off = counted(cache=False)
    assert off == {**book_reads, "PutObject": 1}
    cold = counted(cache=True)  # the first with the cache: nothing in it
    # The head, read (none); then the one pack and the head that names it, written.
    assert cold == off + Counter({"GetObject": 1, "PutObject": 2})
    unchanged = counted(cache=True)
    # The head, and the pack read forward in one streaming GET; nothing written; and no text read at all,
    # every chapter found by the SHA-256 its cut's list holds.
    assert unchanged == off + Counter({"GetObject": 2}) - Counter({"GetObject": 1})
    _edit(stack, book, [*CHAPTERS[:4], "# Home\n\nThe end, again.\n"])
    ranges: list[tuple[str, str | None]] = []

    def seen(params: dict[str, Any], **_: Any) -> None:
        ranges.append((params["Key"], params.get("Range")))

    stack.objects.client.meta.events.register("before-parameter-build.s3.GetObject", seen)
    edited = counted(cache=True)
    stack.objects.client.meta.events.unregister("before-parameter-build.s3.GetObject", seen)
    # The head and the pack read, and of the text only the edited chapter's, from where it starts; the
    # one chapter built goes up in a pack of its own, and a new head.
    assert edited == off + Counter({"GetObject": 2, "PutObject": 2})
    found = stack.store.books.read_book(book)
    assert found is not None
    last = stack.store.books.read_chapters(book, found.cut)[-1]
    assert [r for k, r in ranges if k == cut_key(book, found.cut)] == [f"bytes={last.offset}-"]


def test_a_book_larger_than_a_part_writes_its_pack_in_parts_and_reads_it_in_one_get(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Parts of 1 MiB on both sides (8 MiB for an artifact in earnest, 5 MiB for a pack): a book that fits
    # inline still makes several.
    monkeypatch.setattr(bindery.writers, "PART_BYTES", 1024 * 1024)
    monkeypatch.setattr(bindery.piece_cache, "PACK_PART_BYTES", 1024 * 1024)
    monkeypatch.setattr(moto.s3.models, "S3_UPLOAD_PART_MIN_SIZE", 1024 * 1024)
    _wall_clock(stack)
    # Letters at random: a piece deflates, and these must still make a pack of more than one part.
    words = "".join(random.Random(7).choices(string.ascii_letters + " ", k=4_000_000))
    book = stack.create_book(
        "".join(f"# C{n}\n\n{words[n * 80_000 : (n + 1) * 80_000]}\n\n" for n in range(50))
    )
    _built(stack, book, "html")
    (size,) = _head(stack, book, "html")["packs"].values()
    assert size > bindery.writers.PART_BYTES
    with recording(stack.objects.client) as calls:
        _built(stack, book, "html")
    # The chapter list (and no text: nothing changed); the head; the whole pack, in one GET; and this
    # test's own read of the artifact.
    assert calls.count()["GetObject"] == 1 + 2 + 1
    # Nothing changed: no pack and no head written, only the artifact (in parts).
    assert calls.count()["CreateMultipartUpload"] == 1 and "PutObject" not in calls.count()


def test_a_forward_reader_hands_out_small_reads_from_few_reads_of_its_body() -> None:
    """Each chapter's text and each piece is a small read: served from a chunk held in memory, not a call
    into botocore's stream each; the bytes are the body's, and a read past its end comes back short."""
    body = bytes(random.Random(3).randrange(256) for _ in range(3 * bindery.objects.READ_CHUNK + 5))

    class Counted(io.BytesIO):
        reads = 0

        def read(self, size: int | None = -1, /) -> bytes:
            Counted.reads += 1
            return super().read(size)

    reader = bindery.streams.ForwardReader(Counted(body))
    sizes = [5_000] * 600 + [2 * bindery.objects.READ_CHUNK]  # small reads, then one larger than a chunk
    got = [reader.read(size) for size in sizes]
    assert b"".join(got) == body[: sum(sizes)]
    assert Counted.reads <= 5
    assert reader.read(10_000_000) == body[sum(sizes) :]
    assert reader.read(1) == b""


def test_a_reorder_rebuilds_only_the_chapters_whose_place_changed(stack: Stack) -> None:
    """A chapter's rendering names its place (its ids, `ch<n>-h1`, and its file, in the epub): a chapter
    that moved is built again, the ones that kept their place are reused."""
    book = _book(stack)
    _built(stack, book, "html")
    head = _head(stack, book, "html")
    _edit(stack, book, [CHAPTERS[1], CHAPTERS[0], *CHAPTERS[2:]])
    assert _built(stack, book, "html") == _built(stack, book, "html", cache=False)
    (old_pack,) = head["packs"]
    after = _head(stack, book, "html")
    assert [row[3] == old_pack for row in after["entries"]] == [False, False, True, True, True]


# ---- faults ---------------------------------------------------------------------------------------------


def _pack_key(stack: Stack, book: str, fmt: str) -> str:
    (pack,) = _head(stack, book, fmt)["packs"]
    return f"books/pieces/{book}/{fmt}/{pack}"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_a_damaged_piece_is_rebuilt_cold(stack: Stack, fmt: str, damage: str) -> None:
    book = _book(stack)
    _built(stack, book, fmt)
    key = _pack_key(stack, book, fmt)
    data = stack.objects.client.get_object(Bucket=stack.services.settings.bucket, Key=key)["Body"].read()
    damaged = data[: len(data) // 2] if damage == "truncated" else data[:40] + b"#" + data[41:]
    assert damaged != data
    stack.objects.put_bytes(key, damaged, "application/octet-stream")
    assert _built(stack, book, fmt) == _built(stack, book, fmt, cache=False)
    # The damaged pieces were built again into a pack of their own; the next build reads only whole ones.
    assert len(_head(stack, book, fmt)["packs"]) == 2
    assert _built(stack, book, fmt) == _built(stack, book, fmt, cache=False)


@pytest.mark.parametrize("fmt", [*FORMATS, "pdf"])
def test_a_head_whose_entries_point_at_each_others_bytes_is_rebuilt_cold(stack: Stack, fmt: str) -> None:
    """Found from outside: a head rewritten so that two entries point at each other's (whole) bytes. Each
    piece's SHA-256 is taken over its key and its bytes, so neither passes: both are built again."""
    book = _book(stack)
    _built(stack, book, fmt)
    head = _head(stack, book, fmt)
    entries = head["entries"]
    entries[0][3:], entries[-1][3:] = entries[-1][3:], entries[0][3:]
    stack.objects.put_bytes(f"books/pieces/{book}/{fmt}/head", json.dumps(head).encode(), "application/json")
    assert _built(stack, book, fmt) == _built(stack, book, fmt, cache=False)
    rebuilt = {row[0]: row[3] for row in _head(stack, book, fmt)["entries"]}
    assert rebuilt[entries[0][0]] == rebuilt[entries[-1][0]] != entries[0][3]  # both in the new pack


@pytest.mark.parametrize("fmt", [*FORMATS, "pdf"])
def test_a_head_that_says_its_pieces_are_kept_another_way_is_rebuilt_cold(stack: Stack, fmt: str) -> None:
    """Each entry says how its bytes are kept (deflated, or as they are), and the SHA-256 covers that too:
    an entry that says the other is a miss, built again, never deflated bytes read as a piece."""
    book = _book(stack)
    _built(stack, book, fmt)
    head = _head(stack, book, fmt)
    old = {row[3] for row in head["entries"]}
    for row in head["entries"]:
        row[7] = {"z": "s", "s": "z"}[row[7]]
    stack.objects.put_bytes(f"books/pieces/{book}/{fmt}/head", json.dumps(head).encode(), "application/json")
    assert _built(stack, book, fmt) == _built(stack, book, fmt, cache=False)
    assert not {row[3] for row in _head(stack, book, fmt)["entries"]} & old  # every piece built again


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_pack_the_gc_removes_in_the_middle_of_a_build_is_rebuilt_cold(stack: Stack, fmt: str) -> None:
    book = _book(stack)
    _built(stack, book, fmt)
    key = _pack_key(stack, book, fmt)

    def gc_first(model: Any, params: dict[str, Any], **_: Any) -> None:
        # After the build read the head that names the pack, and before it reads the pack.
        if model.name == "GetObject" and params.get("Key") == key:
            stack.objects.client.delete_object(Bucket=params["Bucket"], Key=key)

    stack.objects.client.meta.events.register("before-parameter-build.s3.GetObject", gc_first)
    try:
        warm = _built(stack, book, fmt)
    finally:
        stack.objects.client.meta.events.unregister("before-parameter-build.s3.GetObject", gc_first)
    assert warm == _built(stack, book, fmt, cache=False)
    assert key.rsplit("/", 1)[1] not in _head(stack, book, fmt)["packs"]  # every piece built again


@pytest.mark.parametrize("fmt", ["html", "pdf"])
@pytest.mark.parametrize("lost", ["once", "always"])
def test_a_cache_write_whose_answer_was_lost_leaves_the_build_right(
    stack: Stack, lost: str, fmt: str
) -> None:
    """The pack's (or the head's) write is applied, then its answer lost: botocore sends it again (the same
    bytes to the same key); when the answer is lost for good, the build goes on without writing its head.
    Either way the artifact is right, and so is the next build."""
    book = _book(stack)
    _built(stack, book, fmt)
    _edit(stack, book, [*CHAPTERS[:4], "# Home\n\nAnother end.\n"])
    client = stack.objects.client
    struck = {"n": 0}

    def lose(request: Any, **_: Any) -> None:
        # Registered after moto's own handler: by now the request has been applied.
        if "/pieces/" in request.url and request.method == "PUT" and (lost == "always" or not struck["n"]):
            struck["n"] += 1
            raise ReadTimeoutError(endpoint_url=request.url)

    client.meta.events.register("before-send.s3", lose)
    try:
        warm = _built(stack, book, fmt)
    finally:
        client.meta.events.unregister("before-send.s3", lose)
    assert struck["n"] == 1 if lost == "once" else struck["n"] > 1
    assert warm == _built(stack, book, fmt, cache=False)
    assert _built(stack, book, fmt) == _built(stack, book, fmt, cache=False)


def test_a_cache_read_that_fails_is_a_miss_not_a_failed_build(stack: Stack) -> None:
    book = _book(stack)
    _built(stack, book, "epub")
    client = stack.objects.client

    def refuse(model: Any, params: dict[str, Any], **_: Any) -> None:
        if "/pieces/" in f"/{params.get('Key', '')}":
            from tests.faults.injector import client_error

            raise client_error(model.name)

    client.meta.events.register("before-call.s3.GetObject", refuse)
    try:
        warm = _built(stack, book, "epub")
    finally:
        client.meta.events.unregister("before-call.s3.GetObject", refuse)
    assert warm == _built(stack, book, "epub", cache=False)


@pytest.mark.parametrize("where", ["pack", "head"])
def test_a_full_local_disk_is_a_cache_write_that_fails_not_a_failed_build(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A build keeps its pack's part and its new head's entries in temporary files: a disk that fills
    under either leaves the cache as it was, and the build is whole."""
    book = _book(stack)

    class Full(io.BytesIO):
        def write(self, data: Any) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    # Only the cache's own temporary files: the renderer's spool is another module's.
    module = bindery.writers if where == "pack" else bindery.piece_cache
    monkeypatch.setattr(module, "tempfile", SimpleNamespace(TemporaryFile=Full))
    assert _built(stack, book, "html") == _built(stack, book, "html", cache=False)
    assert _cache_keys(stack, book) == []  # no pack, no head
    monkeypatch.undo()
    assert _built(stack, book, "html") == _built(stack, book, "html", cache=False)
    assert len(_head(stack, book, "html")["entries"]) == len(CHAPTERS)


# ---- bounds -------------------------------------------------------------------------------------------


def test_a_build_keeps_no_more_than_the_bound_of_a_book(stack: Stack) -> None:
    book = _book(stack)
    stack.reconfigured(piece_cache_max_bytes=400)  # 200 bytes for the html
    assert _built(stack, book, "html") == _built(stack, book, "html", cache=False)
    assert _cache_keys(stack, book) == []  # no pack past the bound, no head naming one


def test_compaction_keeps_the_packs_of_a_head_at_most_max_packs(stack: Stack) -> None:
    book = _book(stack)
    chapters = [*CHAPTERS]
    for n in range(MAX_PACKS + 2):
        chapters[n % len(chapters)] += f"\nEdit {n}.\n"
        _edit(stack, book, chapters)
        assert _built(stack, book, "html") == _built(stack, book, "html", cache=False)
        assert len(_head(stack, book, "html")["packs"]) <= MAX_PACKS
    # Superseded packs are deleted by the compacting build: the prefix holds the head and its packs.
    packs = _head(stack, book, "html")["packs"]
    assert _cache_keys(stack, book) == sorted(
        [f"books/pieces/{book}/html/head", *(f"books/pieces/{book}/html/{p}" for p in packs)]
    )


def test_the_gc_removes_pieces_past_their_age_and_keeps_younger_ones(stack: Stack) -> None:
    book = _book(stack)
    _built(stack, book, "html")
    _wall_clock(stack)  # after the build: its objects are no younger than the clock, however long it took
    kept = _cache_keys(stack, book)
    assert stack.gc()["pieces_trimmed"] == 0
    assert _cache_keys(stack, book) == kept
    stack.clock.advance(stack.services.settings.piece_cache_max_age_seconds + 1)
    assert stack.gc()["pieces_trimmed"] == len(kept) == 2
    assert _cache_keys(stack, book) == []
    # The next build is cold, and right.
    assert _built(stack, book, "html") == _built(stack, book, "html", cache=False)


def test_the_gc_empties_a_book_cache_past_its_bytes(stack: Stack) -> None:
    book, other = _book(stack), _book(stack)
    _built(stack, book, "html")
    _built(stack, book, "epub")
    _built(stack, other, "html")
    sizes = [size for key, size, _ in stack.objects.list_page(f"books/pieces/{book}/", "", 100)[0]]
    stack.reconfigured(piece_cache_max_bytes=sum(sizes) - 1)
    assert stack.gc()["pieces_trimmed"] == 4
    assert _cache_keys(stack, book) == []
    assert len(_cache_keys(stack, other)) == 2  # another book, within its bound, keeps its own


def test_the_gc_walks_every_cache_a_page_at_a_time(stack: Stack) -> None:
    books = [_book(stack) for _ in range(3)]
    for book in books:
        _built(stack, book, "html")
    _wall_clock(stack)
    stack.reconfigured(reconcile_batch=3)
    stack.clock.advance(stack.services.settings.piece_cache_max_age_seconds + 1)
    runs = []
    while any(_cache_keys(stack, b) for b in books):
        runs.append(stack.gc()["pieces_trimmed"])
        assert len(runs) < 10
    # A page of three keys ends inside a book (two keys each): the page's last book waits for the next run.
    assert runs == [2, 2, 2]


def test_a_deleted_book_takes_its_cache_with_it(stack: Stack) -> None:
    book, other = _book(stack), _book(stack)
    for fmt in FORMATS:
        _built(stack, book, fmt)
    _built(stack, other, "html")
    assert len(_cache_keys(stack, book)) == 4
    assert stack.http("DELETE", f"/books/{book}").status == 204
    stack.gc()
    assert _cache_keys(stack, book) == []
    assert len(_cache_keys(stack, other)) == 2


def test_the_cache_is_written_beside_the_finish_waited_for_and_what_it_raises_is_the_builds() -> None:
    from bindery.threads import alongside
    from tests.faults.injector import Crash

    order: list[str] = []
    started, finished = threading.Event(), threading.Event()

    def keep() -> None:
        started.set()
        finished.wait(5)  # only a body that runs meanwhile lets it go on at once
        order.append("kept")

    with alongside(keep):
        assert started.wait(5)  # the cache's writes run while the body does
        order.append("finished")
        finished.set()
    assert order == ["finished", "kept"]  # and are waited for before the build goes on

    def crashed() -> None:
        raise Crash("PutObject")

    with pytest.raises(Crash), alongside(crashed):
        pass
    with pytest.raises(StorageError), alongside(crashed):  # the body's own failure is the one raised
        raise StorageError("finish refused")


def test_two_threads_first_asking_for_the_s3_client_get_one_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build's first S3 calls go from two threads at once (the cache's head beside the chapter list): each
    made a client of its own, loading S3's service model twice (14 MiB, and 0.4 billion instructions of the
    worker's cold start)."""
    import boto3

    from bindery.config import Settings
    from bindery.objects import Objects

    made: list[str] = []
    both_asking = threading.Barrier(2)

    def client(service: str, **_: Any) -> object:
        made.append(service)
        time.sleep(0.05)  # long enough for the other thread to ask meanwhile
        return object()

    monkeypatch.setattr(boto3, "client", client)
    objects = Objects(Settings(table="t", bucket="b"))
    got: list[object] = []

    def ask() -> None:
        both_asking.wait(5)
        got.append(objects.client)

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert made == ["s3"] and len(got) == 2 and got[0] is got[1]
