"""Each handler's services, composed: one function per handler, given the collaborators its services are
built on (the settings, the store, the objects, the clock), and one `default_<handler>()` that builds them
once on the process's own. Building them makes no AWS call.

A service is constructed with exactly the collaborators it uses and the services it calls; none is part of
another. Of the store it is handed only the row stores it reads and writes (`store.books`, `store.exports`,
...), never the whole Store, so that its constructor says which of the table's aggregates it touches. Each
function imports its services' modules when it runs, not at the top of this module, so that a handler loads
only the modules its own services need: the webhook functions never load the export requests, and the build
worker never loads the API's.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import TYPE_CHECKING

from bindery import config
from bindery.clock import Clock
from bindery.config import Settings
from bindery.objects import Objects
from bindery.storage import Store

if TYPE_CHECKING:
    from bindery.api.http import ApiServices
    from bindery.batches import BatchRequests
    from bindery.builds import Builds
    from bindery.deliveries import Deliveries
    from bindery.exports import ExportRequests
    from bindery.library import Library
    from bindery.purges import Purges
    from bindery.schedules import Schedules


def api(settings: Settings, store: Store, objects: Objects, clock: Clock = time.time) -> ApiServices:
    """The submit's and the poll's: exports, batches, books, their images and webhook endpoints, as
    callers use them."""
    from bindery.api.http import ApiServices
    from bindery.assets import BookAssets
    from bindery.batches import BatchRequests
    from bindery.webhooks import Webhooks

    purges = _purges(store, objects, clock)
    books = _library(settings, store, objects, clock, purges)
    exports = _exports(settings, store, objects, clock, purges)
    batches = BatchRequests(settings, store.batches, store.exports, objects, clock, exports, purges)
    assets = BookAssets(store.books, objects, clock, books.revisions)
    hooks = Webhooks(settings, store.feed, store.endpoints, store.deliveries, clock)
    return ApiServices(exports, batches, books, assets, hooks)


def build_worker(settings: Settings, store: Store, objects: Objects, clock: Clock = time.time) -> Builds:
    from bindery.builds import Builds

    return Builds(settings, store.books, store.claims, store.batches, objects, clock)


def expiry_gc(settings: Settings, store: Store, objects: Objects, clock: Clock = time.time) -> Schedules:
    return _schedules(settings, store, objects, clock, _purges(store, objects, clock))


def stale_sweep(
    settings: Settings, store: Store, objects: Objects, clock: Clock = time.time
) -> tuple[Schedules, BatchRequests]:
    """The stale exports' chore (`Schedules.fail_stale_exports`) and the batch sweep's
    (`BatchRequests.settle_batches`)."""
    from bindery.batches import BatchRequests

    purges = _purges(store, objects, clock)
    exports = _exports(settings, store, objects, clock, purges)
    return (
        _schedules(settings, store, objects, clock, purges),
        BatchRequests(settings, store.batches, store.exports, objects, clock, exports, purges),
    )


def _library(settings: Settings, store: Store, objects: Objects, clock: Clock, purges: Purges) -> Library:
    from bindery.library import Library
    from bindery.revisions import Revisions

    return Library(settings, store.books, objects, clock, Revisions(settings, store.books, clock), purges)


def _purges(store: Store, objects: Objects, clock: Clock) -> Purges:
    from bindery.purges import Purges

    return Purges(store.books, store.exports, store.sweeps, store.batches, objects, clock)


def _exports(
    settings: Settings, store: Store, objects: Objects, clock: Clock, purges: Purges
) -> ExportRequests:
    from bindery.exports import ExportRequests

    return ExportRequests(settings, store.books, store.exports, store.batches, objects, clock, purges)


def _schedules(settings: Settings, store: Store, objects: Objects, clock: Clock, purges: Purges) -> Schedules:
    from bindery.schedules import Schedules

    return Schedules(settings, store.books, store.sweeps, store.batches, objects, clock, purges)


def webhooks(settings: Settings, store: Store, clock: Clock = time.time) -> Deliveries:
    """The delivery path's: webhook_ingest, webhook_sender and webhook_sweep each call one of its three."""
    from bindery.deliveries import Deliveries
    from bindery.sendqueue import SendQueue

    return Deliveries(
        settings, store.books, store.feed, store.endpoints, store.deliveries, clock, SendQueue(settings)
    )


# ---- on the process's own collaborators, built on first use --------------------------------------


@lru_cache(maxsize=1)
def default_api() -> ApiServices:
    return api(config.settings(), Store(config.settings()), Objects(config.settings()))


@lru_cache(maxsize=1)
def default_build_worker() -> Builds:
    return build_worker(config.settings(), Store(config.settings()), Objects(config.settings()))


@lru_cache(maxsize=1)
def default_expiry_gc() -> Schedules:
    return expiry_gc(config.settings(), Store(config.settings()), Objects(config.settings()))


@lru_cache(maxsize=1)
def default_stale_sweep() -> tuple[Schedules, BatchRequests]:
    return stale_sweep(config.settings(), Store(config.settings()), Objects(config.settings()))


@lru_cache(maxsize=1)
def default_webhooks() -> Deliveries:
    return webhooks(config.settings(), Store(config.settings()))
