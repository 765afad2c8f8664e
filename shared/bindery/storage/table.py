"""The table's items as PynamoDB models, and their keys.

Key layout (pk / sk):

    BOOK#<book>    BOOK                       the book: owner, title, current revision and its cut
    BOOK#<book>    CH#<cut>#<ordinal>         one chapter of one cut: its title and byte range in S3
    BOOK#<book>    RETIRE#<cut>               a cut whose chapters and text are to be removed at due_at
    BOOK#<book>    PURGE                      a deleted book whose exports are still to be ended
    BOOK#<book>    EXPORT#<export>            an export, which is also the build job
    IDEM#<digest>  IDEM                       a caller's Idempotency-Key and the answer it was given
    CALLER#<sub>   LIVE                       that caller's pending single exports, live batches and usage
    CALLER#<sub>   BATCH#<batch>              a batch: its targets, and how many have ended and how
    CALLER#<sub>   SHELF#<created ms>#<book>  one of that caller's books, for GET /books (newest first)
    CAP#live       SHARD#<k>                  one of the 16 counters the global cap of live exports is cut in
    GC#orphans     CURSOR                     how far the orphan reconciliation has read
    GC#audit       <time>#<id>                one GC run and what it did

How a conditional write is made, and its refusal read, is `bindery.storage.conditions`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.indexes import GlobalSecondaryIndex, IncludeProjection
from pynamodb.models import Model

from bindery import images
from bindery.config import Settings
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
    # A batch's target: the batch whose counts its ending moves (a single export has none, and counts in its
    # caller's live set instead). The caller's class, whose pdf limit its build holds it to.
    batch_id = UnicodeAttribute(null=True)
    caller_class = UnicodeAttribute(null=True)
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
    """What a caller holds at once: its pending single exports, its live batches, and the bytes of its
    published files still stored. Every write that changes one of them changes it here, in the same
    transaction, so each is exact: a cap is checked against the set it counts."""

    live_ids = UnicodeSetAttribute(null=True)
    batch_ids = UnicodeSetAttribute(null=True)
    usage = NumberAttribute(null=True)


class ShardItem(Item):
    """One of the global cap's counters: the live exports whose ids end in its hex digit."""

    n = NumberAttribute(null=True)


class BatchesDue(ByDue):
    """The same sparse `by_due` index, read for batches whose ending the sweep makes sure of."""


class BatchItem(Item):
    batch_id = UnicodeAttribute()
    caller_class = UnicodeAttribute()
    # Stored as `state` and `counted_against`, the names the events pipe reads an ending from, so that one
    # pipe and one input template publish an export's endings and a batch's (`transition` names the kind).
    status = UnicodeAttribute(attr_name="state")
    counted_against = UnicodeAttribute()
    targets = UnicodeAttribute()  # JSON: [{"export_id", "book_id", "format"}], in the request's order
    targets_total = NumberAttribute()
    # Moved only by the write that ends a target (`transition()`, `bindery.storage.endings`): once each.
    targets_done = NumberAttribute(default=0)
    n_ready = NumberAttribute(default=0)
    n_failed = NumberAttribute(default=0)
    n_cancelled = NumberAttribute(default=0)
    bytes = NumberAttribute(default=0)  # of the files its targets published
    created_at = NumberAttribute()
    finished_at = NumberAttribute(null=True)
    bundle_id = UnicodeAttribute(null=True)  # its zip's export row (BOOK#<batch>/EXPORT#<bundle>)
    revoked_at = NumberAttribute(null=True)  # when a cancel ended an ended batch's links
    key_digest = UnicodeAttribute(null=True)
    transition = UnicodeAttribute(null=True)
    queue = UnicodeAttribute(null=True)
    due_at = NumberAttribute(null=True)
    ttl = NumberAttribute(null=True)
    by_due = BatchesDue()


class CursorItem(Item):
    """How far the orphan reconciliation has read the artifact prefix: (pass, last key)."""

    pass_no = NumberAttribute()
    after = UnicodeAttribute()


class AuditItem(Item):
    """One GC run and what it did (the audit rows of the GC's runs)."""

    ran_at = NumberAttribute()
    counts = UnicodeAttribute()  # JSON
    ttl = NumberAttribute()


CURSOR_PK, AUDIT_PK, CAP_PK = "GC#orphans", "GC#audit", "CAP#live"

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


def caller_pk(caller: str) -> str:
    return f"CALLER#{caller}"


def batch_sk(batch_id: str) -> str:
    return f"BATCH#{batch_id}"


SHELF_PREFIX = "SHELF#"


def shelf_sk(position: str) -> str:
    return f"{SHELF_PREFIX}{position}"


def shelf_position(created_at: float, book_id: str) -> str:
    """Where a book stands on its owner's shelf: its creation in milliseconds, zero-padded so that the keys
    sort by time, then its id (random, so two books made in one millisecond both have a place)."""
    return f"{round(created_at * 1000):013d}#{book_id}"


def shard_sk(shard: int) -> str:
    return f"SHARD#{shard:02d}"


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
        batch_id=item.batch_id,
        caller_class=item.caller_class,
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
    shard: type[ShardItem]
    batch: type[BatchItem]
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
            shard=bind(ShardItem),
            batch=bind(BatchItem),
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
    """What every aggregate's rows share: the settings, and the Store's own models on its one connection.
    A base of plumbing only: each aggregate's rows is a class of its own, and holds (rather than inherits)
    any other rows it writes through."""

    def __init__(self, settings: Settings, models: Models):
        self.settings, self.models = settings, models

    def _connection(self) -> Any:
        return self.models.export._get_connection().connection

    # The botocore client PynamoDB talks through; tests hang call counters and fault hooks on it.
    @property
    def client(self) -> Any:
        return self._connection().client
