"""The table: every DynamoDB call Bindery makes, and the guards that make them safe.

One table holds books, chapters, exports, idempotency keys and each caller's live set. PynamoDB models stay
in this module; the rest of the code sees the small frozen types below. A refused conditional write comes
back as a domain outcome ("claim refused", "already ended"), never as a botocore error.

Key layout (pk / sk):

    BOOK#<book>    BOOK                       the book: owner, title, current revision and its cut
    BOOK#<book>    CH#<cut>#<ordinal>         one chapter of one cut: its title and byte range in S3
    BOOK#<book>    RETIRE#<cut>               a cut whose chapters and text are to be removed at due_at
    BOOK#<book>    PURGE                      a deleted book whose exports are still to be ended
    BOOK#<book>    EXPORT#<export>            an export, which is also the build job
    IDEM#<digest>  IDEM                       a caller's Idempotency-Key and the answer it was given
    CALLER#<sub>   LIVE                       the set of that caller's pending exports

Ownership lives on the book item and nowhere else (the seed's "one carrier of that fact"): every caller
read or write of an export checks the book's `owner` in the same round trip.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.connection.base import BOTOCORE_EXCEPTIONS
from pynamodb.constants import ALL_NEW, ALL_OLD, UPDATE_ITEM
from pynamodb.exceptions import PutError, PynamoDBException, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition, size
from pynamodb.indexes import GlobalSecondaryIndex, IncludeProjection
from pynamodb.models import Model
from pynamodb.transactions import TransactGet, TransactWrite

from bindery.config import Settings
from bindery.states import ENDED, FailureCode, Queue, State

# The attributes the sweeps need without a second read: the by_due index projects them.
DUE_PROJECTION = ("export_id", "book_id", "state", "attempt", "counted_against", "paths", "expires_at")


class StorageError(Exception):
    """DynamoDB failed in a way that is not a refused condition (throttling, a timeout, an outage)."""


# ---------------------------------------------------------------------------------------------------
# Domain types: what the rest of the code sees.


@dataclass(frozen=True)
class Book:
    """`cut` names one revision's immutable set of chapters and its text object; a new revision is a new
    cut, so a build that read one cut can never see a mix of two."""

    id: str
    owner: str
    title: str
    revision: int
    cut: str
    chapter_count: int
    manuscript_bytes: int
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class Chapter:
    """A chapter's title and where its text lies in its cut's manuscript object."""

    ordinal: int
    title: str
    offset: int
    size_bytes: int


@dataclass(frozen=True)
class Marker:
    """A book-level chore the GC owes: retire a cut, or purge a deleted book's exports."""

    book_id: str
    cut: str | None  # the cut to retire; None for a purge


@dataclass(frozen=True)
class Export:
    id: str
    book_id: str
    format: str
    state: State
    requested_at: float
    counted_against: str
    attempt: int = 0
    started_at: float | None = None
    lease_until: float | None = None
    finished_at: float | None = None
    expires_at: float | None = None
    path: str | None = None
    paths: frozenset[str] = frozenset()
    size_bytes: int | None = None
    complete: bool | None = None
    failure_code: str | None = None
    built_revision: int | None = None
    progress_done: int | None = None
    progress_total: int | None = None
    # Chapters the build could not render: [{"ordinal", "title", "reason"}]. Empty when complete.
    skipped: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Due:
    """A sweep candidate as the index saw it. The write re-checks every condition: GSIs lag."""

    export_id: str
    book_id: str
    state: State
    attempt: int
    counted_against: str
    due_at: float
    paths: frozenset[str]


# Outcomes of a submit.
@dataclass(frozen=True)
class Accepted:
    export: Export


@dataclass(frozen=True)
class Replayed:
    """The Idempotency-Key was seen before with the same request: here is the answer it got then."""

    response: dict[str, Any]


@dataclass(frozen=True)
class KeyReused:
    """The Idempotency-Key was seen before with a different request."""


@dataclass(frozen=True)
class OverCap:
    live_ids: tuple[str, ...]


@dataclass(frozen=True)
class NotFound:
    """No such book or export for this caller. A stranger's item reads exactly like a missing one."""


SubmitOutcome = Accepted | Replayed | KeyReused | OverCap | NotFound


# Outcomes of a claim.
@dataclass(frozen=True)
class Claimed:
    export: Export


@dataclass(frozen=True)
class ClaimRefused:
    """`reason` is one of: gone, ended, held, exhausted."""

    reason: str
    export: Export | None


# ---------------------------------------------------------------------------------------------------
# PynamoDB models (private).


class _Item(Model):
    class Meta:
        table_name = Settings.table
        region = Settings.region

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)


class _ByDue(GlobalSecondaryIndex["_ExportItem"]):
    """Sparse: only rows with a `queue` are in it, so a sweep reads the work and not the table."""

    class Meta:
        index_name = "by_due"
        projection = IncludeProjection(list(DUE_PROJECTION))

    queue = UnicodeAttribute(hash_key=True)
    due_at = NumberAttribute(range_key=True)


class _BookItem(_Item):
    owner = UnicodeAttribute()
    title = UnicodeAttribute()
    revision = NumberAttribute()
    cut = UnicodeAttribute()
    chapter_count = NumberAttribute()
    manuscript_bytes = NumberAttribute(default=0)
    created_at = NumberAttribute()
    updated_at = NumberAttribute()


class _ChapterItem(_Item):
    title = UnicodeAttribute()
    offset = NumberAttribute()
    size_bytes = NumberAttribute()


class _MarkersDue(_ByDue):
    """The same sparse `by_due` index, read for book-level markers rather than exports."""


class _MarkerItem(_Item):
    queue = UnicodeAttribute()
    due_at = NumberAttribute()
    by_due = _MarkersDue()


