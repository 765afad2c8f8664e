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

import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from botocore.exceptions import ClientError
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.constants import ALL_NEW, ALL_OLD, UPDATE_ITEM
from pynamodb.exceptions import (
    CancellationReason,
    DoesNotExist,
    PutError,
    PynamoDBException,
    TransactWriteError,
    UpdateError,
)
from pynamodb.expressions.condition import Condition, size
from pynamodb.indexes import GlobalSecondaryIndex, IncludeProjection
from pynamodb.models import Model
from pynamodb.transactions import TransactGet, TransactWrite

from bindery.config import Settings
from bindery.faults import StorageError, translate_faults
from bindery.states import ENDED, FailureCode, Queue, State

# The attributes the sweeps need without a second read: the by_due index projects them.
DUE_PROJECTION = ("export_id", "book_id", "state", "attempt", "counted_against", "paths", "expires_at")

# A build records at most this many skipped chapters (and says how many there were): the row is one item,
# and an item is at most 400 KB, whatever the manuscript.
SKIPPED_KEPT = 100
__all__ = ["StorageError"]  # re-exported: what every caller catches


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
    # Chapters the build could not render: [{"ordinal", "title", "reason"}], the first SKIPPED_KEPT of
    # skipped_total. Empty when complete.
    skipped: tuple[dict[str, Any], ...] = ()
    skipped_total: int = 0


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


@dataclass(frozen=True)
class Revoked:
    """A ready link ended now. Its row still names `paths`: the caller deletes them at once, so a URL
    handed out earlier stops working, and then forgets them; the GC's unlink is the backstop."""

    book_id: str
    export_id: str
    paths: frozenset[str]


CancelOutcome = Literal["cancelled", "ended"] | Revoked | NotFound


# Outcomes of a claim.
@dataclass(frozen=True)
class Claimed:
    export: Export


@dataclass(frozen=True)
class ClaimRefused:
    reason: Literal["gone", "ended", "held", "exhausted"]
    export: Export | None


# How an attempt's ending came out: it ended the row; the row was not its to end (ended, or re-claimed);
# or (a finish only) the book was deleted while the row waited, and the row is still the attempt's.
Ending = Literal["ended", "refused", "book_deleted"]


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
    # The digest of the Idempotency-Key that made it, if one did: what lets a check of the table alone
    # see that one key, in one window, made one export.
    key_digest = UnicodeAttribute(null=True)
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
    skipped = UnicodeAttribute(null=True)  # JSON: the first SKIPPED_KEPT skipped chapters
    skipped_total = NumberAttribute(null=True)
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
        skipped_total=int(item.skipped_total or 0),
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


def _condition_failed(exc: PynamoDBException) -> bool:
    """Whether a single-item write was refused by its condition (and not throttled, timed out ...)."""
    return getattr(exc, "cause_response_code", None) == "ConditionalCheckFailedException"


_TRANSACTION_RETRIES = 8
_CONDITION_FAILED = "ConditionalCheckFailed"


@dataclass(frozen=True)
class _Refusal:
    """A transaction that DynamoDB cancelled because conditions failed: each item's reason, by the name
    the transaction gave the item (None: that item's condition held)."""

    reasons: dict[str, CancellationReason | None]

    def failed(self, name: str) -> bool:
        reason = self.reasons.get(name)
        return reason is not None and reason.code == _CONDITION_FAILED

    def old(self, model: type[M], name: str) -> M | None:
        """The item as it was when its condition failed (the write asked for ALL_OLD), or None if absent."""
        reason = self.reasons.get(name)
        if reason is None or reason.raw_item is None:
            return None
        return model.from_raw_data(reason.raw_item)


