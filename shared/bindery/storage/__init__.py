"""The table: every DynamoDB call Bindery makes, and the guards that make them safe.

One table holds books, chapters, exports, idempotency keys and each caller's live set. The package is split
by what it stores, one module each, over one module of models and keys:

    table        the PynamoDB models and the key layout; `Rows`, the plumbing every row store shares (the
                 settings, the Store's bound models, their one connection)
    conditions   the named transaction, the single-item refusal, and how each is read
    types        the frozen types and outcomes the rest of the code sees (never a PynamoDB model)
    lifecycle    the export lifecycle as one table: each step a Transition value, and its outcomes
    steps        one builder per step: its guard, its writes, its counts, and the marks of its own write
    endings      LifecycleRows.transition(), the one commit of every step, and the counts a pending
                 export's ending frees
    idempotency  KeyRows: taking an Idempotency-Key in the write it guards, and reading it back from a refusal
    caps         the conditions that hold the caps: a caller's live item, the global cap's shards
    books        BookRows: books, cuts, chapters, and the markers that owe the GC a chore
    exports      ExportRows: submit, read, list, cancel and revoke; ending a deleted book's exports; and
                 `pending_row`, the one maker of a new export's row (a submit's, a batch target's, a bundle's)
    batches      BatchRows: many exports as one job, created with every target in one write, read, listed,
                 cancelled, and ended as the batch service decides
    claims       ClaimRows: the worker's claim, progress, lease release, and the attempt's ending
    sweeps       SweepRows: the by_due queues, the orphan cursor and the GC's audit rows
    hookmodels   the events feed's models and keys, bound per Store like table's; `HookRows`, their plumbing
    feed         FeedRows: each caller's events feed, appended once per event id, gapless, read by cursor
    hooks        EndpointRows: webhook endpoints, registered under a cap, patched and deleted while active
    deliveries   DeliveryRows: the delivery ledger, one per (endpoint, event), each attempt claimed and
                 recorded once

`Store` composes them, and does nothing else: it binds the models once, on one connection, and holds one
row store per aggregate (`store.books`, `.exports`, `.batches`, `.claims`, `.sweeps`, `.feed`,
`.endpoints`, `.deliveries`). No row store inherits another's methods. The two that several need are held,
not inherited: the one `LifecycleRows`, through which exports, claims and sweeps end an export's row, and
the one `KeyRows`, through which books, exports and batches take an Idempotency-Key. A service is handed
only the row stores it uses (`bindery.wiring`).

A refused conditional write comes back as a domain outcome ("claim refused", "already ended"), never as a
botocore error; any other AWS error leaves as StorageError (`bindery.faults`, the one translation).
"""

from __future__ import annotations

from typing import Any

from bindery.config import Settings
from bindery.faults import StorageError
from bindery.storage.batches import BATCH_CHECK_SECONDS, BatchRows
from bindery.storage.books import BookRows
from bindery.storage.claims import ClaimRows
from bindery.storage.conditions import (
    chunks,
)
from bindery.storage.deliveries import MAX_REDELIVERIES, Created, DeliveryRows
from bindery.storage.endings import LifecycleRows
from bindery.storage.exports import ExportRows
from bindery.storage.feed import FeedRows
from bindery.storage.hookmodels import FeedModels
from bindery.storage.hooks import EndpointRows
from bindery.storage.idempotency import KeyRows
from bindery.storage.sweeps import SweepRows
from bindery.storage.table import (
    DUE_PROJECTION,
    SKIPPED_KEPT,
    Models,
)
from bindery.storage.types import (
    BUNDLE,
    Accepted,
    Appended,
    Attempt,
    Batch,
    BatchCreated,
    Book,
    Cancelled,
    CancelOutcome,
    Chapter,
    Claimed,
    ClaimRefused,
    CursorAhead,
    CursorGone,
    Delivery,
    Due,
    EndedTarget,
    Endpoint,
    EndpointOverCap,
    Export,
    FeedEvent,
    FeedPage,
    Holdings,
    KeyReused,
    Marker,
    NotFound,
    OverBudget,
    OverCap,
    Replayed,
    Revoked,
    Secret,
    ShardFull,
    SubmitOutcome,
    Swept,
    Target,
    TooManyBatches,
)

__all__ = [
    "BATCH_CHECK_SECONDS",
    "BUNDLE",
    "DUE_PROJECTION",
    "MAX_REDELIVERIES",
    "SKIPPED_KEPT",
    "Accepted",
    "Appended",
    "Attempt",
    "Batch",
    "BatchCreated",
    "BatchRows",
    "Book",
    "BookRows",
    "CancelOutcome",
    "Cancelled",
    "Chapter",
    "ClaimRefused",
    "ClaimRows",
    "Claimed",
    "Created",
    "CursorAhead",
    "CursorGone",
    "Delivery",
    "DeliveryRows",
    "Due",
    "EndedTarget",
    "Endpoint",
    "EndpointOverCap",
    "EndpointRows",
    "Export",
    "ExportRows",
    "FeedEvent",
    "FeedPage",
    "FeedRows",
    "Holdings",
    "KeyReused",
    "Marker",
    "NotFound",
    "OverBudget",
    "OverCap",
    "Replayed",
    "Revoked",
    "Secret",
    "ShardFull",
    "StorageError",
    "Store",
    "SubmitOutcome",
    "SweepRows",
    "Swept",
    "Target",
    "TooManyBatches",
    "chunks",
]


class Store:
    """The table, through PynamoDB: the composition root of each aggregate's rows. It binds the models once,
    on one connection, and holds one row store per aggregate; it has no business method of its own. A
    service is handed only the row stores it uses (`bindery.wiring`). Construct one per process; it builds
    its client on first use.

    Every public method of a row store lets an AWS fault out only as StorageError (`bindery.faults`): a
    refused condition is decoded in the aggregate's module, into an outcome, and nothing else is."""

    def __init__(self, settings: Settings):
        self.settings = settings
        # The one place the table's name and region are set: read from config, never at import, and on
        # this Store's own model classes only (`models`, and the feed's and webhooks' `feed_models`).
        self.models = models = Models.bound(settings.table, settings.region)
        self.feed_models = feed_models = FeedModels.bound(models)
        # Held by the rows that write through them, not inherited: the one commit of the export lifecycle
        # (exports, claims and sweeps end rows through it), and the Idempotency-Keys a create takes.
        lifecycle, keys = LifecycleRows(settings, models), KeyRows(settings, models)
        self.books = BookRows(settings, models, keys)
        self.exports = ExportRows(settings, models, lifecycle, keys)
        self.batches = BatchRows(settings, models, keys)
        self.claims = ClaimRows(settings, models, lifecycle)
        self.sweeps = SweepRows(settings, models, lifecycle)
        self.feed = FeedRows(settings, models, feed_models)
        self.endpoints = EndpointRows(settings, models, feed_models)
        self.deliveries = DeliveryRows(settings, models, feed_models)

    # The botocore client every row store talks through (one, shared); tests hang call counters and fault
    # hooks on it.
    @property
    def client(self) -> Any:
        return self.books.client
