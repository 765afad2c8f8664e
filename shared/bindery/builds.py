"""What the build worker does: claim an export exclusively, build it into S3, and finish it.

Each attempt writes its own artifact key, named in the row before any byte is written, and every later
write of the attempt is fenced by its attempt number (`bindery.storage.claims`). An outcome is a
:class:`~bindery.states.BuildOutcome`, never a formatted string.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Iterator
from typing import Any

from bindery import engine
from bindery.chapter_lists import read_chapter_list
from bindery.clock import Clock
from bindery.config import Settings
from bindery.engine import typography
from bindery.engine.anchors import Anchors
from bindery.faults import translated
from bindery.limits import CallerClass
from bindery.manuscript import cut
from bindery.objects import READ_CHUNK, SKIP_BYTES, Objects, artifact_key, asset_key, cut_key
from bindery.observability import logger, metrics, state_change
from bindery.piece_cache import BuildPieces
from bindery.settlement import after_ending, settle_batch
from bindery.states import BuildOutcome, ClaimRefusal, Ending, FailureCode
from bindery.storage import (
    BUNDLE,
    BatchRows,
    Book,
    BookRows,
    Chapter,
    Claimed,
    ClaimRows,
    EndedTarget,
    Export,
    StorageError,
)
from bindery.streams import ForwardReader
from bindery.threads import Beside, alongside

PROGRESS_SECONDS = 3.0


class RetryLater(Exception):
    """The build could not run now for a reason that may pass (a lease held, S3 throttling)."""


class Builds:
    """What the build worker does with the export a message names."""

    def __init__(
        self,
        settings: Settings,
        book_rows: BookRows,
        claim_rows: ClaimRows,
        batch_rows: BatchRows,
        objects: Objects,
        clock: Clock,
    ):
        self.settings, self.objects, self.clock = settings, objects, clock
        self.book_rows, self.claim_rows, self.batch_rows = book_rows, claim_rows, batch_rows

    def build(self, book_id: str, export_id: str) -> BuildOutcome:
        """Claim the export, build it into S3, and finish it. Returns what happened, in one word.

        Raises RetryLater when the message should come back: another attempt holds a live lease (it may
        yet die), or AWS failed under us, in which case the lease is given back first so the redelivery
        need not wait it out. Anything the engine raises fails the export instead, because building it
        again would raise again.
        """
        now, started = self.clock(), time.perf_counter()
        claim = secrets.token_hex(8)
        path = artifact_key(book_id, export_id, claim)
        outcome = self.claim_rows.claim_build(book_id, export_id, path, now)
        if not isinstance(outcome, Claimed):
            if outcome.reason == ClaimRefusal.HELD:
                raise RetryLater("another attempt holds the lease")
            logger.info("claim refused", extra={"export_id": export_id, "reason": outcome.reason})
            ended = outcome.export
            if outcome.reason == ClaimRefusal.ENDED and ended is not None and ended.batch_id is not None:
                # A build message comes back when the attempt that ended its target died before it was
                # answered: maybe between the ending and its batch's settlement, a write of its own. The
                # redelivery settles it now rather than leaving it to the batch sweep, minutes later
                # (settle_batch changes nothing while a target is pending, or once the batch has ended).
                settle_batch(self.batch_rows, ended.counted_against, ended.batch_id, now)
            return BuildOutcome.refused(outcome.reason)
        export = outcome.export
        state_change(export.id, book_id, "export claimed", attempt=export.attempt)
        try:
            if export.format == BUNDLE:
                return self._build_bundle(export, path)
            return self._build_claimed(export, path, started)
        except StorageError as exc:
            try:
                self.claim_rows.release_claim(export, self.clock())
            except StorageError:
                logger.warning("could not give the lease back; it runs out by itself", exc_info=True)
            raise RetryLater(f"storage failed during the build: {exc}") from exc

    def _build_claimed(self, export: Export, path: str, started: float) -> BuildOutcome:
        pieces = self._pieces(export.book_id, export.format)
        # The cache's head is read (and the packs it names opened) beside the book's row and chapter list,
        # which it depends on in no way: three or four round trips a warm build no longer makes in turn.
        head = Beside(pieces.start if pieces is not None else None)
        try:
            outcome = self._build_read(export, path, started, pieces, head)
        finally:
            head.join()
            if pieces is not None:
                pieces.close()  # what a build that ended early opened of it
        head.wait()  # a crash in its thread, if any, is the build's
        return outcome

    def _build_read(
        self, export: Export, path: str, started: float, pieces: BuildPieces | None, head: Beside
    ) -> BuildOutcome:
        book_id = export.book_id
        book = self.book_rows.read_book(book_id)
        if book is None:
            # The book was deleted after this export was accepted: it goes with its book.
            ended = self._abandon(export)
            return BuildOutcome.CANCELLED_BOOK_DELETED if ended else BuildOutcome.CANCEL_REFUSED
        if not book.chapter_count:
            # A book with nothing cut has nothing to build from: never send it to the engine.
            return self._fail(export, FailureCode.EMPTY_BOOK)

        # A markdown export is the revision's manuscript, copied; with images, it is rendered as a zip.
        copies = export.format in engine.COPIES_MANUSCRIPT and not book.assets
        # The chapter list is read before the renderer is imported: parsing it is the build's peak of memory
        # outside the engine, and it peaks lower in the smaller process (10 MiB at 5,000 chapters).
        chapters, anchors = ([], None) if copies else self._chapters(book)
        renderer = engine.renderer_for(export.format)
        limit = getattr(renderer, "max_manuscript_bytes", None)
        if export.format == "pdf":
            # The caller's class may hold it to less than the renderer can typeset.
            held_to = self.settings.limits(CallerClass(export.caller_class or CallerClass.STANDARD))
            limit = min(limit or held_to.pdf_manuscript_bytes, held_to.pdf_manuscript_bytes)
        if limit is not None and book.manuscript_bytes > limit:
            # Fail early and say why, rather than die of memory halfway through.
            return self._fail(export, FailureCode.TOO_LARGE_FOR_FORMAT)
        content_type = engine.FORMATS[export.format].content_type
        writer = self.objects.writer(path, content_type)
        head.wait()  # the cache is read from here on
        try:
            if copies:
                # The revision's text is the artifact: no chapter is read, so neither are their rows.
                sha256 = self.objects.copy(cut_key(book.id, book.cut), path, content_type)
                report, size = engine.Report(), book.manuscript_bytes
            else:
                source = engine.Source(
                    book.id,
                    book.title,
                    book.revision,
                    tuple(c.title for c in chapters),
                    book.updated_at,
                    metadata=book.metadata,
                    assets=book.assets,
                    options=export.options,
                    read_asset=lambda asset: self.objects.chunks(asset_key(book.id, asset.object_id)),
                    pieces=pieces,
                    anchors=anchors,
                ).set_titles()
                progress = _Progress(self, export, len(chapters))
                texts = self._chapter_texts(book, chapters, progress, source.quotes)
                report = renderer.render(source, texts, writer)
                size = writer.commit()
                sha256 = writer.sha256
        except StorageError:
            writer.abort()
            if pieces is not None:
                pieces.abandon()
            raise
        except Exception:
            writer.abort()
            if pieces is not None:
                pieces.abandon()
            logger.exception("engine failed", extra={"export_id": export.id})
            return self._fail(export, FailureCode.RENDER_FAILED)
        # The artifact is whole, so its pieces are right: kept for the next build (which never fails this
        # one), their pack and head written while the export is finished, not before (some 8 ms of a 0.1 s
        # re-export). Neither waits on the other: a head names only a pack that is whole, and a finish
        # refused removes this build's pieces below, once they are written.
        with alongside(pieces.finish if pieces is not None else None):
            ending = self.claim_rows.finish_export(
                export,
                path=path,
                size_bytes=size,
                skipped=report.skipped,
                notes=report.notes,
                sha256=sha256,
                package=report.package,
                built_revision=book.revision,
                now=self.clock(),
            )
        if ending != Ending.BOOK_DELETED:  # then the row is still pending, and still this attempt's
            self._after_ending(export)
        if ending != Ending.ENDED:
            # The row was ended meanwhile (cancelled, or swept), or its book was deleted: no row will
            # publish these bytes, so this attempt removes what it wrote rather than leave it for
            # reconciliation. (A finish whose own first try went through, answer lost, is "ended".)
            self.objects.delete([path])
            if ending == Ending.BOOK_DELETED:
                if pieces is not None:
                    # The book's purge may have emptied its cache before this build wrote to it.
                    self.objects.delete(pieces.written())
                ended = self._abandon(export)
                state_change(export.id, book_id, "book deleted during the build; artifact removed")
                return BuildOutcome.CANCELLED_BOOK_DELETED if ended else BuildOutcome.CANCEL_REFUSED
            state_change(export.id, book_id, "finish refused; artifact removed", attempt=export.attempt)
            return BuildOutcome.FINISH_REFUSED
        metrics.add_metric(name="ExportsReady", unit="Count", value=1)
        metrics.add_metric(
            name="BuildDuration", unit="Milliseconds", value=(time.perf_counter() - started) * 1000
        )
        metrics.add_metric(name="ArtifactBytes", unit="Bytes", value=size)
        state_change(export.id, book_id, "export ready", size_bytes=size, attempt=export.attempt)
        return BuildOutcome.READY

    def _pieces(self, book_id: str, fmt: str) -> BuildPieces | None:
        """The book's cache of built pieces for this format, its head not read yet (`start`); None when the
        renderer reuses none, or the cache is off."""
        if self.settings.piece_cache != "on" or fmt not in engine.REUSES_PIECES:
            return None
        # The bound is a book's, all its formats together: each format that keeps pieces gets its share.
        share = self.settings.piece_cache_max_bytes // len(engine.REUSES_PIECES)
        return BuildPieces(self.objects, book_id, fmt, share)

    def _build_bundle(self, bundle: Export, path: str) -> BuildOutcome:
        """A batch's zip: its ready targets' files, streamed into one upload, and their manifest."""
        # Here, not at the top: zipfile (and the compressors it loads) is no part of the API's cold start.
        from bindery import bundles

        found = self.batch_rows.read_batch(bundle.counted_against, bundle.book_id, self.clock())
        files = bundles.ready_files(found[1] if found else [], self.clock())
        if not files:
            # Every target's link lapsed (or was ended) before the bundle could be built.
            return self._fail(bundle, FailureCode.EMPTY_BOOK)
        writer = self.objects.writer(path, engine.ZIP.content_type)
        try:
            bundles.write_bundle(files, self.objects.chunks, writer)
            size = writer.commit()
        except StorageError:
            writer.abort()
            raise
        except bundles.Damaged:
            writer.abort()
            logger.exception("a bundled file is damaged", extra={"export_id": bundle.id})
            return self._fail(bundle, FailureCode.RENDER_FAILED)
        ending = self.claim_rows.finish_export(
            bundle, path=path, size_bytes=size, built_revision=0, sha256=writer.sha256, now=self.clock()
        )
        self._after_ending(bundle)
        if ending != Ending.ENDED:
            self.objects.delete([path])  # its batch was cancelled meanwhile: no row will publish these bytes
            return BuildOutcome.FINISH_REFUSED
        state_change(bundle.id, bundle.book_id, "bundle ready", size_bytes=size, files=len(files))
        return BuildOutcome.READY

    def _chapters(self, book: Book) -> tuple[list[Chapter], Anchors]:
        """The cut's chapters and anchors: its list, one GET (bindery.chapter_lists), or else its items;
        and, when the list holds no anchors (written before they were kept, or not whole), the anchors of
        its manuscript cut again, so that the book built is the one its anchors make."""
        listed, anchors = read_chapter_list(self.objects, book.id, book.cut, book.chapter_count)
        chapters = listed if listed is not None else self.book_rows.read_chapters(book.id, book.cut)
        if anchors is None:
            anchors = Anchors()
            for _ in cut(self.objects.lines(cut_key(book.id, book.cut)), anchors):
                pass
        return chapters, anchors

    def _chapter_texts(
        self,
        book: Book,
        chapters: list[Chapter],
        progress: _Progress,
        quotes: typography.Quotes | None = None,
    ) -> Iterator[engine.Text]:
        """Each chapter, in order, its text read from the cut's manuscript only when the renderer asks for
        it (`_Manuscript`): a cold build reads the whole book in one streaming GET, and a re-export that
        reuses every piece but one reads that one chapter. Memory holds one chapter."""
        manuscript = _Manuscript(self.objects, cut_key(book.id, book.cut))
        try:
            for done, chapter in enumerate(chapters, start=1):
                load = functools.partial(manuscript.read, chapter.offset, chapter.size_bytes)
                yield engine.Text(
                    chapter.ordinal,
                    typography.plain(chapter.title, quotes),
                    load=load,
                    digest=chapter.sha256 or None,
                    size=chapter.size_bytes,
                )
                progress.chapter_done(done)
        finally:
            manuscript.close()

    def _fail(self, export: Export, code: FailureCode) -> BuildOutcome:
        failed = self.claim_rows.fail_export(export, code, self.clock())
        self._after_ending(export)
        if failed:
            metrics.add_metric(name=f"ExportsFailed_{code.value}", unit="Count", value=1)
            state_change(export.id, export.book_id, "export failed", failure_code=code.value)
            return BuildOutcome.failed(code)
        return BuildOutcome.FAIL_REFUSED

    def _abandon(self, export: Export) -> bool:
        ended = self.claim_rows.cancel_attempt(export, self.clock())
        self._after_ending(export)
        return ended

    def _after_ending(self, export: Export) -> None:
        """The attempt's ending is in, or refused: either way a batch's target may have ended (by it, or
        before it), and its batch may have ended with it."""
        if export.batch_id is not None:
            after_ending(self.batch_rows, EndedTarget(export.counted_against, export.batch_id), self.clock())


class _Manuscript:
    """A cut's manuscript, read forward as chapters ask for their text: one GET for any run of chapters read
    in order, skipping what lies between them, and a ranged GET past a gap of more than SKIP_BYTES (or back).
    A read that fails mid-stream is a StorageError, a reason to retry, not a reason to fail the export."""

    def __init__(self, objects: Objects, key: str):
        self.objects, self.key = objects, key
        self._body: Any = None
        self._at = 0  # where the open body stands

    def read(self, offset: int, size: int) -> bytes:
        with translated("reading the manuscript"):
            if self._body is None or offset < self._at or offset - self._at > SKIP_BYTES:
                self.close()
                body = self.objects.open_from(self.key, offset) if offset else self.objects.open(self.key)
                self._body, self._at = ForwardReader(body), offset
            while self._at < offset:
                skipped = self._body.read(min(READ_CHUNK, offset - self._at))
                if not skipped:
                    break  # the body ends early: the read below gives nothing
                self._at += len(skipped)
            data: bytes = self._body.read(size)
        self._at = offset + len(data)
        return data

    def close(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None


class _Progress:
    """Publishes chapters done out of total, at most once every PROGRESS_SECONDS: a poll shows it while the
    export is pending, and a big book does not pay a write per chapter."""

    def __init__(self, builds: Builds, export: Export, total: int):
        self.builds, self.export, self.total = builds, export, total
        self.last = builds.clock()

    def chapter_done(self, done: int) -> None:
        now = self.builds.clock()
        if now - self.last >= PROGRESS_SECONDS and done < self.total:
            self.last = now
            try:
                self.builds.claim_rows.record_progress(self.export, done, self.total)
            except StorageError:
                # Progress is a courtesy to the poll: a throttled write of it must not stop the build.
                logger.warning("progress not recorded", exc_info=True)