@dataclass
class _Tx:
    """One TransactWriteItems whose items have names, so that a cancellation is read by name.

    DynamoDB answers a cancellation with one reason per item, in the order the items were sent, and
    PynamoDB sends a transaction's items grouped as condition checks, deletes, puts, then updates. The
    names are kept in that same grouping here, so the reasons line up with them whatever order the
    items were added in.
    """

    _items: dict[str, list[tuple[str, Callable[[TransactWrite], None]]]] = field(
        default_factory=lambda: {"check": [], "delete": [], "put": [], "update": []}
    )

    def check(self, name: str, model: type[_Item], hash_key: str, range_key: str, condition: Any) -> None:
        self._add(
            "check", name, lambda tx: tx.condition_check(model, hash_key, range_key, condition=condition)
        )

    def delete(self, name: str, item: _Item, condition: Any = None) -> None:
        self._add("delete", name, lambda tx: tx.delete(item, condition=condition))

    def put(self, name: str, item: _Item, condition: Any = None, *, old: bool = False) -> None:
        returns = ALL_OLD if old else None
        self._add("put", name, lambda tx: tx.save(item, condition=condition, return_values=returns))

    def update(
        self, name: str, item: _Item, actions: list[Any], condition: Any = None, *, old: bool = False
    ) -> None:
        returns = ALL_OLD if old else None
        self._add(
            "update",
            name,
            lambda tx: tx.update(item, actions=actions, condition=condition, return_values=returns),
        )

    def _add(self, kind: str, name: str, add: Callable[[TransactWrite], None]) -> None:
        self._items[kind].append((name, add))

    def commit(self, connection: Any) -> _Refusal | None:
        """Run it; None when it committed, a _Refusal when conditions refused it.

        Each try carries a fresh ClientRequestToken: should DynamoDB apply a try and its answer be lost,
        botocore resends that try, and DynamoDB answers the resend with the first one's success rather
        than evaluating the conditions again. (Where the token is not honoured, as on moto, the resend
        is refused by the conditions the first one made true, and each caller recognises its own write
        in the ALL_OLD item.) A TransactionConflict (another writer touched an item at the same instant)
        says nothing about our conditions, so the transaction is run again, with a new token; anything
        else that is not a failed condition is a StorageError.
        """
        ordered = [entry for kind in ("check", "delete", "put", "update") for entry in self._items[kind]]
        names = [name for name, _ in ordered]
        for n in range(_TRANSACTION_RETRIES):
            try:
                with TransactWrite(connection=connection, client_request_token=uuid.uuid4().hex) as tx:
                    for _, add in ordered:
                        add(tx)
                return None
            except TransactWriteError as exc:
                reasons = exc.cancellation_reasons
                codes = {r.code for r in reasons if r is not None}
                if "TransactionConflict" in codes and n < _TRANSACTION_RETRIES - 1:
                    time.sleep(random.uniform(0, 0.01 * (2**n)))
                    continue
                # Throttled, timed out, or cancelled for anything but our conditions: not a refusal.
                if len(reasons) != len(names) or not codes or codes != {_CONDITION_FAILED}:
                    raise StorageError(f"TransactWriteItems: {exc}") from exc
                return _Refusal(dict(zip(names, reasons, strict=True)))
        raise AssertionError("unreachable")