class _ExportItem(_Item):
    export_id = UnicodeAttribute()
    book_id = UnicodeAttribute()
    format = UnicodeAttribute()
    state = UnicodeAttribute()
    requested_at = NumberAttribute()
    # Whose live set this export occupies while pending. Not an owner: authorization reads the book.
    counted_against = UnicodeAttribute()
    attempt = NumberAttribute(default=0)
    started_at = NumberAttribute(null=True)
    lease_until = NumberAttribute(null=True)
    finished_at = NumberAttribute(null=True)
    expires_at = NumberAttribute(null=True)
    path = UnicodeAttribute(null=True)
    # Every key an attempt may have written. The unlink removes them all, so a crash between an upload
    # and the write that would have named it cannot leak the bytes.
    paths = UnicodeSetAttribute(null=True)
    size_bytes = NumberAttribute(null=True)
    complete = NumberAttribute(null=True)  # 1 / 0; a number so the item stays plain to read
    failure_code = UnicodeAttribute(null=True)
    built_revision = NumberAttribute(null=True)
    progress_done = NumberAttribute(null=True)
    progress_total = NumberAttribute(null=True)
    skipped = UnicodeAttribute(null=True)  # JSON
    queue = UnicodeAttribute(null=True)
    due_at = NumberAttribute(null=True)
    ttl = NumberAttribute(null=True)
    # The name of the event the row's last terminal transition publishes (bindery.export.<state>). The
    # table's stream carries the write, and the events pipe turns it into ONE EventBridge event: the row is
    # the outbox, so a transition is published exactly when it happened, and a retried write that changes
    # nothing publishes nothing.
    transition = UnicodeAttribute(null=True)
    by_due = _ByDue()


def _becomes(state: str) -> list[Any]:
    """The actions that move a row to `state`, naming the event its terminal states publish."""
    actions = [_ExportItem.state.set(state)]
    if state != State.PENDING.value:
        actions.append(_ExportItem.transition.set(f"bindery.export.{state}"))
    return actions


class _IdemItem(_Item):
    export_id = UnicodeAttribute()
    request_hash = UnicodeAttribute()
    response = UnicodeAttribute()
    ttl = NumberAttribute()


class _LiveItem(_Item):
    live_ids = UnicodeSetAttribute(null=True)


class _CursorItem(_Item):
    """How far the orphan reconciliation has read the artifact prefix: (pass, last key)."""

    pass_no = NumberAttribute()
    after = UnicodeAttribute()


class _AuditItem(_Item):
    """One GC run and what it did (the seed's ghost-sweep rows)."""

    ran_at = NumberAttribute()
    counts = UnicodeAttribute()  # JSON
    ttl = NumberAttribute()


_MODELS: tuple[type[_Item], ...] = (
    _Item, _BookItem, _ChapterItem, _MarkerItem, _ExportItem, _IdemItem, _LiveItem, _CursorItem, _AuditItem,
)  # fmt: skip
CURSOR_PK, AUDIT_PK = "GC#orphans", "GC#audit"
AUDIT_RETENTION_SECONDS = 90 * 86_400

M = TypeVar("M", bound=_Item)


def _book_pk(book_id: str) -> str:
    return f"BOOK#{book_id}"


def _export_sk(export_id: str) -> str:
    return f"EXPORT#{export_id}"


def _chapter_prefix(cut: str) -> str:
    return f"CH#{cut}#"


def _retire_sk(cut: str) -> str:
    return f"RETIRE#{cut}"


PURGE_SK = "PURGE"


def _to_export(item: _ExportItem) -> Export:
    return Export(
        id=item.export_id,
        book_id=item.book_id,
        format=item.format,
        state=State(item.state),
        requested_at=item.requested_at,
        counted_against=item.counted_against,
        attempt=int(item.attempt or 0),
        started_at=item.started_at,
        lease_until=item.lease_until,
        finished_at=item.finished_at,
        expires_at=item.expires_at,
        path=item.path,
        paths=frozenset(item.paths or ()),
        size_bytes=None if item.size_bytes is None else int(item.size_bytes),
        complete=None if item.complete is None else bool(item.complete),
        failure_code=item.failure_code,
        built_revision=None if item.built_revision is None else int(item.built_revision),
        progress_done=None if item.progress_done is None else int(item.progress_done),
        progress_total=None if item.progress_total is None else int(item.progress_total),
        skipped=tuple(json.loads(item.skipped)) if item.skipped else (),
    )


