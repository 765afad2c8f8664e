"""Books: create, read, edit, replace the manuscript, upload a large one, delete; and the GC's book chores.

Every revision is an immutable *cut*: its manuscript object and its chapter items (titles and byte ranges).
A replacement stages a new cut and then publishes it in one conditional write, so a build that read the
book's cut reads exactly that revision to the end, whatever happens to the book meanwhile. The old cut is
retired a lease later, once no build can still be reading it.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bindery import errors
from bindery.chapter_lists import write_chapter_list
from bindery.clock import Clock, iso
from bindery.config import Settings
from bindery.errors import not_found
from bindery.idempotency import idempotency_for, key_reused
from bindery.ids import new_cut, valid_id
from bindery.metadata import Metadata, check_title, merged, package_identifier
from bindery.normalising import Normalised, normalise
from bindery.objects import Objects, cut_key, upload_key
from bindery.observability import logger
from bindery.paging import decode_cursor, encode_cursor, page_size
from bindery.purges import NotAllEnded, Purges
from bindery.revisions import (
    PUBLISH_TRIES,
    STAGE_GRACE_SECONDS,
    Revisions,
    parse_if_match,
    precondition_failed,
)
from bindery.storage import (
    Book,
    BookRows,
    Chapter,
    KeyReused,
    Marker,
    Replayed,
    StorageError,
)

if TYPE_CHECKING:
    from bindery.front_matter import FrontMatter

# A chapter's title is kept in its chapter item (and in a build's skipped list), and an item is at most
# 400 KB: a heading longer than this is refused, naming the chapter, before anything is written.
MAX_CHAPTER_TITLE = 500
# A manuscript of nothing but `# a` lines would be 1.3 million chapter items from 5 MiB. Books have tens or
# hundreds; reference works a few thousand.
MAX_CHAPTERS = 5_000
MAX_UPLOAD_BYTES = 500 * 1024 * 1024
UPLOAD_URL_SECONDS = 600
# A cursor of GET /books names a place on the shelf (`storage.table.shelf_position`): milliseconds, an id.
_SHELF_POSITION = re.compile(r"[0-9]{13}#[0-9a-f]{20}")


def _on_shelf(position: str) -> bool:
    return _SHELF_POSITION.fullmatch(position) is not None


class Library:
    """A caller's books: create, list, read, edit, replace the manuscript, upload a large one, delete (the
    deleted book's exports and images are ended by `bindery.purges.Purges`). A change is published as the
    next revision (`Revisions`); a book's images are `bindery.assets.BookAssets`'."""

    def __init__(
        self,
        settings: Settings,
        book_rows: BookRows,
        objects: Objects,
        clock: Clock,
        revisions: Revisions,
        purges: Purges,
    ):
        self.settings, self.book_rows, self.objects, self.clock = settings, book_rows, objects, clock
        self.revisions, self.purges = revisions, purges

    # ---- caller operations -----------------------------------------------------------------------

    def create_book(
        self,
        caller: str,
        title: str | None,
        manuscript: str,
        idempotency_key: str | None = None,
        metadata: Any = None,
    ) -> tuple[Book, list[Chapter], bool]:
        """A new book. Returns it, its chapters, and whether this call made it (False: a replayed
        Idempotency-Key, answered with the book the first call made). The manuscript's front matter gives
        the title and each metadata field the request does not (`bindery.front_matter`)."""
        if title is not None:
            check_title(title)
        described = merged(Metadata(), metadata) if metadata is not None else Metadata()
        if described.cover is not None:
            raise _unknown_cover(described.cover)  # a new book has no assets yet
        idempotency = None
        if idempotency_key is not None:
            request = ["POST /books", title, manuscript, described.stored()]
            idempotency = idempotency_for(caller, idempotency_key, request)
        data = self._inline(manuscript)
        now = self.clock()
        book_id, revision = secrets.token_hex(10), 1
        cut_id = new_cut(revision)
        chapters, found = self._stage(book_id, cut_id, data.splitlines(keepends=True), now)
        if found is not None:  # what the request says wins
            given = metadata if isinstance(metadata, dict) else {}
            described = merged(described, {k: v for k, v in found.metadata.items() if k not in given})
            title = title if title is not None else found.title
        if title is None:
            raise errors.BadRequest(
                "send a title, or give the manuscript one in its front matter (`title:`, or a `%` line)",
                code="missing_field",
                field="title",
            )
        self.objects.put_bytes(cut_key(book_id, cut_id), data)
        book = Book(
            book_id, caller, title.strip(), revision, cut_id, len(chapters), len(data), now, now, described
        )
        match self.book_rows.create_book(book, idempotency, now):
            case Replayed(response=response):
                made = self.book_rows.read_book_for_owner(str(response["book_id"]), caller)
                if made is None:
                    raise errors.Conflict(
                        "this Idempotency-Key made a book that has since been deleted; "
                        "send a new key to create another",
                        code="idempotent_book_deleted",
                    )
                return made, self.book_rows.read_chapters(made.id, made.cut), False
            case KeyReused():
                raise key_reused()
        logger.info("book created", extra={"book_id": book_id, "chapters": len(chapters)})
        return book, chapters, True

    def list_books(self, caller: str, limit: Any, cursor: str | None) -> dict[str, Any]:
        """The caller's books, newest first, a page at a time: each as :func:`book_summary` shows it."""
        size = page_size(limit)
        start_after = decode_cursor(cursor, _on_shelf) if cursor is not None else None
        page, next_after = self.book_rows.list_books(caller, limit=size, start_after=start_after)
        return {
            "books": [book_summary(book) for book in page],
            "next_cursor": encode_cursor(next_after) if next_after else None,
        }

    def get_book(self, caller: str, book_id: str) -> tuple[Book, list[Chapter]]:
        book = self.revisions.owned(caller, book_id)
        return book, self.book_rows.read_chapters(book_id, book.cut)

    def chapters(self, book: Book) -> list[Chapter]:
        """The chapters of the revision `book` is at: what a change's answer shows beside the book."""
        return self.book_rows.read_chapters(book.id, book.cut)

    def edit_book(self, caller: str, book_id: str, if_match: str | None, title: Any, metadata: Any) -> Book:
        """PATCH: a new title, a merge patch of the metadata, or both, as the book's next revision (the
        metadata is part of what an export builds from)."""
        if title is not None:
            check_title(title)

        def change(current: Book) -> tuple[Book, str | None]:
            described = merged(current.metadata, metadata) if metadata is not None else current.metadata
            if described.cover is not None and current.asset(described.cover) is None:
                raise _unknown_cover(described.cover)
            new_title = title.strip() if title is not None else current.title
            return replace(current, title=new_title, metadata=described), None

        book = self.revisions.publish_change(caller, book_id, if_match, change)
        logger.info("book edited", extra={"book_id": book_id, "revision": book.revision})
        return book

    def replace_manuscript(
        self,
        caller: str,
        book_id: str,
        if_match: str | None,
        *,
        manuscript: str | None,
        upload_id: str | None,
    ) -> tuple[Book, list[Chapter]]:
        """Re-cut the book from a new manuscript and bump its revision. With `If-Match: "<revision>"` a
        book that is no longer at that revision answers 412 and nothing changes. The manuscript's front
        matter, if it has one, gives the book's title and the metadata fields it names (a merge patch)."""
        expected = parse_if_match(if_match)
        book = self.revisions.owned(caller, book_id)
        if expected is not None and expected != book.revision:
            raise precondition_failed(book.revision)
        now = self.clock()
        cut_id = new_cut(book.revision + 1)
        if manuscript is not None:
            data = self._inline(manuscript)
            chapters, found = self._stage(book_id, cut_id, data.splitlines(keepends=True), now)
            self.objects.put_bytes(cut_key(book_id, cut_id), data)
            size = len(data)
        else:
            assert upload_id is not None
            chapters, size, found = self._adopt(book_id, self._upload(book_id, upload_id), cut_id, now)
        for _ in range(PUBLISH_TRIES):
            described = (book.title, book.metadata)
            if found is not None:  # read onto the book as it is now, on each try
                described = (found.title or book.title, merged(book.metadata, found.metadata))
            published = self.book_rows.publish_cut(
                book,
                cut=cut_id,
                chapter_count=len(chapters),
                manuscript_bytes=size,
                now=self.clock(),
                retire_at=self.clock() + self.settings.lease_seconds,
                described=described,
            )
            if published is not None:
                if upload_id is not None:
                    # Best effort: the revision is in, and the answer must say so. An upload left behind is
                    # removed by the bucket's lifecycle rule for books/uploads/.
                    try:
                        self.objects.delete([upload_key(book_id, upload_id)])
                    except StorageError:
                        logger.warning(
                            "adopted upload not deleted", extra={"book_id": book_id}, exc_info=True
                        )
                logger.info("manuscript replaced", extra={"book_id": book_id, "chapters": len(chapters)})
                return published, chapters
            # The book moved on since we read it. Under If-Match that is the 412 the caller asked for;
            # without it, the newest replacement wins, so try again on top of what is there now. Either
            # way the staged cut keeps its retire marker until it is published, so nothing leaks.
            current = self.book_rows.read_book_for_owner(book_id, caller)
            if current is None:
                raise not_found()
            if expected is not None:
                raise precondition_failed(current.revision)
            book = current
        raise errors.Conflict("the book kept changing; try again", code="concurrent_replacement")

    def create_upload(self, caller: str, book_id: str) -> dict[str, Any]:
        self.revisions.owned(caller, book_id)
        upload_id = secrets.token_hex(12)
        post = self.objects.presign_upload(
            upload_key(book_id, upload_id), MAX_UPLOAD_BYTES, UPLOAD_URL_SECONDS
        )
        # A form POST: send `fields` as they are, then the manuscript as the form's `file`, last.
        return {
            "upload_id": upload_id,
            "upload_url": post["url"],
            "method": "POST",
            "fields": post["fields"],
            "expires_at": iso(self.clock() + UPLOAD_URL_SECONDS),
            "max_bytes": MAX_UPLOAD_BYTES,
        }

    def delete_book(self, caller: str, book_id: str) -> None:
        """The book and its chapters go now; its pending exports are cancelled and its ready ones' bytes
        deleted before the answer, so a link handed out earlier stops working at once. The delete itself
        is one transaction that leaves the GC its chores, so a crash after it still ends everything."""
        tried = False
        for _ in range(PUBLISH_TRIES):
            book = self.book_rows.read_book_for_owner(book_id, caller) if valid_id(book_id) else None
            if book is None:
                if not tried:
                    raise not_found()
                # Our delete was refused because the book is gone: deleted by this very request's earlier
                # try (its answer lost) or by the owner's other request meanwhile. Either way, it is
                # deleted, as asked; the purge marker that delete wrote owes the GC the rest.
                break
            tried = True
            had_assets = bool(book.assets)
            if self.book_rows.delete_book(book, self.clock()):
                logger.info("book deleted", extra={"book_id": book_id})
                break
        else:
            raise errors.Conflict("the book kept changing; try again", code="concurrent_replacement")
        # Do the chores now too, so the caller's pending exports read cancelled and its links stop at once;
        # the GC finishes whatever this does not.
        try:
            # A book with images leaves their removal, and so its marker, to the GC: the API's role may not
            # delete a book's bytes (only its uploads'), and a link must stop now, its images need not.
            self.purges.purge(Marker(book_id, None), images="leave" if had_assets else "none")
        except (StorageError, NotAllEnded):
            logger.warning("purge left to the GC", extra={"book_id": book_id}, exc_info=True)

    # ---- helpers ---------------------------------------------------------------------------------

    def _adopt(
        self, book_id: str, source: str, cut_id: str, now: float
    ) -> tuple[list[Chapter], int, FrontMatter | None]:
        """Cut an upload in one streaming read, and keep it as the cut's manuscript. An upload that is
        already normal (the usual LF file) is kept by a server-side copy, so its bytes pass through the
        function once; one that is not (CRLF, a BOM, no final newline) is streamed a second time,
        normalised, into a multipart upload."""
        lines = Normalised(self.objects.lines(source))
        chapters, found = self._stage(book_id, cut_id, lines, now)
        if lines.changed:
            self.objects.write_lines(cut_key(book_id, cut_id), Normalised(self.objects.lines(source)))
        else:
            self.objects.copy(source, cut_key(book_id, cut_id))
        return chapters, lines.size, found

    def _inline(self, manuscript: str) -> bytes:
        data = manuscript.encode("utf-8")
        if len(data) > self.settings.max_manuscript_bytes:
            raise errors.PayloadTooLarge(
                f"the manuscript is over {self.settings.max_manuscript_bytes // (1024 * 1024)} MB; "
                "upload it with POST /books/{bookId}/uploads and then "
                'PUT /books/{bookId}/manuscript with {"upload_id": ...}',
                code="manuscript_too_large",
            )
        return normalise(data)

    def _upload(self, book_id: str, upload_id: str) -> str:
        if not valid_id(upload_id):
            raise errors.BadRequest("upload_id is not one this API issued", code="invalid_upload_id")
        key = upload_key(book_id, upload_id)
        size = self.objects.size(key)
        if size is None:
            raise errors.Unprocessable("nothing was uploaded under this upload_id", code="upload_not_found")
        if size > MAX_UPLOAD_BYTES:
            raise errors.PayloadTooLarge(
                f"the upload is {size} bytes; the most a manuscript may be is {MAX_UPLOAD_BYTES}",
                code="manuscript_too_large",
            )
        return key

    def _stage(
        self, book_id: str, cut_id: str, lines: Iterable[bytes], now: float
    ) -> tuple[list[Chapter], FrontMatter | None]:
        """The manuscript's chapters, staged as a cut, and what its front matter says (read, and refused if
        it must be, before anything is written)."""
        # The cut and what it reads load here, when a manuscript comes, not with every cold route.
        from bindery import front_matter
        from bindery.engine.anchors import Anchors
        from bindery.manuscript import cut

        chapters, anchors, front = [], Anchors(), list[bytes]()
        for n, section in enumerate(cut(lines, anchors, front), start=1):
            if n > MAX_CHAPTERS:
                raise errors.Unprocessable(
                    f"the manuscript has more than {MAX_CHAPTERS:,} chapters (level-1 headings), the most "
                    "a book may have",
                    code="too_many_chapters",
                    limit=MAX_CHAPTERS,
                )
            if len(section.title) > MAX_CHAPTER_TITLE:
                raise errors.Unprocessable(
                    f"chapter {n}'s title is {len(section.title):,} characters; "
                    f"the most a chapter title may be is {MAX_CHAPTER_TITLE}",
                    code="chapter_title_too_long",
                    chapter=n,
                    limit=MAX_CHAPTER_TITLE,
                )
            chapters.append(Chapter(n, section.title, section.offset, section.length, section.sha256))
        try:
            found = front_matter.read(b"".join(front)) if front else None
        except front_matter.Mistake as exc:
            raise errors.Unprocessable(
                f"the manuscript's front matter, line {exc.line}: {exc.where}: {exc.problem}",
                code="invalid_front_matter",
                line=exc.line,
                field=exc.where,
            ) from None
        if found is not None:
            merged(Metadata(), found.metadata)  # (its values' own rules, before anything is written)
            if found.title is not None:
                check_title(found.title)
        self.book_rows.stage_cut(book_id, cut_id, chapters, retire_at=now + STAGE_GRACE_SECONDS)
        write_chapter_list(
            self.objects, book_id, cut_id, chapters, anchors
        )  # after the marker that retires it
        return chapters, found


def _unknown_cover(name: str) -> errors.Unprocessable:
    return errors.Unprocessable(
        f"metadata.cover names {name!r}, which is not one of the book's assets; add it first",
        code="unknown_cover",
        field="metadata.cover",
    )


def book_summary(book: Book) -> dict[str, Any]:
    """A book as a list shows it: what GET /books/{id} says of it but its chapters and assets, counted."""
    return {
        "id": book.id,
        "title": book.title,
        "revision": book.revision,
        "identifier": package_identifier(book.id, book.metadata),
        "metadata": book.metadata.view(),
        "manuscript_bytes": book.manuscript_bytes,
        "chapters_total": book.chapter_count,
        "assets_total": len(book.assets),
        "created_at": iso(book.created_at),
        "updated_at": iso(book.updated_at),
    }