@translate_faults
class Store:
    """The table, through PynamoDB. Construct one per process; it builds its client on first use.

    Every public method lets an AWS fault out only as StorageError (`bindery.faults`): a refused condition
    is decoded here, into an outcome, and nothing else is."""

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
        retry's own staged cut keeps its retire marker, so the GC removes it. None: this call made it."""
        tx = _Tx()
        tx.delete("marker", _MarkerItem(_book_pk(book.id), _retire_sk(book.cut)))
        # attribute_not_exists: ids are random, but a retried create must never overwrite a book.
        tx.put("book", self._book_item(book), _BookItem.pk.does_not_exist(), old=True)
        if idempotency is not None:
            idem = _IdemItem(
                f"IDEM#{idempotency[0]}",
                "IDEM",
                export_id="",
                request_hash=idempotency[1],
                response=json.dumps({"book_id": book.id}),
                ttl=now + self.settings.idempotency_ttl_seconds,
            )
            # A key past its TTL is a key never seen: TTL deletes days late.
            tx.put("key", idem, _IdemItem.pk.does_not_exist() | (_IdemItem.ttl <= now), old=True)
        refused = tx.commit(self._connection())
        if refused is None:
            return None
        # A book holding this very cut is this create's own, applied by a try whose answer was lost.
        made = refused.old(_BookItem, "book")
        if made is not None and made.cut == book.cut:
            return None
        old_key = refused.old(_IdemItem, "key")
        if idempotency is None or old_key is None:
            raise StorageError(f"book {book.id} exists already (an id collision)")
        if old_key.request_hash != idempotency[1]:
            return KeyReused()
        return Replayed(json.loads(old_key.response))

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
        tx = _Tx()
        tx.update(
            "book",
            _BookItem(pk, "BOOK"),
            [
                _BookItem.revision.add(1),
                _BookItem.cut.set(cut),
                _BookItem.chapter_count.set(chapter_count),
                _BookItem.manuscript_bytes.set(manuscript_bytes),
                _BookItem.updated_at.set(now),
            ],
            # `revision = read`: the If-Match gate, and the guard that a concurrent replacement is not
            # silently overwritten by a writer that never saw it.
            (_BookItem.owner == current.owner)
            & (_BookItem.revision == current.revision)
            & (_BookItem.cut == current.cut),
            old=True,
        )
        tx.delete("new_cut_marker", _MarkerItem(pk, _retire_sk(cut)))
        tx.put(
            "old_cut_marker",
            _MarkerItem(pk, _retire_sk(current.cut), queue=Queue.RETIRE.value, due_at=retire_at),
        )
        refused = tx.commit(self._connection())
        if refused is not None:
            # The book already on this very cut, one revision on, is this publish's own earlier try.
            seen = refused.old(_BookItem, "book")
            if seen is not None and seen.cut == cut and int(seen.revision) == current.revision + 1:
                return _to_book(seen)
            return None
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
        this leaves chores the GC finishes, never a half-deleted book. False: it changed (or went)
        meanwhile; the caller reads it again to tell which."""
        pk = _book_pk(book.id)
        tx = _Tx()
        # `cut = read`: a replacement published meanwhile must not be deleted by a writer that never saw it.
        tx.delete(
            "book", _BookItem(pk, "BOOK"), (_BookItem.owner == book.owner) & (_BookItem.cut == book.cut)
        )
        tx.put("retire", _MarkerItem(pk, _retire_sk(book.cut), queue=Queue.RETIRE.value, due_at=now))
        tx.put("purge", _MarkerItem(pk, PURGE_SK, queue=Queue.PURGE.value, due_at=now))
        return tx.commit(self._connection()) is None

    def read_book(self, book_id: str) -> Book | None:
        """The book, whoever owns it. Callers' reads go through :meth:`read_book_for_owner`."""
        try:
            return _to_book(_BookItem.get(_book_pk(book_id), "BOOK", consistent_read=True))
        except DoesNotExist:
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
            key_digest=idempotency[0] if idempotency is not None else None,
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
        tx = _Tx()
        # The caller must own the book. Nothing else about the book can refuse an export (the canon: the
        # request is always accepted, and its outcome is the export's own).
        tx.check("book", _BookItem, _book_pk(export.book_id), "BOOK", _BookItem.owner == caller)
        if idem_item is not None:
            # A key past its TTL is a key never seen: TTL deletes days late.
            tx.put("key", idem_item, _IdemItem.pk.does_not_exist() | (_IdemItem.ttl <= now), old=True)
        # A fresh random id; the guard turns a (vanishingly rare) collision into a refusal, not an
        # overwrite of someone's export.
        tx.put("export", export_item, _ExportItem.pk.does_not_exist(), old=True)
        # The cap is checked against the set it counts, in the same write that grows it, so 4 x cap
        # concurrent submits can never leave more than cap live.
        tx.update(
            "live",
            _LiveItem(f"CALLER#{caller}", "LIVE"),
            [_LiveItem.live_ids.add({export.id})],
            _LiveItem.live_ids.does_not_exist() | (size(_LiveItem.live_ids) < cap),
            old=True,
        )
        refused = tx.commit(self._connection())
        if refused is None:
            return Accepted(export)
        # The row under this fresh id, with this request's time, is this submit's own, applied by a try
        # whose answer was lost: botocore's resend was refused by the conditions that try made true.
        mine = refused.old(_ExportItem, "export")
        if mine is not None and mine.requested_at == export.requested_at and mine.counted_against == caller:
            return Accepted(export)
        if refused.failed("book"):
            return NotFound()
        old_key = refused.old(_IdemItem, "key")
        if old_key is not None and idempotency is not None:
            if old_key.request_hash != idempotency[1]:
                return KeyReused()
            return Replayed(json.loads(old_key.response))
        if refused.failed("live"):
            old_live = refused.old(_LiveItem, "live")
            return OverCap(tuple(sorted(old_live.live_ids or ())) if old_live is not None else ())
        raise StorageError(f"export {export.id} exists already (an id collision)")

    # ---- caller reads ----------------------------------------------------------------------------

    def read_export_for_owner(
        self, book_id: str, export_id: str, owner: str, now: float
    ) -> tuple[Export, Book] | None:
        """The export and its book in ONE TransactGetItems: the owner check and the book's revision
        come from the same snapshot as the export, so they cannot be a transaction apart."""
        with TransactGet(connection=self._connection()) as tx:
            book_f = tx.get(_BookItem, _book_pk(book_id), "BOOK")
            export_f = tx.get(_ExportItem, _book_pk(book_id), _export_sk(export_id))
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

    def cancel_export(self, book_id: str, export_id: str, owner: str, now: float) -> CancelOutcome:
        """pending -> cancelled, with the live set shrinking in the same write; or ready -> expired at once.

        Returns "cancelled", a Revoked (a ready link ended now: its bytes are to go at once), "ended" (it
        had already ended; nothing to do) or NotFound. A pending export costs one transaction. A ready one
        costs a second, because only the first one's ALL_OLD tells us the row was ready, not pending.
        """
        pk, sk = _book_pk(book_id), _export_sk(export_id)
        tx = _Tx()
        tx.check("book", _BookItem, pk, "BOOK", _BookItem.owner == owner)
        tx.update(
            "export",
            _ExportItem(pk, sk),
            self._end_actions(State.CANCELLED, now),
            # `state = pending` refuses a row the worker finished or the sweep ended meanwhile. Only the
            # owner can submit and a book never changes hands, so the live set this row occupies is the
            # owner's; the second guard says so rather than assuming it.
            (_ExportItem.state == State.PENDING.value) & (_ExportItem.counted_against == owner),
            old=True,
        )
        tx.update("live", _LiveItem(f"CALLER#{owner}", "LIVE"), [_LiveItem.live_ids.delete({export_id})])
        refused = tx.commit(self._connection())
        if refused is None:
            return "cancelled"
        old = refused.old(_ExportItem, "export")
        if refused.failed("book") or old is None or _expired_ttl(old.ttl, now):
            return NotFound()
        if old.state == State.CANCELLED.value and old.finished_at == now:
            return "cancelled"  # this cancel's own earlier try, whose answer was lost
        if old.state == State.EXPIRED.value and old.queue == Queue.UNLINK.value and old.paths:
            # Revoked (or lapsed) already, its bytes not yet deleted: a cancel that revoked it and could not
            # delete them, retried, deletes them now rather than leave a URL handed out earlier working.
            return Revoked(book_id, export_id, frozenset(old.paths))
        if old.state != State.READY.value:
            return "ended"
        return self._revoke(old, now, owner=owner)

    def _revoke(self, seen: _ExportItem, now: float, *, owner: str | None) -> Revoked | Literal["ended"]:
        """ready -> expired now, the row keeping its paths so that the unlink (done at once by the caller,
        and by the GC should that fail) can find them."""
        tx = _Tx()
        if owner is not None:
            tx.check("book", _BookItem, seen.pk, "BOOK", _BookItem.owner == owner)
        # `state = ready`: the GC may have expired it first, and then there is nothing to revoke.
        tx.update(
            "export",
            _ExportItem(seen.pk, seen.sk),
            self._revoke_actions(now),
            _ExportItem.state == State.READY.value,
            old=True,
        )
        refused = tx.commit(self._connection())
        if refused is None:
            return Revoked(seen.book_id, seen.export_id, frozenset(seen.paths or ()))
        old = refused.old(_ExportItem, "export")
        if old is not None and old.state == State.EXPIRED.value and old.expires_at == now:
            return Revoked(old.book_id, old.export_id, frozenset(old.paths or ()))  # our own lost answer
        return "ended"

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
            if path in export.paths and export.state == State.PENDING and export.lease_until == lease_until:
                # This claim's own earlier try, applied with its answer lost: the row names this attempt's
                # key (fresh per attempt) and holds this lease. It is ours, exactly as if we had heard.
                return Claimed(export)
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
    ) -> Ending:
        """pending -> ready. "refused": the row was ended (or re-claimed) meanwhile, and the caller must
        remove the artifact this attempt wrote, because no row will ever publish it. "book_deleted": the
        book went while the attempt built; the row is still the attempt's to end."""
        expires_at = now + self.settings.link_ttl_seconds
        skipped = skipped or []
        actions = [
            *_becomes(State.READY.value),
            _ExportItem.path.set(path),
            _ExportItem.paths.add({path}),
            _ExportItem.size_bytes.set(size_bytes),
            # `complete` only when every chapter made it in; the ones that did not are named (the first
            # SKIPPED_KEPT of them, and how many there were).
            _ExportItem.complete.set(0 if skipped else 1),
            _ExportItem.skipped.set(json.dumps(skipped[:SKIPPED_KEPT], ensure_ascii=False)),
            _ExportItem.skipped_total.set(len(skipped)),
            _ExportItem.finished_at.set(now),
            _ExportItem.expires_at.set(expires_at),
            _ExportItem.built_revision.set(built_revision),
            _ExportItem.queue.set(Queue.EXPIRE.value),
            _ExportItem.due_at.set(expires_at),
            _ExportItem.lease_until.remove(),
        ]

        def mine(old: _ExportItem) -> bool:
            return old.state == State.READY.value and old.path == path

        # The book must still exist: a finish that landed after the book's delete would publish a deleted
        # book's text behind a ready row. A finish that lands before it, the delete's purge ends.
        return self._end_attempt(export, actions, mine, book_must_exist=True)

    def fail_export(self, export: Export, code: FailureCode, now: float) -> bool:
        """pending -> failed, by the attempt that holds the build. False: it was not ours to fail."""
        actions = [*self._end_actions(State.FAILED, now), _ExportItem.failure_code.set(code)]

        def mine(old: _ExportItem) -> bool:
            return old.state == State.FAILED.value and old.failure_code == code and old.finished_at == now

        return self._end_attempt(export, actions, mine) == "ended"

    def cancel_attempt(self, export: Export, now: float) -> bool:
        """pending -> cancelled by the attempt that holds it: its book was deleted under it."""

        def mine(old: _ExportItem) -> bool:
            return old.state == State.CANCELLED.value and old.finished_at == now

        return self._end_attempt(export, self._end_actions(State.CANCELLED, now), mine) == "ended"

    def _end_attempt(
        self,
        export: Export,
        actions: list[Any],
        mine: Callable[[_ExportItem], bool],
        *,
        book_must_exist: bool = False,
    ) -> Ending:
        """End the row as the attempt that holds it. `mine` tells this write's own result from anyone
        else's, should a resend of an applied try be refused: then the ending is ours all the same."""
        pk = _book_pk(export.book_id)
        tx = _Tx()
        if book_must_exist:
            tx.check("book", _BookItem, pk, "BOOK", _BookItem.pk.exists())
        tx.update(
            "export",
            _ExportItem(pk, _export_sk(export.id)),
            actions,
            # `state = pending` is the worker's whole write safety: a build that comes back after the sweep
            # or a cancel ended its row must not resurrect it and publish a link the poll has already
            # reported as finished. `attempt = mine` fences a late attempt out of a row a retry has since
            # claimed.
            (_ExportItem.state == State.PENDING.value) & (_ExportItem.attempt == export.attempt),
            old=True,
        )
        tx.update(
            "live",
            _LiveItem(f"CALLER#{export.counted_against}", "LIVE"),
            [_LiveItem.live_ids.delete({export.id})],
        )
        refused = tx.commit(self._connection())
        if refused is None:
            return "ended"
        old = refused.old(_ExportItem, "export")
        if old is not None and int(old.attempt or 0) == export.attempt and mine(old):
            return "ended"
        if refused.failed("book") and not refused.failed("export"):
            return "book_deleted"
        return "refused"

    def record_progress(self, export: Export, done: int, total: int) -> None:
        """Chapters done out of total, for the poll. A refused write means the row moved on: nothing to do."""
        try:
            _ExportItem(_book_pk(export.book_id), _export_sk(export.id)).update(
                actions=[_ExportItem.progress_done.set(done), _ExportItem.progress_total.set(total)],
                # `attempt = mine`: a superseded attempt must not report progress over its successor's.
                condition=(_ExportItem.state == State.PENDING.value)
                & (_ExportItem.attempt == export.attempt),
            )
        except UpdateError as exc:
            if not _condition_failed(exc):
                raise

    def release_claim(self, export: Export, now: float) -> None:
        """Give the lease back after a transient failure, so a redelivery may retry at once. A refused
        write means the row moved on, or a retry claimed it since: nothing to give back."""
        try:
            _ExportItem(_book_pk(export.book_id), _export_sk(export.id)).update(
                actions=[_ExportItem.lease_until.set(now)],
                # `attempt = mine`: never shorten the lease of a retry that has claimed the row since.
                condition=(_ExportItem.state == State.PENDING.value)
                & (_ExportItem.attempt == export.attempt),
            )
        except UpdateError as exc:
            if not _condition_failed(exc):
                raise

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
            _update_returning_old(
                _ExportItem,
                _book_pk(due.book_id),
                _export_sk(due.export_id),
                [
                    *_becomes(State.EXPIRED.value),
                    _ExportItem.queue.set(Queue.UNLINK.value),
                    _ExportItem.due_at.set(now),
                ],
                # Re-checked in the write: the index lags, and only a ready row past its promise expires.
                (_ExportItem.state == State.READY.value) & (_ExportItem.expires_at <= now),
            )
        except _Refused as refused:
            old = refused.old
            # Expired into the unlink queue at this very instant: this write's own lost answer.
            return old is not None and old.state == State.EXPIRED.value and old.due_at == now
        return True

    def forget_paths(self, book_id: str, export_id: str, now: float) -> bool:
        """The bytes are gone; the row stops naming them and may now be deleted by TTL, 30 days on.

        Only after the unlink, or the retry of a failed unlink would have nothing left to find.
        """
        ttl = now + self.settings.ended_retention_seconds
        try:
            _update_returning_old(
                _ExportItem,
                _book_pk(book_id),
                _export_sk(export_id),
                [
                    _ExportItem.paths.remove(),
                    _ExportItem.path.remove(),
                    _ExportItem.queue.remove(),
                    _ExportItem.due_at.remove(),
                    _ExportItem.ttl.set(ttl),
                ],
                # Only a row still waiting for its unlink, whose keys are the ones we just deleted.
                (_ExportItem.queue == Queue.UNLINK.value)
                & (_ExportItem.state.is_in(*[s.value for s in ENDED])),
            )
        except _Refused as refused:
            old = refused.old
            return old is not None and old.queue is None and old.ttl == ttl  # this write's own lost answer
        return True

    def fail_stale(self, due: Due, now: float) -> FailureCode | None:
        """The seed's FailStalePendingExports, with its two clocks kept in one attribute.

        `due_at` is the queue-grace deadline until a worker claims the row, and the lease (plus the retry
        grace) after. A claim moves it, so the write's `due_at < now` re-checks whichever clock applies,
        and `attempt = seen` pins the code we chose from what the index showed.
        """
        code = FailureCode.WORKER_LOST if due.attempt > 0 else FailureCode.QUEUE_TIMEOUT
        tx = _Tx()
        tx.update(
            "export",
            _ExportItem(_book_pk(due.book_id), _export_sk(due.export_id)),
            [*self._end_actions(State.FAILED, now), _ExportItem.failure_code.set(code.value)],
            (_ExportItem.state == State.PENDING.value)
            & (_ExportItem.due_at <= now)
            & (_ExportItem.attempt == due.attempt),
            old=True,
        )
        tx.update(
            "live",
            _LiveItem(f"CALLER#{due.counted_against}", "LIVE"),
            [_LiveItem.live_ids.delete({due.export_id})],
        )
        refused = tx.commit(self._connection())
        if refused is None:
            return code
        old = refused.old(_ExportItem, "export")
        if old is not None and old.state == State.FAILED.value and old.finished_at == now:
            return code  # this sweep's own earlier try, whose answer was lost
        return None

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
        """Every export of a book, read consistently: a purge must see a finish that committed before it."""
        for item in _ExportItem.query(
            _book_pk(book_id), _ExportItem.sk.startswith("EXPORT#"), consistent_read=True
        ):
            yield _to_export(item)

    def end_for_deleted_book(self, export: Export, now: float) -> Revoked | bool:
        """End a deleted book's export, whatever it became meanwhile: pending is cancelled (its live slot
        freed), ready expires now (a Revoked: its bytes go at once), and one already ended is left alone.
        No owner check: the book, and so its owner, is gone.

        A write refused because the row moved on (a finish or a cancel landed between the read and the
        write) is tried again on the row as the refusal shows it (ALL_OLD, so no second read). True: ended,
        now or before. False: it kept moving; the purge marker stays and the GC tries again."""
        pk, sk = _book_pk(export.book_id), _export_sk(export.id)
        state = export.state
        for _ in range(4):
            if state == State.READY:
                seen = _ExportItem(
                    pk, sk, book_id=export.book_id, export_id=export.id, paths=set(export.paths) or None
                )
                outcome = self._revoke(seen, now, owner=None)
                if isinstance(outcome, Revoked):
                    return outcome
            elif state == State.PENDING:
                tx = _Tx()
                tx.update(
                    "export",
                    _ExportItem(pk, sk),
                    self._end_actions(State.CANCELLED, now),
                    _ExportItem.state == State.PENDING.value,
                    old=True,
                )
                tx.update(
                    "live",
                    _LiveItem(f"CALLER#{export.counted_against}", "LIVE"),
                    [_LiveItem.live_ids.delete({export.id})],
                )
                refused = tx.commit(self._connection())
                if refused is None:
                    return True
            else:
                return True
            current = self._read_export(export.book_id, export.id)
            if current is None:
                return True
            export, state = current, current.state
            if state == State.CANCELLED and current.finished_at == now:
                return True  # this purge's own cancel, whose answer was lost
        return False

    def _read_export(self, book_id: str, export_id: str) -> Export | None:
        try:
            return _to_export(_ExportItem.get(_book_pk(book_id), _export_sk(export_id), consistent_read=True))
        except DoesNotExist:
            return None

    # ---- orphan reconciliation ------------------------------------------------------------------

    def orphan_cursor(self) -> tuple[int, str]:
        """(pass, key): the reconciliation resumes after `key` in pass `pass` (0, "" before any run)."""
        try:
            item = _CursorItem.get(CURSOR_PK, "CURSOR", consistent_read=True)
        except DoesNotExist:
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
            if _condition_failed(exc):
                return False
            raise
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
        except DoesNotExist:
            return frozenset()
        return frozenset(item.live_ids or ())

    def all_exports(self) -> Iterator[Export]:
        """Every export row, by Scan. For tests and operators only; no request path calls it."""
        for item in _ExportItem.scan(_ExportItem.sk.startswith("EXPORT#")):
            yield _to_export(item)


def _future_value(future: Any) -> Any:
    try:
        return future.get()
    except DoesNotExist:
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
    except ClientError as exc:
        # PynamoDB re-raises botocore's error as its own, without the item: the original carries it.
        cause = exc.__cause__ if isinstance(exc.__cause__, ClientError) else exc
        response = cause.response or {}
        if response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            raw = response.get("Item")
            raise _Refused(model.from_raw_data(raw) if raw else None) from exc
        raise  # not a refusal: the Store's translation makes it a StorageError
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