def _to_book(item: _BookItem) -> Book:
    return Book(
        id=item.pk.removeprefix("BOOK#"),
        owner=item.owner,
        title=item.title,
        revision=int(item.revision),
        cut=item.cut,
        chapter_count=int(item.chapter_count),
        manuscript_bytes=int(item.manuscript_bytes or 0),
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


def _expired_ttl(ttl: float | None, now: float) -> bool:
    # DynamoDB deletes TTL'd items days late; until it does, a read treats them as gone.
    return ttl is not None and ttl <= now


def _error_code(exc: BaseException) -> str:
    """DynamoDB's error code behind a PynamoDB or botocore error ("" if there is none)."""
    code = getattr(exc, "cause_response_code", None)  # PynamoDB's errors carry the botocore cause
    if code:
        return str(code)
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


_TRANSACTION_RETRIES = 8


def _conditions_failed(exc: TransactWriteError) -> bool:
    """Whether the transaction was refused by a condition (as opposed to throttling or a conflict)."""
    return any(r is not None and r.code == "ConditionalCheckFailed" for r in exc.cancellation_reasons)


def _retry_conflicts(attempt: Callable[[], Any]) -> Any:
    """Run a transaction again when DynamoDB cancels it for a conflicting concurrent transaction.

    A TransactionConflict says nothing about our conditions: another writer touched one of the same items
    at the same instant. Re-running re-evaluates every condition against the winner's result, so a retry
    cannot double-apply anything.
    """
    for n in range(_TRANSACTION_RETRIES):
        try:
            return attempt()
        except TransactWriteError as exc:
            reasons = exc.cancellation_reasons
            conflicted = any(r is not None and r.code == "TransactionConflict" for r in reasons)
            if not conflicted or n == _TRANSACTION_RETRIES - 1:
                raise
            time.sleep(random.uniform(0, 0.01 * (2**n)))
    raise AssertionError("unreachable")


class Store:
    """The table, through PynamoDB. Construct one per process; it builds its client on first use."""

    def __init__(self, settings: Settings):
        self.settings = settings
        for model in _MODELS:
            # The one place the table's name and region are set: read from config, never at import.
            model.Meta.table_name = settings.table
            model.Meta.region = settings.region
            model._connection = None
        # PynamoDB gives each model class a connection, and each connection a botocore client of its own.
        # Every model here lives in the same table, so they share one: one client to build at cold start,
        # and one place to count calls. (Building the TableConnection makes no call and no client yet.)
        shared = _ExportItem._get_connection()
        for model in _MODELS:
            model._connection = shared

    # The botocore client PynamoDB talks through; tests hang call counters and fault hooks on it.
    @property
    def client(self) -> Any:
        return self._connection().client

    def _connection(self) -> Any:
        return _ExportItem._get_connection().connection

    # ---- books -----------------------------------------------------------------------------------

    def stage_cut(self, book_id: str, cut: str, chapters: Sequence[Chapter], retire_at: float) -> None:
        """Write a cut's chapters before anything names them, behind a retire marker written FIRST.

        Should the caller die before :meth:`create_book` or :meth:`publish_cut` adopts the cut, the marker
        is what makes the GC remove the stranded chapters and text; adopting the cut deletes the marker in
        the same transaction that makes the cut current.
        """
        _MarkerItem(_book_pk(book_id), _retire_sk(cut), queue=Queue.RETIRE.value, due_at=retire_at).save()
        with _ChapterItem.batch_write() as batch:
            for chapter in chapters:
                batch.save(
                    _ChapterItem(
                        _book_pk(book_id),
                        f"{_chapter_prefix(cut)}{chapter.ordinal:06d}",
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
        retry's own staged cut keeps its retire marker, so the GC removes it."""
        idem_item = None
        if idempotency is not None:
            idem_item = _IdemItem(
                f"IDEM#{idempotency[0]}",
                "IDEM",
                export_id="",
                request_hash=idempotency[1],
                response=json.dumps({"book_id": book.id}),
                ttl=now + self.settings.idempotency_ttl_seconds,
            )
        try:
            with TransactWrite(connection=self._connection()) as tx:
                tx.delete(_MarkerItem(_book_pk(book.id), _retire_sk(book.cut)))
                # attribute_not_exists: ids are random, but a retried create must never overwrite a book.
                tx.save(self._book_item(book), condition=_BookItem.pk.does_not_exist())
                if idem_item is not None:
                    # A key past its TTL is a key never seen: TTL deletes days late.
                    tx.save(
                        idem_item,
                        condition=_IdemItem.pk.does_not_exist() | (_IdemItem.ttl <= now),
                        return_values=ALL_OLD,
                    )
        except TransactWriteError as exc:
            # PynamoDB sends deletes, then puts: marker, book, key.
            reasons = list(exc.cancellation_reasons)
            idem_reason = reasons[2] if idem_item is not None and len(reasons) == 3 else None
            if (
                idem_reason is None
                or idem_reason.code != "ConditionalCheckFailed"
                or not idem_reason.raw_item
            ):
                raise StorageError(str(exc)) from exc
            old = _IdemItem.from_raw_data(idem_reason.raw_item)
            if idempotency is not None and old.request_hash != idempotency[1]:
                return KeyReused()
            return Replayed(json.loads(old.response))
        except BOTOCORE_EXCEPTIONS as exc:
            raise StorageError(str(exc)) from exc
        return None

    @staticmethod
    def _book_item(book: Book) -> _BookItem:
        return _BookItem(
            _book_pk(book.id),
            "BOOK",
            owner=book.owner,
            title=book.title,
            revision=book.revision,
            cut=book.cut,
            chapter_count=book.chapter_count,
            manuscript_bytes=book.manuscript_bytes,
            created_at=book.created_at,
            updated_at=book.updated_at,
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
    ) -> Book | None:
        """Make a staged cut the book's next revision, if the book is still at `current.revision`.

        One transaction moves the book to the new cut, drops the new cut's retire marker, and marks the old
        cut for retirement once no build can still be reading it (`retire_at`, a lease from now). None means
        the book moved on (or was deleted) meanwhile: the caller decides between 412 and another try.
        """
        pk = _book_pk(current.id)
        try:
            with TransactWrite(connection=self._connection()) as tx:
                tx.update(
                    _BookItem(pk, "BOOK"),
                    actions=[
                        _BookItem.revision.add(1),
                        _BookItem.cut.set(cut),
                        _BookItem.chapter_count.set(chapter_count),
                        _BookItem.manuscript_bytes.set(manuscript_bytes),
                        _BookItem.updated_at.set(now),
                    ],
                    # `revision = read`: the If-Match gate, and the guard that a concurrent replacement
                    # is not silently overwritten by a writer that never saw it.
                    condition=(_BookItem.owner == current.owner)
                    & (_BookItem.revision == current.revision)
                    & (_BookItem.cut == current.cut),
                )
                tx.delete(_MarkerItem(pk, _retire_sk(cut)))
                tx.save(_MarkerItem(pk, _retire_sk(current.cut), queue=Queue.RETIRE.value, due_at=retire_at))
        except TransactWriteError as exc:
            if _conditions_failed(exc):
                return None
            raise StorageError(str(exc)) from exc
        return Book(
            **{
                **current.__dict__,
                "revision": current.revision + 1,
                "cut": cut,
                "chapter_count": chapter_count,
                "manuscript_bytes": manuscript_bytes,
                "updated_at": now,
            }
        )

    def delete_book(self, book: Book, now: float) -> bool:
        """Delete the book and owe the GC the rest, in one transaction: the book item goes, its cut is
        marked for retirement, and a purge marker says its exports are still to be ended. A crash after
        this leaves chores the GC finishes, never a half-deleted book. False: it changed meanwhile."""
        pk = _book_pk(book.id)
        try:
            with TransactWrite(connection=self._connection()) as tx:
                tx.delete(
                    _BookItem(pk, "BOOK"),
                    condition=(_BookItem.owner == book.owner) & (_BookItem.cut == book.cut),
                )
                tx.save(_MarkerItem(pk, _retire_sk(book.cut), queue=Queue.RETIRE.value, due_at=now))
                tx.save(_MarkerItem(pk, PURGE_SK, queue=Queue.PURGE.value, due_at=now))
        except TransactWriteError as exc:
            if _conditions_failed(exc):
                return False
            raise StorageError(str(exc)) from exc
        return True

    def read_book(self, book_id: str) -> Book | None:
        """The book, whoever owns it. Callers' reads go through :meth:`read_book_for_owner`."""
        try:
            return _to_book(_BookItem.get(_book_pk(book_id), "BOOK", consistent_read=True))
        except _BookItem.DoesNotExist:
            return None

    def read_book_for_owner(self, book_id: str, owner: str) -> Book | None:
        book = self.read_book(book_id)
        # A stranger's book answers exactly as a missing one does (API1, BOLA).
        return book if book is not None and book.owner == owner else None

    def read_chapters(self, book_id: str, cut: str) -> list[Chapter]:
        prefix = _chapter_prefix(cut)
        return [
            Chapter(
                ordinal=int(item.sk.removeprefix(prefix)),
                title=item.title,
                offset=int(item.offset),
                size_bytes=int(item.size_bytes),
            )
            for item in _ChapterItem.query(
                _book_pk(book_id), _ChapterItem.sk.startswith(prefix), consistent_read=True
            )
        ]

    # ---- submit ----------------------------------------------------------------------------------

    def submit_export(
        self,
        export: Export,
        *,
        caller: str,
        now: float,
        idempotency: tuple[str, str, dict[str, Any]] | None,
    ) -> SubmitOutcome:
        """Accept an export: ONE TransactWriteItems writes the export row, the idempotency key and the
        caller's live set, so none of the three can exist without the others.

        `idempotency` is (key digest, request hash, the response to replay) or None.
        """
        cap = self.settings.max_live_exports
        export_item = _ExportItem(
            _book_pk(export.book_id),
            _export_sk(export.id),
            export_id=export.id,
            book_id=export.book_id,
            format=export.format,
            state=State.PENDING.value,
            requested_at=export.requested_at,
            counted_against=caller,
            attempt=0,
            queue=Queue.STALE.value,
            due_at=now + self.settings.queue_grace_seconds,
        )
        idem_item = None
        if idempotency is not None:
            digest, request_hash, response = idempotency
            idem_item = _IdemItem(
                f"IDEM#{digest}",
                "IDEM",
                export_id=export.id,
                request_hash=request_hash,
                response=json.dumps(response, separators=(",", ":")),
                ttl=now + self.settings.idempotency_ttl_seconds,
            )
        live = _LiveItem(f"CALLER#{caller}", "LIVE")

        def attempt() -> None:
            with TransactWrite(connection=self._connection()) as tx:
                # The caller must own the book. Nothing else about the book can refuse an export
                # (the canon: the request is always accepted, and its outcome is the export's own).
                tx.condition_check(
                    _BookItem, _book_pk(export.book_id), "BOOK", condition=_BookItem.owner == caller
                )
                if idem_item is not None:
                    # A key past its TTL is a key never seen: TTL deletes days late.
                    tx.save(
                        idem_item,
                        condition=_IdemItem.pk.does_not_exist() | (_IdemItem.ttl <= now),
                        return_values=ALL_OLD,
                    )
                # A fresh random id; the guard turns a (vanishingly rare) collision into a refusal, not
                # an overwrite of someone's export.
                tx.save(export_item, condition=_ExportItem.pk.does_not_exist())
                # The cap is checked against the set it counts, in the same write that grows it, so 4 x cap
                # concurrent submits can never leave more than cap live.
                tx.update(
                    live,
                    actions=[_LiveItem.live_ids.add({export.id})],
                    condition=_LiveItem.live_ids.does_not_exist() | (size(_LiveItem.live_ids) < cap),
                    return_values=ALL_OLD,
                )

        try:
            _retry_conflicts(attempt)
        except TransactWriteError as exc:
            return self._submit_refusal(exc, has_idem=idem_item is not None, idempotency=idempotency)
        except BOTOCORE_EXCEPTIONS as exc:
            raise StorageError(str(exc)) from exc
        return Accepted(export)

    def _submit_refusal(
        self,
        exc: TransactWriteError,
        *,
        has_idem: bool,
        idempotency: tuple[str, str, dict[str, Any]] | None,
    ) -> SubmitOutcome:
        # PynamoDB sends condition checks, then puts, then updates: the reasons come back in that order.
        reasons = list(exc.cancellation_reasons)
        if not reasons:
            raise StorageError(str(exc)) from exc
        book_reason = reasons.pop(0)
        idem_reason = reasons.pop(0) if has_idem else None
        _export_reason = reasons.pop(0)
        live_reason = reasons.pop(0)
        failed = [r for r in (book_reason, idem_reason, _export_reason, live_reason) if r is not None]
        if any(r.code != "ConditionalCheckFailed" for r in failed):
            raise StorageError(str(exc)) from exc
        if book_reason is not None:
            return NotFound()
        if idem_reason is not None and idem_reason.raw_item is not None and idempotency is not None:
            old = _IdemItem.from_raw_data(idem_reason.raw_item)
            if old.request_hash != idempotency[1]:
                return KeyReused()
            return Replayed(json.loads(old.response))
        if live_reason is not None:
            raw = live_reason.raw_item or {}
            ids = tuple(sorted(raw.get("live_ids", {}).get("SS", [])))
            return OverCap(ids)
        raise StorageError(str(exc)) from exc

    # ---- caller reads ----------------------------------------------------------------------------

    def read_export_for_owner(
        self, book_id: str, export_id: str, owner: str, now: float
    ) -> tuple[Export, Book] | None:
        """The export and its book in ONE TransactGetItems: the owner check and the book's revision
        come from the same snapshot as the export, so they cannot be a transaction apart."""
        try:
            with TransactGet(connection=self._connection()) as tx:
                book_f = tx.get(_BookItem, _book_pk(book_id), "BOOK")
                export_f = tx.get(_ExportItem, _book_pk(book_id), _export_sk(export_id))
        except BOTOCORE_EXCEPTIONS as exc:
            raise StorageError(str(exc)) from exc
        except PynamoDBException as exc:
            raise StorageError(str(exc)) from exc
        book_item = _future_value(book_f)
        export_item = _future_value(export_f)
        if book_item is None or export_item is None or book_item.owner != owner:
            return None
        if _expired_ttl(export_item.ttl, now):
            return None
        return _to_export(export_item), _to_book(book_item)

    def list_exports(
        self, book_id: str, *, limit: int, start_after: str | None, now: float
    ) -> tuple[list[Export], str | None]:
        """One page of a book's exports, newest first (ids sort by time). The caller checked ownership.

        Returns the page and the id to start after for the next page, or None at the end.
        """
        last_key = None
        if start_after is not None:
            last_key = {"pk": {"S": _book_pk(book_id)}, "sk": {"S": _export_sk(start_after)}}
        results = _ExportItem.query(
            _book_pk(book_id),
            _ExportItem.sk.startswith("EXPORT#"),
            scan_index_forward=False,
            consistent_read=True,
            limit=limit,
            last_evaluated_key=last_key,
            page_size=limit,
        )
        page = [_to_export(item) for item in results if not _expired_ttl(item.ttl, now)]
        next_after = None
        if results.last_evaluated_key is not None:
            next_after = results.last_evaluated_key["sk"]["S"].removeprefix("EXPORT#")
        return page, next_after

    # ---- cancel ----------------------------------------------------------------------------------

    def cancel_export(self, book_id: str, export_id: str, owner: str, now: float) -> str | NotFound:
        """pending -> cancelled, with the live set shrinking in the same write; or ready -> expired at once.

        Returns "cancelled", "revoked" (a ready link ended now) or "ended" (it had already ended; nothing
        to do). A pending export costs one transaction. A ready one costs a second, because only the
        first one's ALL_OLD tells us the row was ready rather than pending.
        """
        pk, sk = _book_pk(book_id), _export_sk(export_id)

        def cancel_pending() -> None:
            with TransactWrite(connection=self._connection()) as tx:
                tx.condition_check(_BookItem, pk, "BOOK", condition=_BookItem.owner == owner)
                tx.update(
                    _ExportItem(pk, sk),
                    actions=self._end_actions(State.CANCELLED, now),
                    # `state = pending` refuses a row the worker finished or the sweep ended meanwhile.
                    # Only the owner can submit and a book never changes hands, so the live set this
                    # row occupies is the owner's; the second guard says so rather than assuming it.
                    condition=(_ExportItem.state == State.PENDING.value)
                    & (_ExportItem.counted_against == owner),
                    return_values=ALL_OLD,
                )
                tx.update(
                    _LiveItem(f"CALLER#{owner}", "LIVE"), actions=[_LiveItem.live_ids.delete({export_id})]
                )

        try:
            _retry_conflicts(cancel_pending)
            return "cancelled"
        except TransactWriteError as exc:
            reasons = list(exc.cancellation_reasons)
            if not reasons:
                raise StorageError(str(exc)) from exc
            book_reason, export_reason = reasons[0], reasons[1]
            if book_reason is not None or export_reason is None or export_reason.raw_item is None:
                return NotFound()
            old = _ExportItem.from_raw_data(export_reason.raw_item)
        except BOTOCORE_EXCEPTIONS as exc:
            raise StorageError(str(exc)) from exc
        if _expired_ttl(old.ttl, now):
            return NotFound()
        if old.state != State.READY.value:
            return "ended"
        try:
            with TransactWrite(connection=self._connection()) as tx:
                tx.condition_check(_BookItem, pk, "BOOK", condition=_BookItem.owner == owner)
                tx.update(
                    _ExportItem(pk, sk),
                    actions=self._revoke_actions(now),
                    # `state = ready`: the GC may have expired it first, and then there is nothing to revoke.
                    condition=_ExportItem.state == State.READY.value,
                )
        except TransactWriteError:
            return "ended"
        return "revoked"

    @staticmethod
    def _revoke_actions(now: float) -> list[Any]:
        """A ready link ended now: the row says expired from this second; its bytes join the unlink queue."""
        return [
            *_becomes(State.EXPIRED.value),
            _ExportItem.expires_at.set(now),
            _ExportItem.queue.set(Queue.UNLINK.value),
            _ExportItem.due_at.set(now),
        ]

    @staticmethod
    def _end_actions(state: State, now: float) -> list[Any]:
        """How any ended row is written: it leaves the live set's accounting and joins the unlink queue.

        It waits there until its last lease has run out, because until then an attempt may still upload;
        an unlink before that could be followed by the upload it was meant to remove.
        """
        return [
            *_becomes(state.value),
            _ExportItem.finished_at.set(now),
            _ExportItem.queue.set(Queue.UNLINK.value),
            # if_not_exists(lease_until, now): a lease that is still running holds the unlink back.
            _ExportItem.due_at.set(_ExportItem.lease_until | now),
        ]

    # ---- the worker ------------------------------------------------------------------------------

    def claim_build(self, book_id: str, export_id: str, path: str, now: float) -> Claimed | ClaimRefused:
        """The seed's StampExportStart, with retries: take the build exclusively for one lease.

        The attempt number it hands out is a fencing token. Each attempt writes its own artifact key, and
        finish/fail are conditional on `attempt = mine`, so a late attempt can neither publish nor delete
        another attempt's file.

        `path` is the key this attempt will write. The claim adds it to `paths` BEFORE any byte is written,
        so an attempt that dies mid-upload leaves bytes that a row still names and the unlink will find.
        """
        s = self.settings
        lease_until = now + s.lease_seconds
        attempt = _ExportItem.attempt
        condition = (
            # `state = pending` refuses a row the sweep (or a cancel) has already ended: the verdict is in
            # and this worker must not build.
            (_ExportItem.state == State.PENDING.value)
            # An unexpired lease refuses a SECOND worker while the first is still building; both would
            # otherwise race to publish, and the loser's cleanup could delete the winner's file.
            & (_ExportItem.lease_until.does_not_exist() | (_ExportItem.lease_until <= now))
            # The retry bound: after the last attempt the sweep, not another build, ends the row.
            & (attempt < s.max_attempts)
        )
        # The sweep may call it lost once the lease, plus time for a redelivery to claim the retry, is over.
        actions = [
            attempt.add(1),
            _ExportItem.paths.add({path}),
            _ExportItem.started_at.set(now),
            _ExportItem.lease_until.set(lease_until),
            _ExportItem.due_at.set(lease_until + s.retry_grace_seconds),
        ]
        try:
            new = _update_returning_old(
                _ExportItem, _book_pk(book_id), _export_sk(export_id), actions, condition
            )
        except _Refused as refused:
            old = refused.old
            if old is None:
                return ClaimRefused("gone", None)
            export = _to_export(old)
            if export.state != State.PENDING:
                return ClaimRefused("ended", export)
            if export.attempt >= s.max_attempts:
                return ClaimRefused("exhausted", export)
            return ClaimRefused("held", export)
        return Claimed(_to_export(new))

    def finish_export(
        self,
        export: Export,
        *,
        path: str,
        size_bytes: int,
        built_revision: int,
        now: float,
        skipped: list[dict[str, Any]] | None = None,
    ) -> bool:
        """pending -> ready. False means the row was ended (or re-claimed) meanwhile: the caller must
        remove the artifact this attempt wrote, because no row will ever publish it."""
        expires_at = now + self.settings.link_ttl_seconds
        actions = [
            *_becomes(State.READY.value),
            _ExportItem.path.set(path),
            _ExportItem.paths.add({path}),
            _ExportItem.size_bytes.set(size_bytes),
            # `complete` only when every chapter made it in; the ones that did not are named.
            _ExportItem.complete.set(0 if skipped else 1),
            _ExportItem.skipped.set(json.dumps(skipped or [], ensure_ascii=False)),
            _ExportItem.finished_at.set(now),
            _ExportItem.expires_at.set(expires_at),
            _ExportItem.built_revision.set(built_revision),
            _ExportItem.queue.set(Queue.EXPIRE.value),
            _ExportItem.due_at.set(expires_at),
            _ExportItem.lease_until.remove(),
        ]
        return self._end_attempt(export, actions)

    def fail_export(self, export: Export, code: FailureCode, now: float) -> bool:
        """pending -> failed, by the attempt that holds the build. False: it was not ours to fail."""
        actions = [*self._end_actions(State.FAILED, now), _ExportItem.failure_code.set(code)]
        return self._end_attempt(export, actions)

    def _end_attempt(self, export: Export, actions: list[Any]) -> bool:
        def attempt() -> None:
            with TransactWrite(connection=self._connection()) as tx:
                tx.update(
                    _ExportItem(_book_pk(export.book_id), _export_sk(export.id)),
                    actions=actions,
                    # `state = pending` is the worker's whole write safety: a build that comes back after
                    # the sweep or a cancel ended its row must not resurrect it and publish a link the
                    # poll has already reported as finished. `attempt = mine` fences a late attempt out
                    # of a row a retry has since claimed.
                    condition=(_ExportItem.state == State.PENDING.value)
                    & (_ExportItem.attempt == export.attempt),
                )
                tx.update(
                    _LiveItem(f"CALLER#{export.counted_against}", "LIVE"),
                    actions=[_LiveItem.live_ids.delete({export.id})],
                )

        try:
            _retry_conflicts(attempt)
        except TransactWriteError as exc:
            reasons = exc.cancellation_reasons
            if reasons and reasons[0] is not None and reasons[0].code == "ConditionalCheckFailed":
                return False
            raise StorageError(str(exc)) from exc
        except BOTOCORE_EXCEPTIONS as exc:
            raise StorageError(str(exc)) from exc
        return True

    def cancel_attempt(self, export: Export, now: float) -> bool:
        """pending -> cancelled by the attempt that holds it: its book was deleted under it."""
        return self._end_attempt(export, self._end_actions(State.CANCELLED, now))

    def record_progress(self, export: Export, done: int, total: int) -> None:
        """Chapters done out of total, for the poll. Best effort: a refused write means the row moved on."""
        with contextlib.suppress(UpdateError):
            _ExportItem(_book_pk(export.book_id), _export_sk(export.id)).update(
                actions=[_ExportItem.progress_done.set(done), _ExportItem.progress_total.set(total)],
                # `attempt = mine`: a superseded attempt must not report progress over its successor's.
                condition=(_ExportItem.state == State.PENDING.value)
                & (_ExportItem.attempt == export.attempt),
            )

    def release_claim(self, export: Export, now: float) -> None:
        """Give the lease back after a transient failure, so a redelivery may retry at once."""
        # Best effort: the lease runs out by itself, and releasing it early is only a speed-up.
        with contextlib.suppress(UpdateError):
            _ExportItem(_book_pk(export.book_id), _export_sk(export.id)).update(
                actions=[_ExportItem.lease_until.set(now)],
                # `attempt = mine`: never shorten the lease of a retry that has claimed the row since.
                condition=(_ExportItem.state == State.PENDING.value)
                & (_ExportItem.attempt == export.attempt),
            )

    # ---- sweeps ----------------------------------------------------------------------------------

    def due(self, queue: Queue, now: float, limit: int) -> list[Due]:
        """Rows waiting in `queue` whose time has come; the sparse index holds only waiting rows."""
        found = []
        for item in _ExportItem.by_due.query(queue.value, _ByDue.due_at <= now, limit=limit):
            found.append(
                Due(
                    export_id=item.export_id,
                    book_id=item.book_id,
                    state=State(item.state),
                    attempt=int(item.attempt or 0),
                    counted_against=item.counted_against,
                    due_at=item.due_at,
                    paths=frozenset(item.paths or ()),
                )
            )
        return found

    def expire_link(self, due: Due, now: float) -> bool:
        """ready -> expired: the link stops working when it was promised to, and the ROW says so.

        `path` is KEPT. Clearing it in the same write would make the unlink a one-shot act: a failed delete
        would leave bytes no row could ever name again. :meth:`forget_paths` drops it after the unlink.
        """
        try:
            _ExportItem(_book_pk(due.book_id), _export_sk(due.export_id)).update(
                actions=[
                    *_becomes(State.EXPIRED.value),
                    _ExportItem.queue.set(Queue.UNLINK.value),
                    _ExportItem.due_at.set(now),
                ],
                # Re-checked in the write: the index lags, and only a ready row past its promise expires.
                condition=(_ExportItem.state == State.READY.value) & (_ExportItem.expires_at <= now),
            )
        except UpdateError as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise StorageError(str(exc)) from exc
        return True

    def forget_paths(self, due: Due, now: float) -> bool:
        """The bytes are gone; the row stops naming them and may now be deleted by TTL, 30 days on.

        Only after the unlink, or the retry of a failed unlink would have nothing left to find.
        """
        try:
            _ExportItem(_book_pk(due.book_id), _export_sk(due.export_id)).update(
                actions=[
                    _ExportItem.paths.remove(),
                    _ExportItem.path.remove(),
                    _ExportItem.queue.remove(),
                    _ExportItem.due_at.remove(),
                    _ExportItem.ttl.set(now + self.settings.ended_retention_seconds),
                ],
                # Only a row still waiting for its unlink, whose keys are the ones we just deleted.
                condition=(_ExportItem.queue == Queue.UNLINK.value)
                & (_ExportItem.state.is_in(*[s.value for s in ENDED])),
            )
        except UpdateError as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise StorageError(str(exc)) from exc
        return True

    def fail_stale(self, due: Due, now: float) -> FailureCode | None:
        """The seed's FailStalePendingExports, with its two clocks kept in one attribute.

        `due_at` is the queue-grace deadline until a worker claims the row, and the lease (plus the retry
        grace) after. A claim moves it, so the write's `due_at < now` re-checks whichever clock applies,
        and `attempt = seen` pins the code we chose from what the index showed.
        """
        code = FailureCode.WORKER_LOST if due.attempt > 0 else FailureCode.QUEUE_TIMEOUT

        def attempt() -> None:
            with TransactWrite(connection=self._connection()) as tx:
                tx.update(
                    _ExportItem(_book_pk(due.book_id), _export_sk(due.export_id)),
                    actions=[
                        *self._end_actions(State.FAILED, now),
                        _ExportItem.failure_code.set(code.value),
                    ],
                    condition=(_ExportItem.state == State.PENDING.value)
                    & (_ExportItem.due_at <= now)
                    & (_ExportItem.attempt == due.attempt),
                )
                tx.update(
                    _LiveItem(f"CALLER#{due.counted_against}", "LIVE"),
                    actions=[_LiveItem.live_ids.delete({due.export_id})],
                )

        try:
            _retry_conflicts(attempt)
        except TransactWriteError as exc:
            reasons = exc.cancellation_reasons
            if reasons and reasons[0] is not None and reasons[0].code == "ConditionalCheckFailed":
                return None
            raise StorageError(str(exc)) from exc
        return code

    # ---- book-level chores ----------------------------------------------------------------------

    def due_markers(self, queue: Queue, now: float, limit: int) -> list[Marker]:
        found = []
        for item in _MarkerItem.by_due.query(queue.value, _MarkersDue.due_at <= now, limit=limit):
            book_id = item.pk.removeprefix("BOOK#")
            found.append(
                Marker(book_id, item.sk.removeprefix("RETIRE#") if item.sk.startswith("RETIRE#") else None)
            )
        return found

    def retire_cut_chapters(self, marker: Marker) -> bool:
        """Delete a retired cut's chapter items. False, and nothing deleted, if the cut is the book's
        current one: a marker must never take a live revision's chapters."""
        assert marker.cut is not None
        book = self.read_book(marker.book_id)
        if book is not None and book.cut == marker.cut:
            return False
        pk = _book_pk(marker.book_id)
        with _ChapterItem.batch_write() as batch:
            for item in _ChapterItem.query(pk, _ChapterItem.sk.startswith(_chapter_prefix(marker.cut))):
                batch.delete(item)
        return True

    def drop_marker(self, marker: Marker) -> None:
        sk = PURGE_SK if marker.cut is None else _retire_sk(marker.cut)
        _MarkerItem(_book_pk(marker.book_id), sk).delete()

    def book_exports(self, book_id: str) -> Iterator[Export]:
        for item in _ExportItem.query(_book_pk(book_id), _ExportItem.sk.startswith("EXPORT#")):
            yield _to_export(item)

    def end_for_deleted_book(self, export: Export, now: float) -> bool:
        """A deleted book's export: pending becomes cancelled (its live slot freed), ready expires now so
        the GC unlinks its bytes. No owner check: the book, and so its owner, is gone."""
        pk, sk = _book_pk(export.book_id), _export_sk(export.id)
        try:
            if export.state == State.PENDING:
                with TransactWrite(connection=self._connection()) as tx:
                    tx.update(
                        _ExportItem(pk, sk),
                        actions=self._end_actions(State.CANCELLED, now),
                        condition=_ExportItem.state == State.PENDING.value,
                    )
                    tx.update(
                        _LiveItem(f"CALLER#{export.counted_against}", "LIVE"),
                        actions=[_LiveItem.live_ids.delete({export.id})],
                    )
            elif export.state == State.READY:
                _ExportItem(pk, sk).update(
                    actions=self._revoke_actions(now),
                    condition=_ExportItem.state == State.READY.value,
                )
            else:
                return False
        except TransactWriteError as exc:
            if _conditions_failed(exc):
                return False
            raise StorageError(str(exc)) from exc
        except UpdateError as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise StorageError(str(exc)) from exc
        return True

    # ---- orphan reconciliation ------------------------------------------------------------------

    def orphan_cursor(self) -> tuple[int, str]:
        """(pass, key): the reconciliation resumes after `key` in pass `pass` (0, "" before any run)."""
        try:
            item = _CursorItem.get(CURSOR_PK, "CURSOR", consistent_read=True)
        except _CursorItem.DoesNotExist:
            return 0, ""
        return int(item.pass_no), item.after

    def set_orphan_cursor(self, pass_no: int, after: str) -> bool:
        """Record how far a run read. A position at or before the recorded one is left alone (seed 004's
        set_hook_cursor): a run that resumed from an older read, or two overlapping runs, must never walk
        the cursor backwards and make the next run repeat work it thinks is new. False: left alone."""
        newer = (
            _CursorItem.pk.does_not_exist()
            | (_CursorItem.pass_no < pass_no)
            | ((_CursorItem.pass_no == pass_no) & (_CursorItem.after < after))
        )
        try:
            _CursorItem(CURSOR_PK, "CURSOR", pass_no=pass_no, after=after).save(condition=newer)
        except PutError as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise StorageError(str(exc)) from exc
        return True

    def named_artifacts(self, keys: Sequence[str], now: float) -> set[str]:
        """Which of these artifact keys a live row still names (ready, pending, or ended and waiting for its
        unlink). One BatchGetItem per 100 keys; a row past its TTL names nothing."""
        wanted: dict[tuple[str, str], list[str]] = {}
        for key in keys:
            parts = key.split("/")
            if len(parts) == 4:
                wanted.setdefault((_book_pk(parts[1]), _export_sk(parts[2])), []).append(key)
        named: set[str] = set()
        for item in _ExportItem.batch_get(list(wanted)):
            if _expired_ttl(item.ttl, now):
                continue
            names = set(item.paths or ()) | ({item.path} if item.path else set())
            named |= names & set(wanted[(item.pk, item.sk)])
        return named

    def record_audit(self, counts: dict[str, Any], now: float) -> None:
        _AuditItem(
            AUDIT_PK,
            f"{now:017.6f}#{uuid.uuid4().hex[:8]}",
            ran_at=now,
            counts=json.dumps(counts, sort_keys=True),
            ttl=now + AUDIT_RETENTION_SECONDS,
        ).save()

    def audits(self, limit: int) -> list[dict[str, Any]]:
        """The last `limit` GC runs, newest first."""
        return [
            {"ran_at": item.ran_at, **json.loads(item.counts)}
            for item in _AuditItem.query(AUDIT_PK, scan_index_forward=False, limit=limit)
        ]

    # ---- inspection (tests, the CLI) -------------------------------------------------------------

    def live_ids(self, caller: str) -> frozenset[str]:
        try:
            item = _LiveItem.get(f"CALLER#{caller}", "LIVE", consistent_read=True)
        except _LiveItem.DoesNotExist:
            return frozenset()
        return frozenset(item.live_ids or ())

    def all_exports(self) -> Iterator[Export]:
        """Every export row, by Scan. For tests and operators only; no request path calls it."""
        for item in _ExportItem.scan(_ExportItem.sk.startswith("EXPORT#")):
            yield _to_export(item)


def _future_value(future: Any) -> Any:
    try:
        return future.get()
    except future._model_cls.DoesNotExist:
        return None


class _Refused(Exception):
    def __init__(self, old: Any):
        self.old = old


def _update_returning_old(
    model: type[M], hash_key: str, range_key: str, actions: list[Any], condition: Condition
) -> M:
    """UpdateItem returning the new item, or raising :class:`_Refused` carrying the OLD item.

    PynamoDB's ``Model.update`` does not pass ``ReturnValuesOnConditionCheckFailure``, so this dispatches
    the same operation itself. The loser learns why it lost from the failure, not from a second read.
    """
    table = model._get_connection()
    kwargs = table.get_operation_kwargs(
        hash_key,
        range_key=range_key,
        actions=actions,
        condition=condition,
        return_values=ALL_NEW,
        return_values_on_condition_failure=ALL_OLD,
    )
    try:
        data = table.connection.dispatch(UPDATE_ITEM, kwargs)
    except BOTOCORE_EXCEPTIONS as exc:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        response = getattr(cause, "response", {}) or {}
        if response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            raw = response.get("Item")
            raise _Refused(model.from_raw_data(raw) if raw else None) from exc
        raise StorageError(str(exc)) from exc
    return model.from_raw_data(data["Attributes"])


def chunks(items: Iterable[Any], n: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch
