"""The export lifecycle: what each entry point asks of storage, and what it tells the caller.

    pending --finish--> ready --expire / cancel--> expired
       |--fail / sweep--> failed
       `--cancel-------> cancelled

Every arrow is one conditional write in `bindery.storage`; this module decides which arrow to try and
turns the outcome into an answer. It holds no AWS call of its own.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from bindery import engine, errors
from bindery.config import Settings, settings
from bindery.faults import AWS_ERRORS
from bindery.library import Library, idempotency_for, key_reused, not_found, valid_id
from bindery.objects import ARTIFACT_PREFIX, Objects, artifact_key, cut_key
from bindery.observability import logger, metrics, state_change
from bindery.states import FailureCode, Queue, State
from bindery.storage import (
    Accepted,
    Book,
    Chapter,
    Claimed,
    Export,
    KeyReused,
    NotFound,
    OverCap,
    Replayed,
    Revoked,
    StorageError,
    Store,
)

Clock = Callable[[], float]

PAGE_DEFAULT, PAGE_MAX = 20, 100
RETRY_AFTER_PENDING = 2
RETRY_AFTER_OVER_CAP = 30
PROGRESS_SECONDS = 3.0


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id(now: float) -> str:
    """Time-ordered, so a book's exports list newest first by key alone: 11 hex digits of milliseconds,
    then 10 random ones."""
    return f"{int(now * 1000):011x}{secrets.token_hex(5)}"


def download_name(title: str, extension: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", title).strip("-.")[:80] or "book"
    return f"{stem}.{extension}"


class RetryLater(Exception):
    """The build could not run now for a reason that may pass (a lease held, S3 throttling)."""


@dataclass(frozen=True)
class SweepCounts:
    done: int = 0
    refused: int = 0
    failed: int = 0


class Exports:
    """The service behind every handler. Collaborators are injected; the defaults build real ones."""

    def __init__(self, settings: Settings, store: Store, objects: Objects, clock: Clock = time.time):
        self.settings, self.store, self.objects, self.clock = settings, store, objects, clock
        self.books = Library(settings, store, objects, clock)

    @classmethod
    def from_settings(cls, settings: Settings) -> Exports:
        return cls(settings, Store(settings), Objects(settings))

    # ---- submit ----------------------------------------------------------------------------------

    def submit(
        self, caller: str, book_id: str, fmt: Any, idempotency_key: str | None
    ) -> tuple[dict[str, Any], bool]:
        """Accept an export. Returns its view and whether this call created it (False for a replay)."""
        if not isinstance(fmt, str):
            raise errors.BadRequest(
                "format must be a string", code="invalid_format", known=sorted(engine.FORMATS)
            )
        if fmt not in engine.FORMATS:
            raise errors.Unprocessable(
                f"unknown format {fmt[:40]!r}; known formats: {', '.join(sorted(engine.FORMATS))}",
                code="unknown_format",
                known=sorted(engine.FORMATS),
            )
        idempotency_ids = None
        if idempotency_key is not None:
            idempotency_ids = idempotency_for(caller, idempotency_key, ["POST /exports", book_id, fmt])
        if not valid_id(book_id):
            raise not_found()
        now = self.clock()
        export = Export(
            id=new_id(now),
            book_id=book_id,
            format=fmt,
            state=State.PENDING,
            requested_at=now,
            counted_against=caller,
        )
        view = self.view(export, book=None, now=now)
        idempotency = None
        if idempotency_ids is not None:
            idempotency = (*idempotency_ids, view)
        outcome = self.store.submit_export(export, caller=caller, now=now, idempotency=idempotency)
        match outcome:
            case Accepted():
                metrics.add_metric(name="ExportsRequested", unit="Count", value=1)
                state_change(export.id, book_id, "export requested", format=fmt)
                return view, True
            case Replayed(response=response):
                return response, False
            case KeyReused():
                raise key_reused()
            case OverCap(live_ids=live):
                raise errors.TooManyLiveExports(
                    f"you have {len(live)} exports in progress, the most allowed at once; "
                    "wait for one to finish or cancel one",
                    live_exports=list(live),
                    retry_after=RETRY_AFTER_OVER_CAP,
                )
            case NotFound():
                raise not_found()
        raise AssertionError(outcome)

    # ---- caller reads ----------------------------------------------------------------------------

    def read(self, caller: str, book_id: str, export_id: str) -> dict[str, Any]:
        """The poll. It reads, presigns, and writes nothing: not even a lease bump."""
        found = None
        if valid_id(book_id) and valid_id(export_id):
            found = self.store.read_export_for_owner(book_id, export_id, caller, self.clock())
        if found is None:
            raise not_found()
        export, book = found
        return self.view(export, book=book, now=self.clock())

    def list_exports(self, caller: str, book_id: str, limit: Any, cursor: str | None) -> dict[str, Any]:
        try:
            size = PAGE_DEFAULT if limit is None else int(limit)
        except ValueError:
            size = 0
        if not 1 <= size <= PAGE_MAX:
            raise errors.BadRequest(
                f"limit must be a whole number from 1 to {PAGE_MAX}", code="invalid_limit"
            )
        start_after = _decode_cursor(cursor) if cursor is not None else None
        book = self.store.read_book_for_owner(book_id, caller) if valid_id(book_id) else None
        if book is None:
            raise not_found()
        now = self.clock()
        page, next_after = self.store.list_exports(book_id, limit=size, start_after=start_after, now=now)
        return {
            "exports": [self.view(e, book=book, now=now) for e in page],
            "next_cursor": _encode_cursor(next_after) if next_after else None,
        }

    def view(self, export: Export, *, book: Book | None, now: float) -> dict[str, Any]:
        """The export as a caller sees it. A link past its promise reads as expired, whether or not the GC
        has got to it, and a download URL is minted fresh on every read and never stored."""
        state = export.state
        if state == State.READY and export.expires_at is not None and now >= export.expires_at:
            state = State.EXPIRED
        body: dict[str, Any] = {
            "id": export.id,
            "book_id": export.book_id,
            "format": export.format,
            "state": state.value,
            "requested_at": iso(export.requested_at),
            "started_at": iso(export.started_at),
            "finished_at": iso(export.finished_at),
            "expires_at": iso(export.expires_at),
            "attempt": export.attempt,
            "size_bytes": export.size_bytes,
            "complete": export.complete,
            "failure_code": export.failure_code,
            "built_revision": export.built_revision,
            "download_url": None,
            "download_expires_at": None,
        }
        if book is not None:
            body["book_revision"] = book.revision
        if state == State.PENDING and export.progress_total:
            body["progress"] = {
                "chapters_done": export.progress_done or 0,
                "chapters_total": export.progress_total,
            }
        if export.skipped:
            body["skipped_chapters"] = list(export.skipped)  # the first SKIPPED_KEPT of them
            body["skipped_chapters_total"] = max(export.skipped_total, len(export.skipped))
        if state == State.READY and export.path and export.expires_at is not None and book is not None:
            # Valid until min(expires_at, now + 15 min), never later; whole seconds, rounded down.
            until = min(export.expires_at, now + self.settings.presign_max_seconds)
            seconds = int(until - now)
            if seconds >= 1:
                # From the format table: a poll imports no renderer and no markdown parser.
                fmt = engine.FORMATS[export.format]
                body["download_url"] = self.objects.presign_download(
                    export.path, download_name(book.title, fmt.extension), fmt.content_type, seconds
                )
                body["download_expires_at"] = iso(now + seconds)
        return body

    # ---- cancel ----------------------------------------------------------------------------------

    def cancel(self, caller: str, book_id: str, export_id: str) -> str:
        """End the caller's export: a pending one is cancelled; a ready one's link ends now, and its bytes
        are deleted before the answer, so a URL handed out earlier stops working at once."""
        if not (valid_id(book_id) and valid_id(export_id)):
            raise not_found()
        outcome = self.store.cancel_export(book_id, export_id, caller, self.clock())
        if isinstance(outcome, NotFound):
            raise not_found()
        if isinstance(outcome, Revoked):
            self.books.unlink_now(outcome)
            state_change(export_id, book_id, "export revoked")
            return "revoked"
        if outcome == "cancelled":
            state_change(export_id, book_id, "export cancelled")
        return outcome

    # ---- the build worker ------------------------------------------------------------------------

    def build(self, book_id: str, export_id: str) -> str:
        """Claim the export, build it into S3, and finish it. Returns what happened, in one word.

        Raises RetryLater when the message should come back: another attempt holds a live lease (it may
        yet die), or AWS failed under us, in which case the lease is given back first so the redelivery
        need not wait it out. Anything the engine raises fails the export instead, because building it
        again would raise again.
        """
        now, started = self.clock(), time.perf_counter()
        claim = secrets.token_hex(8)
        path = artifact_key(book_id, export_id, claim)
        outcome = self.store.claim_build(book_id, export_id, path, now)
        if not isinstance(outcome, Claimed):
            if outcome.reason == "held":
                raise RetryLater("another attempt holds the lease")
            logger.info("claim refused", extra={"export_id": export_id, "reason": outcome.reason})
            return f"refused:{outcome.reason}"
        export = outcome.export
        state_change(export.id, book_id, "export claimed", attempt=export.attempt)
        try:
            return self._build_claimed(export, path, started)
        except StorageError as exc:
            try:
                self.store.release_claim(export, self.clock())
            except StorageError:
                logger.warning("could not give the lease back; it runs out by itself", exc_info=True)
            raise RetryLater(f"storage failed during the build: {exc}") from exc

    def _build_claimed(self, export: Export, path: str, started: float) -> str:
        book_id = export.book_id
        book = self.store.read_book(book_id)
        if book is None:
            # The book was deleted after this export was accepted: it goes with its book.
            ended = self.store.cancel_attempt(export, self.clock())
            return "cancelled:book_deleted" if ended else "cancel_refused"
        if not book.chapter_count:
            # A book with nothing cut has nothing to build from: never send it to the engine.
            return self._fail(export, FailureCode.EMPTY_BOOK)

        copies = export.format in engine.COPIES_MANUSCRIPT
        # The chapter list is read before the renderer is imported: parsing it is the build's peak of memory
        # outside the engine, and it peaks lower in the smaller process (10 MiB at 5,000 chapters).
        chapters = [] if copies else self.store.read_chapters(book_id, book.cut)
        renderer = engine.renderer_for(export.format)
        limit = getattr(renderer, "max_manuscript_bytes", None)
        if limit is not None and book.manuscript_bytes > limit:
            # Fail early and say why, rather than die of memory halfway through.
            return self._fail(export, FailureCode.TOO_LARGE_FOR_FORMAT)
        content_type = engine.FORMATS[export.format].content_type
        writer = self.objects.writer(path, content_type)
        try:
            if copies:
                # The revision's text is the artifact: no chapter is read, so neither are their rows.
                self.objects.copy(cut_key(book.id, book.cut), path, content_type)
                skipped, size = [], book.manuscript_bytes
            else:
                source = engine.Source(
                    book.id, book.title, book.revision, tuple(c.title for c in chapters), book.updated_at
                )
                progress = _Progress(self, export, len(chapters))
                skipped = renderer.render(source, self._chapter_texts(book, chapters, progress), writer)
                size = writer.commit()
        except StorageError:
            writer.abort()
            raise
        except Exception:
            writer.abort()
            logger.exception("engine failed", extra={"export_id": export.id})
            return self._fail(export, FailureCode.RENDER_FAILED)

        ending = self.store.finish_export(
            export,
            path=path,
            size_bytes=size,
            skipped=skipped,
            built_revision=book.revision,
            now=self.clock(),
        )
        if ending != "ended":
            # The row was ended meanwhile (cancelled, or swept), or its book was deleted: no row will
            # publish these bytes, so this attempt removes what it wrote rather than leave it for
            # reconciliation. (A finish whose own first try went through, answer lost, is "ended".)
            self.objects.delete([path])
            if ending == "book_deleted":
                ended = self.store.cancel_attempt(export, self.clock())
                state_change(export.id, book_id, "book deleted during the build; artifact removed")
                return "cancelled:book_deleted" if ended else "cancel_refused"
            state_change(export.id, book_id, "finish refused; artifact removed", attempt=export.attempt)
            return "finish_refused"
        metrics.add_metric(name="ExportsReady", unit="Count", value=1)
        metrics.add_metric(
            name="BuildDuration", unit="Milliseconds", value=(time.perf_counter() - started) * 1000
        )
        metrics.add_metric(name="ArtifactBytes", unit="Bytes", value=size)
        state_change(export.id, book_id, "export ready", size_bytes=size, attempt=export.attempt)
        return "ready"

    def _chapter_texts(
        self, book: Book, chapters: list[Chapter], progress: _Progress
    ) -> Iterator[engine.Text]:
        """Each chapter's text, in order, from ONE streaming read of the cut's manuscript object: memory
        holds one chapter, and the whole book costs a single GET. A read that fails mid-stream is a
        StorageError, a reason to retry, not a reason to fail the export."""
        body = self.objects.open(cut_key(book.id, book.cut))
        position = 0
        for done, chapter in enumerate(chapters, start=1):
            try:
                if chapter.offset > position:
                    body.read(chapter.offset - position)
                data = body.read(chapter.size_bytes)
            except AWS_ERRORS as exc:
                raise StorageError(f"reading the manuscript: {exc}") from exc
            position = chapter.offset + chapter.size_bytes
            yield engine.Text(chapter.ordinal, chapter.title, data.decode("utf-8", errors="replace"))
            progress.chapter_done(done)

    def _fail(self, export: Export, code: FailureCode) -> str:
        if self.store.fail_export(export, code, self.clock()):
            metrics.add_metric(name=f"ExportsFailed_{code.value}", unit="Count", value=1)
            state_change(export.id, export.book_id, "export failed", failure_code=code.value)
            return f"failed:{code.value}"
        return "fail_refused"

    # ---- the sweeps ------------------------------------------------------------------------------

    def _sweep(self, queue: Queue, act: Callable[[Any, float], bool]) -> SweepCounts:
        """Work `queue` until no due row is left or a round makes no progress (every candidate refused or
        failing). Each round re-reads the index, so batch size + 1 due rows all get done."""
        done = refused = failed = 0
        batch = self.settings.sweep_batch
        while True:
            now = self.clock()
            candidates = self.store.due(queue, now, batch)
            progress = 0
            for due in candidates:
                try:
                    if act(due, now):
                        done += 1
                        progress += 1
                    else:
                        refused += 1
                except Exception:
                    failed += 1
                    logger.exception(
                        "sweep step failed", extra={"export_id": due.export_id, "queue": queue.value}
                    )
            if len(candidates) < batch or progress == 0:
                return SweepCounts(done, refused, failed)

    def expire_lapsed_links(self) -> SweepCounts:
        def expire(due: Any, now: float) -> bool:
            ok = self.store.expire_link(due, now)
            if ok:
                state_change(due.export_id, due.book_id, "link expired")
            return ok

        counts = self._sweep(Queue.EXPIRE, expire)
        metrics.add_metric(name="LinksExpired", unit="Count", value=counts.done)
        return counts

    def unlink_ended_artifacts(self) -> SweepCounts:
        """Delete the bytes, then forget the path, in that order: a failed delete leaves the row in the
        unlink queue, and the next run tries again."""

        def unlink(due: Any, now: float) -> bool:
            self.objects.delete(due.paths)
            ok = self.store.forget_paths(due.book_id, due.export_id, now)
            if ok:
                state_change(due.export_id, due.book_id, "artifact unlinked", keys=len(due.paths))
            return ok

        counts = self._sweep(Queue.UNLINK, unlink)
        metrics.add_metric(name="UnlinksDone", unit="Count", value=counts.done)
        metrics.add_metric(name="UnlinksFailed", unit="Count", value=counts.failed)
        return counts

    def collect_garbage(self) -> dict[str, int]:
        """One GC run, in the order that lets each step feed the next: lapsed links expire and deleted books'
        exports end (both join the unlink queue), then bytes are unlinked, retired cuts removed, storage
        reconciled with the table; and the run's counts are kept as an audit row."""
        expired = self.expire_lapsed_links()
        purged = self.books.purge_deleted_books()
        unlinked = self.unlink_ended_artifacts()
        retired = self.books.retire_cuts()
        result = {
            "expired": expired.done,
            "unlinked": unlinked.done,
            "unlink_failures": unlinked.failed,
            "books_purged": purged.done,
            "cuts_retired": retired.done,
            "chore_failures": purged.failed + retired.failed,
            **self.reconcile_orphans(),
        }
        self.store.record_audit(result, self.clock())
        if any(result[k] for k in result if k not in ("orphans_scanned", "cursor_pass")):
            logger.info("expiry gc done", extra=result)
        return result

    def reconcile_orphans(self) -> dict[str, int]:
        """Storage against the table: artifact objects older than the longest lease that no row names are
        deleted and counted. Each run reads one bounded page of keys and moves a persisted cursor forward;
        at the end of the prefix the pass number goes up and the next run starts over."""
        now = self.clock()
        pass_no, after = self.store.orphan_cursor()
        page, more = self.objects.list_page(ARTIFACT_PREFIX, after, self.settings.reconcile_batch)
        # Younger than the longest lease plus its retry grace, an object may belong to an attempt whose
        # claim we have not seen yet: leave it for a later pass.
        settled = now - (self.settings.lease_seconds + self.settings.retry_grace_seconds)
        candidates = [key for key, modified in page if modified < settled]
        named = self.store.named_artifacts(candidates, now)
        orphans = [key for key in candidates if key not in named]
        self.objects.delete(orphans)
        for key in orphans:
            logger.warning("orphan artifact deleted", extra={"key": key})
        next_cursor = (pass_no, page[-1][0]) if more and page else (pass_no + 1, "")
        self.store.set_orphan_cursor(*next_cursor)
        aborted = self.objects.abort_stale_uploads(ARTIFACT_PREFIX, settled)
        metrics.add_metric(name="OrphansReconciled", unit="Count", value=len(orphans))
        return {
            "orphans_scanned": len(page),
            "orphans_deleted": len(orphans),
            "uploads_aborted": aborted,
            "cursor_pass": next_cursor[0],
        }

    def fail_stale_exports(self) -> SweepCounts:
        def fail(due: Any, now: float) -> bool:
            code = self.store.fail_stale(due, now)
            if code is not None:
                metrics.add_metric(name=f"StaleSwept_{code.value}", unit="Count", value=1)
                state_change(due.export_id, due.book_id, "export failed", failure_code=code.value)
            return code is not None

        return self._sweep(Queue.STALE, fail)


class _Progress:
    """Publishes chapters done out of total, at most once every PROGRESS_SECONDS: a poll shows it while the
    export is pending, and a big book does not pay a write per chapter."""

    def __init__(self, exports: Exports, export: Export, total: int):
        self.exports, self.export, self.total = exports, export, total
        self.last = exports.clock()

    def chapter_done(self, done: int) -> None:
        now = self.exports.clock()
        if now - self.last >= PROGRESS_SECONDS and done < self.total:
            self.last = now
            try:
                self.exports.store.record_progress(self.export, done, self.total)
            except StorageError:
                # Progress is a courtesy to the poll: a throttled write of it must not stop the build.
                logger.warning("progress not recorded", exc_info=True)


def _encode_cursor(export_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": export_id}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        after = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))["after"]
    except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error):
        after = None
    if not isinstance(after, str) or not valid_id(after):
        raise errors.BadRequest("cursor is not one this API issued", code="invalid_cursor")
    return after


@lru_cache(maxsize=1)
def default_exports() -> Exports:
    """The process's service, built on first use. Building it makes no AWS call."""
    return Exports.from_settings(settings())
