"""The table's items as PynamoDB models, their keys, and the two ways a conditional write is refused.

Key layout (pk / sk):

    BOOK#<book>    BOOK                       the book: owner, title, current revision and its cut
    BOOK#<book>    CH#<cut>#<ordinal>         one chapter of one cut: its title and byte range in S3
    BOOK#<book>    RETIRE#<cut>               a cut whose chapters and text are to be removed at due_at
    BOOK#<book>    PURGE                      a deleted book whose exports are still to be ended
    BOOK#<book>    EXPORT#<export>            an export, which is also the build job
    IDEM#<digest>  IDEM                       a caller's Idempotency-Key and the answer it was given
    CALLER#<sub>   LIVE                       the set of that caller's pending exports
    GC#orphans     CURSOR                     how far the orphan reconciliation has read
    GC#audit       <time>#<id>                one GC run and what it did

A refused condition is decoded in one of two ways, and only here: a transaction's by the names its items
were given (:class:`Tx`, :class:`Refusal`), and a single item's write as :class:`Refused`, carrying the old
item an update refused (:func:`update_if`, :func:`put_if`). Every other AWS error leaves the package as
StorageError.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from botocore.exceptions import ClientError
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.constants import ALL_NEW, ALL_OLD
from pynamodb.exceptions import CancellationReason, DoesNotExist, PutError, TransactWriteError
from pynamodb.expressions.condition import Condition
from pynamodb.indexes import GlobalSecondaryIndex, IncludeProjection
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from bindery import images
from bindery.config import Settings
from bindery.faults import StorageError
from bindery.metadata import Metadata
from bindery.states import State
from bindery.storage.types import Book, Export

# The attributes the sweeps need without a second read: the by_due index projects them.
DUE_PROJECTION = ("export_id", "book_id", "state", "attempt", "counted_against", "paths", "expires_at")

# A build records at most this many skipped chapters (and says how many there were): the row is one item,
# and an item is at most 400 KB, whatever the manuscript.
SKIPPED_KEPT = 100


class Item(Model):
    class Meta:
        # Unbound: every call goes through a Store's own subclasses (Models), never through these.
        table_name = "unbound"
        region = Settings.region

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)


class ByDue(GlobalSecondaryIndex["ExportItem"]):
    """Sparse: only rows with a `queue` are in it, so a sweep reads the work and not the table."""

    class Meta:
        index_name = "by_due"
        projection = IncludeProjection(list(DUE_PROJECTION))

    queue = UnicodeAttribute(hash_key=True)
    due_at = NumberAttribute(range_key=True)


class BookItem(Item):
    owner = UnicodeAttribute()
    title = UnicodeAttribute()
    # The revision an If-Match names and an export builds from; +1 at every change: the manuscript, the
    # title or metadata, an image.
    revision = NumberAttribute()
    # The cut the revision reads: its chapters (CH#<cut>#...) and its text object, both immutable.
    cut = UnicodeAttribute()
    chapter_count = NumberAttribute()
    manuscript_bytes = NumberAttribute(default=0)
    created_at = NumberAttribute()
    updated_at = NumberAttribute()
    # Its metadata and its image assets, as JSON (`bindery.metadata`, `bindery.images`). They are part of
    # the revision, on the same item as its cut: a build that read this item builds one revision's title,
    # text, metadata and images, never a mix of two.
    metadata = UnicodeAttribute(null=True)
    assets = UnicodeAttribute(null=True)


class ChapterItem(Item):
    title = UnicodeAttribute()
    offset = NumberAttribute()
    size_bytes = NumberAttribute()


class MarkersDue(ByDue):
    """The same sparse `by_due` index, read for book-level markers rather than exports."""


class MarkerItem(Item):
    queue = UnicodeAttribute()
    due_at = NumberAttribute()
    by_due = MarkersDue()


class ExportItem(Item):
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
    # JSON: the images the manuscript names and the revision lacks, and the warnings (an image with no alt
    # text), the first NOTES_KEPT of each, with how many there were.
    missing = UnicodeAttribute(null=True)
    missing_total = NumberAttribute(null=True)
    warnings = UnicodeAttribute(null=True)
    warnings_total = NumberAttribute(null=True)
    options = UnicodeAttribute(null=True)  # JSON: the format's options, defaults filled in, as submitted
    sha256 = UnicodeAttribute(null=True)  # of the artifact's bytes, hex, computed as they were written
    package = UnicodeAttribute(null=True)  # "zip": the format's file and its images, zipped
    queue = UnicodeAttribute(null=True)
    due_at = NumberAttribute(null=True)
    ttl = NumberAttribute(null=True)
    # The name of the event the row's last terminal transition publishes (bindery.export.<state>). The
    # table's stream carries the write, and the events pipe turns it into ONE EventBridge event: the row is
    # the outbox, so a transition is published exactly when it happened, and a retried write that changes
    # nothing publishes nothing.
    transition = UnicodeAttribute(null=True)
    by_due = ByDue()


class IdemItem(Item):
    export_id = UnicodeAttribute()
    request_hash = UnicodeAttribute()
    response = UnicodeAttribute()
    ttl = NumberAttribute()


class LiveItem(Item):
    live_ids = UnicodeSetAttribute(null=True)


class CursorItem(Item):
    """How far the orphan reconciliation has read the artifact prefix: (pass, last key)."""

    pass_no = NumberAttribute()
    after = UnicodeAttribute()


class AuditItem(Item):
    """One GC run and what it did (the seed's ghost-sweep rows)."""

    ran_at = NumberAttribute()
    counts = UnicodeAttribute()  # JSON
    ttl = NumberAttribute()


CURSOR_PK, AUDIT_PK = "GC#orphans", "GC#audit"

M = TypeVar("M", bound=Item)


def book_pk(book_id: str) -> str:
    return f"BOOK#{book_id}"


def export_sk(export_id: str) -> str:
    return f"EXPORT#{export_id}"


def chapter_prefix(cut: str) -> str:
    return f"CH#{cut}#"


def retire_sk(cut: str) -> str:
    return f"RETIRE#{cut}"


def retire_asset_sk(object_id: str) -> str:
    # Cuts are r<revision>-..., so an asset's marker can never be read as a cut's.
    return f"RETIRE#A#{object_id}"


PURGE_SK = "PURGE"


def to_export(item: ExportItem) -> Export:
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
        missing=tuple(json.loads(item.missing)) if item.missing else (),
        missing_total=int(item.missing_total or 0),
        warnings=tuple(json.loads(item.warnings)) if item.warnings else (),
        warnings_total=int(item.warnings_total or 0),
        options=json.loads(item.options) if item.options else {},
        sha256=item.sha256,
        package=item.package,
    )


