"""The cache of built pieces: what a build of a book rendered, kept in S3 for the next build of that book.

Each book has a prefix of its own, per format: `books/pieces/<book>/<format>/`. In it, a *head* (the
index: each piece's lookup and key, the image names it depends on, and where its bytes are: which pack,
at what offset, how long, their SHA-256) and the *packs* it names (pieces, each deflated, end to end, one
pack per build that built anything). A build reads the head once (one GET), then each pack it uses
forward, in one streaming GET (another only past a large gap): a warm build of 1,200 chapters makes a
handful of calls, not 1,200. What it built cold goes into one new pack (a multipart upload, one part at a
time), and the new head is written last, only after its pack is whole: a head never names a pack that is
not all there.

A piece's bytes are checked against the SHA-256 its head holds before they are used (taken over the piece's
key, how it is kept and then its bytes, so whole bytes that are another piece's fail too); a piece cut short,
damaged, or gone (the GC removed its pack) is a miss, and the chapter is rendered cold. No fault in the
cache fails a build: a read that fails is a miss, and a write that fails leaves the head as it was.

Bounds: a build keeps no more than its format's share of `piece_cache_max_bytes`, a book's bound (past
it, it writes no head and the next build reuses the old one); once a head names `MAX_PACKS` packs, the
next build that writes copies every piece it uses into its own pack and deletes the others (compaction).
The GC removes what is older than `piece_cache_max_age_seconds` and empties a book's cache that is past
its bytes (`trim_piece_caches`); a deleted book's purge removes its whole prefix.
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
import tempfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from isal import isal_zlib

from bindery.faults import StorageError
from bindery.objects import PIECES_PREFIX, READ_CHUNK, SKIP_BYTES, Objects, pieces_prefix
from bindery.observability import logger
from bindery.streams import ForwardReader
from bindery.threads import alongside
from bindery.writers import ArtifactWriter

HEAD = "head"
# What the head and its packs hold, as this code writes them: a head of another layout is an empty cache.
LAYOUT = 2
PACK_TYPE = "application/octet-stream"
# A piece is kept deflated: a chapter's HTML shrinks about threefold for far less time than sending it whole
# (a pack is as big as the book's HTML otherwise). A build's pieces are one deflate stream, flushed whole
# after each (Z_FULL_FLUSH: nothing after refers back), so each piece still inflates alone, and the stream
# costs half what a compressor a piece does. The stream is ISA-L's (python-isal: 0.3 MB, 0.5 ms to import),
# read back with zlib, whose format it writes: at its level 1, 2 MB of licences and Python deflated in
# 12.5 ms with zlib's ratio or better, where zlib's fastest level took 40, and the bench's 1,200 chapters of
# HTML in 12 ms, where zlib took 18. A piece already compressed (an epub's page, a compiled PDF) is kept as
# it is: deflating it again gains nothing and costs time.
DEFLATE_LEVEL = 1
DEFLATED, AS_IS = "z", "s"
MAX_PACKS = 4
# A pack goes up in parts of S3's least, 5 MiB, each waiting in a temporary file rather than in memory: a
# build holds the artifact's part (8 MiB) at the same time, and a build's peak memory must not grow with
# the book (an epub of 5,000 chapters held 6 MiB more with its pack's part in memory).
PACK_PART_BYTES = 5 * 1024 * 1024
# A build's pieces wait in memory up to this many bytes before they join its pack (a call each was a tenth of
# what keeping them costs).
HELD_BYTES = 256 * 1024
# Where the GC's walk of every cache resumes: under the prefix, after every book id ("~" sorts last).
CURSOR_KEY = f"{PIECES_PREFIX}~cursor"


@dataclass(frozen=True, slots=True)
class Entry:
    lookup: str
    key: str
    names: tuple[str, ...]
    pack: str
    offset: int
    length: int
    sha256: str
    how: str  # DEFLATED or AS_IS

    def line(self) -> bytes:
        """The entry as the head's JSON holds it, a line. Written out, not through json.dumps (a fifth of
        what keeping a piece costs): every string in it but the image names is hex, or a word of ours."""
        names = json.dumps(self.names) if self.names else "[]"
        return (
            f'["{self.lookup}","{self.key}",{names},"{self.pack}",{self.offset},{self.length},'
            f'"{self.sha256}","{self.how}"]\n'
        ).encode()


@dataclass
class CacheCounts:
    hits: int = 0
    misses: int = 0
    damaged: int = 0  # found in the head, but cut short, corrupt, or gone: rendered cold


class _Pack:
    """One pack read forward: the stream, and where it stands."""

    def __init__(self, body: Any, position: int):
        self.body, self.position = body, position


class BuildPieces:
    """One build's use of its book's cache for one format (`bindery.engine.chapter_pieces.Pieces`)."""

    def __init__(self, objects: Objects, book_id: str, fmt: str, max_bytes: int):
        self.objects, self.max_bytes = objects, max_bytes
        self.base = f"{pieces_prefix(book_id)}{fmt}/"
        self.counts = CacheCounts()
        self._old: dict[str, Entry] = {}
        self._old_entries: list[Entry] = []
        self._old_packs: dict[str, int] = {}
        # The new head's entries, a JSON line each in a temporary file: 5,000 of them held 2.6 MiB.
        self._rows: Any = None
        self._count = 0
        self._changed = False  # whether the new head is not the old one
        self._reused_packs: set[str] = set()  # the old packs the new head keeps pieces in
        self._packs: dict[str, _Pack] = {}
        self._lost: set[str] = set()  # packs that could not be read whole
        self._pack = secrets.token_hex(8)
        self._writer: ArtifactWriter | None = None
        self._held = bytearray()  # this build's pieces not yet handed to its pack's writer
        self._size = 0  # the bytes of this build's pack, held ones included
        self._packer: Any = None  # this build's deflate stream
        self._compact = False
        self._broken = False  # a write failed, or the bound was reached: this build leaves the head alone

    def start(self) -> None:
        """Read the head: one GET. A head that is missing or unreadable is an empty cache."""
        try:
            data = self.objects.read_or_none(self.base + HEAD)
            head = json.loads(data) if data is not None else {}
            if head.get("layout") != LAYOUT:
                head = {}  # none, or kept by code that wrote another layout: nothing in it is used
            entries = [
                Entry(r[0], r[1], tuple(r[2]), r[3], r[4], r[5], r[6], r[7]) for r in head.get("entries", [])
            ]
            packs = {str(name): int(size) for name, size in head.get("packs", {}).items()}
        except (StorageError, ValueError, TypeError, IndexError, AttributeError):
            logger.warning("piece cache head unreadable; building cold", exc_info=True)
            return
        self._old = {e.lookup: e for e in entries}
        self._old_entries = entries
        self._old_packs = packs
        self._compact = len(packs) >= MAX_PACKS
        # Each pack is opened where its first piece is, all at once: a GET each, none waiting on another.
        firsts: dict[str, int] = {}
        for entry in entries:
            firsts.setdefault(entry.pack, entry.offset)
        opened = [functools.partial(self._open, pack, offset) for pack, offset in firsts.items()]
        with alongside(*opened[1:]):
            if opened:
                opened[0]()

    # ---- bindery.engine.chapter_pieces.Pieces ------------------------------------------------------

    def find(self, lookup: str, key_for: Callable[[Sequence[str]], str]) -> bytes | None:
        entry = self._old.get(lookup)
        if entry is None or entry.key != key_for(entry.names):
            self.counts.misses += 1
            return None
        data = None if entry.pack in self._lost else self._read(entry)
        if data is None:
            # Cut short, gone, or unreadable: the rest of its pack is not tried (a GET each, for nothing).
            self._lost.add(entry.pack)
        if data is None or _digest(entry.key, entry.how, data) != entry.sha256:
            logger.warning("piece damaged or gone; building it cold", extra={"pack": entry.pack})
            self.counts.damaged += 1
            return None
        try:
            piece = zlib.decompressobj(-zlib.MAX_WBITS).decompress(data) if entry.how == DEFLATED else data
        except zlib.error:
            self.counts.damaged += 1  # whole as kept, but not a piece: kept by another layout, say
            return None
        self.counts.hits += 1
        if self._compact:
            self._store(entry.lookup, entry.key, entry.names, data, entry.how)
        else:
            self._add(entry)
            self._reused_packs.add(entry.pack)
        return piece

    def keep(
        self, lookup: str, key: str, names: Sequence[str], data: bytes, *, compressed: bool = False
    ) -> None:
        if compressed:
            self._store(lookup, key, names, data, AS_IS)
            return
        if self._packer is None:
            self._packer = isal_zlib.compressobj(DEFLATE_LEVEL, isal_zlib.DEFLATED, -isal_zlib.MAX_WBITS)
        deflated = self._packer.compress(data) + self._packer.flush(isal_zlib.Z_FULL_FLUSH)
        self._store(lookup, key, names, deflated, DEFLATED)

    def _store(self, lookup: str, key: str, names: Sequence[str], data: bytes, how: str) -> None:
        """Append a piece's stored bytes (`how`: deflated, or as they are) to this build's pack, and name
        it in the new head."""
        if self._broken:
            return
        offset = self._size
        try:
            if offset + len(data) + self._kept_elsewhere() > self.max_bytes:
                raise _OverBound
            self._held += data
            if len(self._held) >= HELD_BYTES:
                self._hand_over()
        except (StorageError, OSError, _OverBound) as exc:  # OSError: its local disk is full, say
            logger.warning("piece cache not written by this build", extra={"reason": type(exc).__name__})
            self._give_up()
            return
        self._size += len(data)
        digest = _digest(key, how, data)
        self._add(Entry(lookup, key, tuple(names), self._pack, offset, len(data), digest, how))

    # ---- the build's end ---------------------------------------------------------------------------

    def finish(self) -> None:
        """The build's artifact is whole: make its pack exist, then the head that names it. Nothing
        changed (every piece a hit, in the same order): no write at all."""
        if self._broken:
            return
        if not self._size and not self._changed and self._count == len(self._old_entries):
            self._close()
            return
        try:
            packs = {p: s for p, s in self._old_packs.items() if p in self._reused_packs}
            if self._size:
                packs[self._pack] = self._hand_over().commit()
            self.objects.write_lines(self.base + HEAD, _head_lines(packs, self._rows), "application/json")
            self._close()
        except (StorageError, OSError):
            logger.warning("piece cache head not written; the next build reuses the old one", exc_info=True)
            self._give_up()
            return
        # Packs no piece of the new head is in (a compaction's): a build still reading one finds it gone
        # and renders those chapters cold.
        gone = [self.base + p for p in self._old_packs if p not in packs]
        try:
            self.objects.delete(gone)
        except StorageError:
            logger.warning("superseded packs left to the GC", exc_info=True)

    def abandon(self) -> None:
        """The build failed: keep nothing of it."""
        self._give_up()

    def written(self) -> list[str]:
        """The keys this build may have written (a build whose book was deleted meanwhile removes them)."""
        return [self.base + HEAD, self.base + self._pack]

    # ---- helpers -----------------------------------------------------------------------------------

    def _hand_over(self) -> ArtifactWriter:
        """The held pieces, into this build's pack (its writer, made at the first)."""
        if self._writer is None:
            self._writer = self.objects.writer(
                self.base + self._pack, PACK_TYPE, part_bytes=PACK_PART_BYTES, on_disk=True
            )
        self._writer.write(bytes(self._held))
        self._held.clear()
        return self._writer

    def _kept_elsewhere(self) -> int:
        """Bytes of the packs the new head keeps besides this build's own."""
        return sum(self._old_packs.get(p, 0) for p in self._reused_packs)

    def _add(self, entry: Entry) -> None:
        """Name the entry in the new head, after those before it."""
        if self._broken:
            return
        old = self._old_entries
        self._changed |= self._count >= len(old) or old[self._count] is not entry
        try:
            if self._rows is None:  # closed at the build's end (_close)
                self._rows = tempfile.TemporaryFile()  # noqa: SIM115
            self._rows.write(entry.line())
        except OSError:
            logger.warning("piece cache not written by this build", exc_info=True)
            self._give_up()
            return
        self._count += 1

    def close(self) -> None:
        """Let go of what the build held open of the cache (its packs' streams, its head's rows)."""
        self._close()

    def _close(self) -> None:
        if self._rows is not None:
            self._rows.close()
            self._rows = None
        packs, self._packs = self._packs, {}
        for pack in packs.values():
            pack.body.close()

    def _give_up(self) -> None:
        self._broken = True
        self._close()
        self._held.clear()
        if self._writer is not None:
            self._writer.abort()
            self._writer = None

    def _open(self, pack: str, offset: int) -> None:
        """Open `pack` at `offset` ahead of its first piece; one that fails is opened again by `_read`."""
        try:
            self._packs[pack] = _Pack(ForwardReader(self.objects.open_from(self.base + pack, offset)), offset)
        except Exception:  # no fault of the cache may fail a build
            logger.warning("piece pack not opened ahead", extra={"pack": pack}, exc_info=True)

    def _read(self, entry: Entry) -> bytes | None:
        """The entry's bytes from its pack, read forward; None when they cannot be read whole."""
        key = self.base + entry.pack
        try:
            pack = self._packs.get(entry.pack)
            if pack is None or entry.offset < pack.position or entry.offset - pack.position > SKIP_BYTES:
                body = ForwardReader(self.objects.open_from(key, entry.offset))
                pack = self._packs[entry.pack] = _Pack(body, entry.offset)
            while pack.position < entry.offset:
                skipped = pack.body.read(min(READ_CHUNK, entry.offset - pack.position))
                if not skipped:
                    return None
                pack.position += len(skipped)
            data = pack.body.read(entry.length)
            pack.position += len(data)
            return data if len(data) == entry.length else None  # shorter: the pack ends early, cut short
        except Exception:  # no fault of the cache may fail a build: a miss, logged
            logger.warning("piece unreadable; building it cold", extra={"key": key}, exc_info=True)
            return None


