"""The caps as a submit meets them: how many targets a batch may hold, how a submit spreads over the global
cap's shards, and what it is told when a cap refuses it (the global cap of live exports, the caller's
storage budget). Export requests and batch requests both answer with these, so the two read alike."""

from __future__ import annotations

from bindery import errors
from bindery.config import Settings
from bindery.limits import MAX_BATCH_SHARDS, Limits

RETRY_AFTER_OVER_CAP = 30
# A submit its shard of the global cap refused reads them all and tries the roomiest: this many tries in all.
SHARD_TRIES = 3


def service_full(total: int) -> errors.ServiceAtCapacity:
    return errors.ServiceAtCapacity(
        f"the service is building {total:,} exports, the most it takes at once; try again shortly",
        code="service_at_capacity",
        retry_after=RETRY_AFTER_OVER_CAP,
    )


def over_budget(usage: int, budget: int) -> errors.InsufficientStorage:
    return errors.InsufficientStorage(
        f"your finished files take {usage:,} bytes, and your storage budget is {budget:,}; cancel ready "
        "exports you have downloaded (DELETE /books/{bookId}/exports/{exportId} deletes the file at once), "
        "or wait for links to lapse: a lapsed link's file is deleted within minutes",
        code="storage_budget_exceeded",
        usage_bytes=usage,
        budget_bytes=budget,
    )


def most_targets(settings: Settings, limits: Limits) -> int:
    """The most targets one batch may hold: its class's, and no more than the MAX_BATCH_SHARDS largest shards
    of the global cap could ever take at once (under a small cap), so that a batch refused for its size is
    told so (422), never "full, try again" (503) when trying again cannot help."""
    reachable = sum(sorted(settings.shard_caps)[-MAX_BATCH_SHARDS:])
    return min(limits.batch_targets, reachable)