def to_book(item: BookItem) -> Book:
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
        metadata=Metadata.from_stored(item.metadata),
        assets=images.from_stored(item.assets),
    )


def expired_ttl(ttl: float | None, now: float) -> bool:
    # DynamoDB deletes TTL'd items days late; until it does, a read treats them as gone.
    return ttl is not None and ttl <= now


_TRANSACTION_RETRIES = 8
_CONDITION_FAILED = "ConditionalCheckFailed"


@dataclass(frozen=True)
class Refusal:
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
class Tx:
    """One TransactWriteItems whose items have names, so that a cancellation is read by name.

    DynamoDB answers a cancellation with one reason per item, in the order the items were sent, and
    PynamoDB sends a transaction's items grouped as condition checks, deletes, puts, then updates. The
    names are kept in that same grouping here, so the reasons line up with them whatever order the
    items were added in.
    """

    _items: dict[str, list[tuple[str, Callable[[TransactWrite], None]]]] = field(
        default_factory=lambda: {"check": [], "delete": [], "put": [], "update": []}
    )

    def check(self, name: str, model: type[Item], hash_key: str, range_key: str, condition: Any) -> None:
        self._add(
            "check", name, lambda tx: tx.condition_check(model, hash_key, range_key, condition=condition)
        )

    def delete(self, name: str, item: Item, condition: Any = None) -> None:
        self._add("delete", name, lambda tx: tx.delete(item, condition=condition))

    def put(self, name: str, item: Item, condition: Any = None, *, old: bool = False) -> None:
        returns = ALL_OLD if old else None
        self._add("put", name, lambda tx: tx.save(item, condition=condition, return_values=returns))

    def update(
        self, name: str, item: Item, actions: list[Any], condition: Any = None, *, old: bool = False
    ) -> None:
        returns = ALL_OLD if old else None
        self._add(
            "update",
            name,
            lambda tx: tx.update(item, actions=actions, condition=condition, return_values=returns),
        )

    def _add(self, kind: str, name: str, add: Callable[[TransactWrite], None]) -> None:
        self._items[kind].append((name, add))

    def commit(self, connection: Any) -> Refusal | None:
        """Run it; None when it committed, a Refusal when conditions refused it.

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
                return Refusal(dict(zip(names, reasons, strict=True)))
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class Models:
    """One Store's own model classes: subclasses of the ones above, bound to its table and region and sharing
    one connection. PynamoDB keeps a model's table on the class; binding subclasses per Store, rather than
    rebinding these classes, means a second Store on another table (a test's, a tool's) can never redirect
    the first one's writes. The classes above only describe the items; nothing dispatches through them."""

    item: type[Item]
    book: type[BookItem]
    chapter: type[ChapterItem]
    marker: type[MarkerItem]
    export: type[ExportItem]
    idem: type[IdemItem]
    live: type[LiveItem]
    cursor: type[CursorItem]
    audit: type[AuditItem]

    @classmethod
    def bound(cls, table: str, region: str) -> Models:
        def bind(model: type[M]) -> type[M]:
            return bound_model(model, table, region)

        models = cls(
            item=bind(Item),
            book=bind(BookItem),
            chapter=bind(ChapterItem),
            marker=bind(MarkerItem),
            export=bind(ExportItem),
            idem=bind(IdemItem),
            live=bind(LiveItem),
            cursor=bind(CursorItem),
            audit=bind(AuditItem),
        )
        # PynamoDB gives each model class a connection, and each connection a botocore client of its own.
        # Every model here lives in the same table, so they share one: one client to build at cold start,
        # and one place to count calls. (Building the TableConnection makes no call and no client yet.)
        shared = models.export._get_connection()
        for model in models.__dict__.values():
            model._connection = shared
        return models