def _head_lines(packs: dict[str, int], rows: Any) -> Iterator[bytes]:
    """The head's JSON, from its entries' rows (a file of JSON lines, or None for no entry), an entry at a
    time: a book of 5,000 chapters has a head of 1.3 MB, and no build holds it whole."""
    yield f'{{"layout": {LAYOUT}, "packs": {json.dumps(packs)}, "entries": ['.encode()
    if rows is not None:
        rows.seek(0)
        for n, line in enumerate(rows):
            yield (b", " if n else b"") + line.rstrip(b"\n")
    yield b"]}"


def _digest(key: str, how: str, data: bytes) -> str:
    """A piece's SHA-256, over its key, how it is kept and then its bytes: bytes that are whole but another
    piece's (a head whose entries were moved about), or said to be kept another way, fail it as damaged
    bytes do."""
    return hashlib.sha256(f"{key}\0{how}\0".encode() + data).hexdigest()


class _OverBound(Exception):
    """The pieces this build would keep are more than a book's cache may hold."""


@dataclass(frozen=True)
class TrimCounts:
    books: int = 0
    deleted: int = 0
    left: bool = False


def trim_piece_caches(
    objects: Objects,
    now: float,
    max_bytes: int,
    max_age_seconds: float,
    batch: int,
    out_of_time: Callable[[], bool],
) -> TrimCounts:
    """The GC's chore: one bounded page of every book's cache, resuming where the last run stopped.
    Removes each object older than the age bound, and the whole cache of a book whose objects are
    more than its bound in bytes (its next build is cold, and writes it again within the bound)."""
    if out_of_time():
        return TrimCounts(left=True)
    cursor = (objects.read_or_none(CURSOR_KEY) or b"").decode()
    page, more = objects.list_page(PIECES_PREFIX, cursor, batch)
    page = [item for item in page if item[0] != CURSOR_KEY]
    books: dict[str, list[tuple[str, int, float]]] = {}
    for item in page:
        books.setdefault(item[0].removeprefix(PIECES_PREFIX).split("/")[0], []).append(item)
    if more and len(books) > 1:
        # The page may end inside the last book's keys: that book is read whole on the next run.
        books.pop(next(reversed(books)))
    deleted = 0
    for keys in books.values():
        total = sum(size for _, size, _ in keys)
        doomed = [k for k, _, modified in keys if total > max_bytes or modified < now - max_age_seconds]
        objects.delete(doomed)
        deleted += len(doomed)
    last = max((k for keys in books.values() for k, _, _ in keys), default="")
    moved = last if more else ""  # at the end of the prefix, the next run starts over
    if moved != cursor:
        objects.put_bytes(CURSOR_KEY, moved.encode(), "text/plain")
    return TrimCounts(len(books), deleted, left=more)
