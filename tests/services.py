"""Every handler's services on one set of collaborators, as `bindery.wiring` composes each: what a test calls
directly, and what it hands each handler. A test that swaps one (a delivery path with a fake queue) swaps
it here, and every handler it then calls is given the swapped one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bindery import wiring
from bindery.api.http import ApiServices
from bindery.assets import BookAssets
from bindery.batches import BatchRequests
from bindery.builds import Builds
from bindery.clock import Clock
from bindery.config import Settings
from bindery.deliveries import Deliveries, KeyQueue
from bindery.exports import ExportRequests
from bindery.library import Library
from bindery.objects import Objects
from bindery.schedules import Schedules
from bindery.storage import Store
from bindery.webhooks import Webhooks


@dataclass
class Services:
    settings: Settings
    store: Store
    objects: Objects
    clock: Clock
    api: ApiServices  # the submit's and the poll's
    builds: Builds  # the build worker's
    schedules: Schedules  # the GC's and the stale sweep's
    deliveries: Deliveries  # the webhook functions'

    @property
    def exports(self) -> ExportRequests:
        return self.api.exports

    @property
    def batches(self) -> BatchRequests:
        return self.api.batches

    @property
    def books(self) -> Library:
        return self.api.books

    @property
    def assets(self) -> BookAssets:
        return self.api.assets

    @property
    def hooks(self) -> Webhooks:
        return self.api.hooks

    def deliveries_with(self, queue: KeyQueue, **swapped: Any) -> Deliveries:
        """The webhook functions' service on these collaborators, with its queue (and its `post`, its
        `jitter`, as given) swapped: what a test of the delivery path puts in `deliveries`."""
        rows = self.store
        return Deliveries(
            self.settings,
            rows.books,
            rows.feed,
            rows.endpoints,
            rows.deliveries,
            self.clock,
            queue,
            **swapped,
        )


def wired(settings: Settings, store: Store, objects: Objects, clock: Clock) -> Services:
    api = wiring.api(settings, store, objects, clock)
    return Services(
        settings,
        store,
        objects,
        clock,
        api,
        wiring.build_worker(settings, store, objects, clock),
        wiring.expiry_gc(settings, store, objects, clock),
        wiring.webhooks(settings, store, clock),
    )