def bound_model(model: type[M], table: str, region: str) -> type[M]:
    """A subclass of `model` bound to `table` in `region`: how every Store gets model classes of its own."""
    meta = type("Meta", (model.Meta,), {"table_name": table, "region": region})
    return type(model.__name__, (model,), {"Meta": meta, "__module__": model.__module__})


class Rows:
    """What every aggregate's rows share: the settings, and the Store's own models on its one connection."""

    settings: Settings
    m: Models

    def _connection(self) -> Any:
        return self.m.export._get_connection().connection

    # The botocore client PynamoDB talks through; tests hang call counters and fault hooks on it.
    @property
    def client(self) -> Any:
        return self._connection().client


def future_value(future: Any) -> Any:
    try:
        return future.get()
    except DoesNotExist:
        return None


class Refused(Exception):
    def __init__(self, old: Any):
        self.old = old


def update_if(
    client: Any, model: type[M], hash_key: str, range_key: str, actions: list[Any], condition: Condition
) -> M:
    """UpdateItem returning the new item, or raising :class:`Refused` carrying the OLD item.

    PynamoDB's ``Model.update`` does not ask for ``ReturnValuesOnConditionCheckFailure``, so PynamoDB builds
    the request (the same public builder its transactions use) and botocore's `client` sends it. The loser
    learns why it lost from the failure, not from a second read.
    """
    request = model(hash_key, range_key).get_update_kwargs_from_instance(
        actions, condition, return_values_on_condition_failure=ALL_OLD
    )
    try:
        data = client.update_item(**request, ReturnValues=ALL_NEW)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            raw = exc.response.get("Item")
            raise Refused(model.from_raw_data(raw) if raw else None) from exc
        raise  # not a refusal: the Store's translation makes it a StorageError
    return model.from_raw_data(data["Attributes"])


def put_if(item: Item, condition: Condition) -> None:
    """PutItem under `condition`, raising :class:`Refused` when the condition refuses it."""
    try:
        item.save(condition=condition)
    except PutError as exc:
        if exc.cause_response_code == "ConditionalCheckFailedException":
            raise Refused(None) from exc
        raise  # not a refusal: the Store's translation makes it a StorageError


def chunks(items: Iterable[Any], n: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch
