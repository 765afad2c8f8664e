"""Books and their cuts: a book item, the chapters of each cut, and the markers that owe the GC a chore.

Every revision is an immutable cut. Its chapters are staged before anything names them, behind a retire
marker written first, and one conditional write makes a cut current: a reader that finds the book finds
every chapter of its cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bindery import images
from bindery.config import Settings
from bindery.faults import StorageError, item_or_none, translate_faults
from bindery.metadata import Metadata
from bindery.states import Queue
from bindery.storage.conditions import (
    Tx,
)
from bindery.storage.idempotency import KeyRows, key_seen
from bindery.storage.table import (
    PURGE_SK,
    SHELF_PREFIX,
    BookItem,
    ChapterItem,
    Item,
    MarkersDue,
    Models,
    Rows,
    book_pk,
    caller_pk,
    chapter_prefix,
    retire_asset_sk,
    retire_sk,
    shelf_position,
    shelf_sk,
    to_book,
)
from bindery.storage.types import Book, Chapter, KeyReused, Marker, Replayed


@translate_faults
class BookRows(Rows):
    def __init__(self, settings: Settings, models: Models, keys: KeyRows):
        super().__init__(settings, models)
        self.keys = keys

    def stage_cut(self, book_id: str, cut: str, chapters: Sequence[Chapter], retire_at: float) -> None:
        """Write a cut's chapters before anything names them, behind a retire marker written FIRST.

        Should the caller die before :meth:`create_book` or :meth:`publish_cut` adopts the cut, the marker
        is what makes the GC remove the stranded chapters and text; adopting the cut deletes the marker in
        the same transaction that makes the cut current.
        """
        self.models.marker(
            book_pk(book_id), retire_sk(cut), queue=Queue.RETIRE.value, due_at=retire_at
        ).save()
        with self.models.chapter.batch_write() as batch:
            for chapter in chapters:
                batch.save(
                    self.models.chapter(
                        book_pk(book_id),
                        f"{chapter_prefix(cut)}{chapter.ordinal:06d}",
                        title=chapter.title,
                        offset=chapter.offset,
                        size_bytes=chapter.size_bytes,
                    )
                )

    def create_book(
        self, book: Book, idempotency: tuple[str, str] | None = None, now: float = 0.0
    ) -> Replayed | KeyReused | None:
        """Make a staged cut a book. The book item is the commit point: a reader that finds the book finds
        every chapter of its cut, because they were all written before it.

        With `idempotency` (the caller's key digest, the request's hash), the key is taken in the same
        write: a retry of a create that went through answers with the book it made (Replayed), and the
        retry's own staged cut keeps its retire marker, so the GC removes it. None: this call made it."""
        tx = Tx()
        tx.delete("marker", self.models.marker(book_pk(book.id), retire_sk(book.cut)))
        # attribute_not_exists: ids are random, but a retried create must never overwrite a book.
        tx.put("book", self._book_item(book), BookItem.pk.does_not_exist(), old=True)
        # The book's place on its owner's shelf (GET /books), in the same write: a listed book exists, and
        # a book that exists is listed. It is a new key whenever the book is, so it needs no guard of its own.
        tx.put("shelf", self._shelf_item(book))
        if idempotency is not None:
            self.keys.take_key(tx, idempotency, {"book_id": book.id}, now)
        refused = tx.commit(self._connection())
        if refused is None:
            return None
        # A book holding this very cut is this create's own, applied by a try whose answer was lost.
        made = refused.old(BookItem, "book")
        if made is not None and made.cut == book.cut:
            return None
        seen = key_seen(refused, idempotency)
        if seen is None:
            raise StorageError(f"book {book.id} exists already (an id collision)")
        return seen

    def _shelf_item(self, book: Book) -> Item:
        return self.models.item(caller_pk(book.owner), shelf_sk(shelf_position(book.created_at, book.id)))

    def _book_item(self, book: Book) -> BookItem:
        return self.models.book(
            book_pk(book.id),
            "BOOK",
            owner=book.owner,
            title=book.title,
            revision=book.revision,
            cut=book.cut,
            chapter_count=book.chapter_count,
            manuscript_bytes=book.manuscript_bytes,
            created_at=book.created_at,
            updated_at=book.updated_at,
            metadata=book.metadata.stored(),
            assets=images.stored(book.assets),
        )

    def publish_cut(
        self,
        current: Book,
        *,
        cut: str,
        chapter_count: int,
        manuscript_bytes: int,
        now: float,
        retire_at: float,
        described: tuple[str, Metadata] | None = None,
    ) -> Book | None:
        """Make a staged cut the book's next revision, if the book is still at `current.revision`; with
        `described`, its title and metadata too (the manuscript's front matter said them).

        One transaction moves the book to the new cut, drops the new cut's retire marker, and marks the old
        cut for retirement once no build can still be reading it (`retire_at`, a lease from now). None means
        the book moved on (or was deleted) meanwhile: the caller decides between 412 and another try.
        """
        pk = book_pk(current.id)
        tx = Tx()
        tx.update(
            "book",
            self.models.book(pk, "BOOK"),
            [
                BookItem.revision.add(1),
                BookItem.cut.set(cut),
                BookItem.chapter_count.set(chapter_count),
                BookItem.manuscript_bytes.set(manuscript_bytes),
                BookItem.updated_at.set(now),
                *(_described(*described) if described is not None else ()),
            ],
            # `revision = read`: the If-Match gate, and the guard that a concurrent replacement is not
            # silently overwritten by a writer that never saw it.
            (BookItem.owner == current.owner)
            & (BookItem.revision == current.revision)
            & (BookItem.cut == current.cut),
            old=True,
        )
        tx.delete("new_cut_marker", self.models.marker(pk, retire_sk(cut)))
        tx.put(
            "old_cut_marker",
            self.models.marker(pk, retire_sk(current.cut), queue=Queue.RETIRE.value, due_at=retire_at),
        )
        refused = tx.commit(self._connection())
        if refused is not None:
            # The book already on this very cut, one revision on, is this publish's own earlier try.
            seen = refused.old(BookItem, "book")
            if seen is not None and seen.cut == cut and int(seen.revision) == current.revision + 1:
                return to_book(seen)
            return None
        title, metadata = described if described is not None else (current.title, current.metadata)
        return replace(
            current,
            revision=current.revision + 1,
            cut=cut,
            chapter_count=chapter_count,
            manuscript_bytes=manuscript_bytes,
            updated_at=now,
            title=title,
            metadata=metadata,
        )

    def publish_change(
        self, current: Book, changed: Book, *, staged: str | None, retired: str | None, retire_at: float
    ) -> Book | None:
        """Make `changed` (its title, metadata and assets) the book's next revision, if the book is still at
        `current.revision` on `current.cut`: the same gate as :meth:`publish_cut`, so a metadata edit and a
        manuscript replacement can never both win from one revision.

        `staged` is the object id of an asset adopted by this change: its stage marker goes in the same
        write. `retired` is the object id of an asset this change lets go: it is marked for removal once no
        build can still be reading it (`retire_at`). None means the book moved on (or went) meanwhile.
        """
        pk = book_pk(current.id)
        revision = current.revision + 1
        metadata, assets = changed.metadata.stored(), images.stored(changed.assets)
        tx = Tx()
        tx.update(
            "book",
            self.models.book(pk, "BOOK"),
            [
                BookItem.revision.set(revision),
                BookItem.title.set(changed.title),
                BookItem.metadata.set(metadata) if metadata else BookItem.metadata.remove(),
                BookItem.assets.set(assets) if assets else BookItem.assets.remove(),
                BookItem.updated_at.set(changed.updated_at),
            ],
            (BookItem.owner == current.owner)
            & (BookItem.revision == current.revision)
            & (BookItem.cut == current.cut),
            old=True,
        )
        if staged is not None:
            tx.delete("staged_marker", self.models.marker(pk, retire_asset_sk(staged)))
        if retired is not None:
            tx.put(
                "retired_marker",
                self.models.marker(pk, retire_asset_sk(retired), queue=Queue.RETIRE.value, due_at=retire_at),
            )
        refused = tx.commit(self._connection())
        published = Book(**{**changed.__dict__, "revision": revision})
        if refused is not None:
            # The book at the next revision with exactly this change is this publish's own earlier try.
            seen = refused.old(BookItem, "book")
            if (
                seen is None
                or int(seen.revision) != revision
                or (seen.title, seen.metadata, seen.assets) != (changed.title, metadata, assets)
            ):
                return None
        return published

    def stage_asset(self, book_id: str, object_id: str, retire_at: float) -> None:
        """Mark an asset's object for removal BEFORE its bytes are copied in: should the adoption die before
        :meth:`publish_change` names the object, the GC removes it, so an upload can never leak bytes."""
        marker = self.models.marker(
            book_pk(book_id), retire_asset_sk(object_id), queue=Queue.RETIRE.value, due_at=retire_at
        )
        marker.save()

    def delete_book(self, book: Book, now: float) -> bool:
        """Delete the book and owe the GC the rest, in one transaction: the book item goes, its cut is
        marked for retirement, and a purge marker says its exports are still to be ended. A crash after
        this leaves chores the GC finishes, never a half-deleted book. False: it changed (or went)
        meanwhile; the caller reads it again to tell which."""
        pk = book_pk(book.id)
        tx = Tx()
        # `cut = read`: a replacement published meanwhile must not be deleted by a writer that never saw it.
        tx.delete(
            "book", self.models.book(pk, "BOOK"), (BookItem.owner == book.owner) & (BookItem.cut == book.cut)
        )
        tx.delete("shelf", self._shelf_item(book))
        tx.put("retire", self.models.marker(pk, retire_sk(book.cut), queue=Queue.RETIRE.value, due_at=now))
        tx.put("purge", self.models.marker(pk, PURGE_SK, queue=Queue.PURGE.value, due_at=now))
        return tx.commit(self._connection()) is None

    def read_book(self, book_id: str) -> Book | None:
        """The book, whoever owns it. Callers' reads go through :meth:`read_book_for_owner`."""
        item = item_or_none(lambda: self.models.book.get(book_pk(book_id), "BOOK", consistent_read=True))
        return None if item is None else to_book(item)

    def read_book_for_owner(self, book_id: str, owner: str) -> Book | None:
        book = self.read_book(book_id)
        # A stranger's book answers exactly as a missing one does (API1, BOLA).
        return book if book is not None and book.owner == owner else None

    def list_books(self, owner: str, *, limit: int, start_after: str | None) -> tuple[list[Book], str | None]:
        """One page of the owner's books, newest first, and the shelf position to start after for the next
        page (None at the end). The shelf is read first, then its books in one BatchGetItem: a book deleted
        between the two reads is left out rather than shown half-gone."""
        start = {"pk": {"S": caller_pk(owner)}, "sk": {"S": shelf_sk(start_after)}} if start_after else None
        shelf = self.models.item.query(
            caller_pk(owner),
            Item.sk.startswith(SHELF_PREFIX),
            scan_index_forward=False,
            consistent_read=True,
            limit=limit,
            last_evaluated_key=start,
            page_size=limit,
        )
        ids = [entry.sk.rsplit("#", 1)[1] for entry in shelf]
        found = {
            book.id: book
            for book in map(
                to_book, self.models.book.batch_get([(book_pk(i), "BOOK") for i in ids], consistent_read=True)
            )
            # Ownership is the book row's, never the shelf's alone.
            if book.owner == owner
        }
        next_after = None
        if shelf.last_evaluated_key is not None:
            next_after = shelf.last_evaluated_key["sk"]["S"].removeprefix(SHELF_PREFIX)
        return [found[i] for i in ids if i in found], next_after

    def read_chapters(self, book_id: str, cut: str) -> list[Chapter]:
        """The cut's chapters, in order. Read through the client, not the chapter model: every build reads
        them all, and a model per row costs more than the query (about 45 ms of 90 ms at 1,200 chapters)."""
        prefix = chapter_prefix(cut)
        query = {
            "TableName": self.models.chapter.Meta.table_name,
            "KeyConditionExpression": "pk = :book AND begins_with(sk, :cut)",
            "ExpressionAttributeValues": {":book": {"S": book_pk(book_id)}, ":cut": {"S": prefix}},
            # `offset` is a reserved word in DynamoDB's expressions.
            "ProjectionExpression": "sk, title, #offset, size_bytes",
            "ExpressionAttributeNames": {"#offset": "offset"},
            "ConsistentRead": True,
        }
        chapters: list[Chapter] = []
        while True:
            page = self.client.query(**query)
            chapters += [
                Chapter(
                    ordinal=int(item["sk"]["S"].removeprefix(prefix)),
                    title=item["title"]["S"],
                    offset=int(item["offset"]["N"]),
                    size_bytes=int(item["size_bytes"]["N"]),
                )
                for item in page["Items"]
            ]
            if "LastEvaluatedKey" not in page:
                return chapters
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def due_markers(self, queue: Queue, now: float, limit: int) -> list[Marker]:
        found = []
        for item in self.models.marker.by_due.query(queue.value, MarkersDue.due_at <= now, limit=limit):
            book_id = item.pk.removeprefix("BOOK#")
            if item.sk.startswith("RETIRE#A#"):
                found.append(Marker(book_id, None, asset=item.sk.removeprefix("RETIRE#A#")))
            else:
                cut = item.sk.removeprefix("RETIRE#") if item.sk.startswith("RETIRE#") else None
                found.append(Marker(book_id, cut))
        return found

    def retire_cut_chapters(self, marker: Marker) -> bool:
        """Delete a retired cut's chapter items. False, and nothing deleted, if the cut is the book's
        current one: a marker must never take a live revision's chapters."""
        assert marker.cut is not None
        book = self.read_book(marker.book_id)
        if book is not None and book.cut == marker.cut:
            return False
        pk = book_pk(marker.book_id)
        with self.models.chapter.batch_write() as batch:
            for item in self.models.chapter.query(pk, ChapterItem.sk.startswith(chapter_prefix(marker.cut))):
                batch.delete(item)
        return True

    def asset_in_use(self, marker: Marker) -> bool:
        """Whether the book still names the asset object a marker would retire: a marker must never take
        the bytes of an image the current revision shows."""
        book = self.read_book(marker.book_id)
        return book is not None and any(a.object_id == marker.asset for a in book.assets)

    def drop_marker(self, marker: Marker) -> None:
        if marker.asset is not None:
            sk = retire_asset_sk(marker.asset)
        else:
            sk = PURGE_SK if marker.cut is None else retire_sk(marker.cut)
        self.models.marker(book_pk(marker.book_id), sk).delete()


def _described(title: str, metadata: Metadata) -> list[Any]:
    """The updates that make a book's title and metadata these."""
    stored = metadata.stored()
    return [
        BookItem.title.set(title),
        BookItem.metadata.set(stored) if stored else BookItem.metadata.remove(),
    ]
