"""The events feed's items as PynamoDB models, beside `table`'s (which is near its size limit), bound per
Store the same way.

Key layout (pk / sk):

    FEED#<sub>     HEAD                       the caller's feed head: the last sequence number given out
    FEED#<sub>     E#<seq:012d>               one event of that caller's feed, kept 30 days
    EVT#<event>    EVT                        which caller's feed holds the event, and at what sequence
"""

from __future__ import annotations

from dataclasses import dataclass

from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UnicodeSetAttribute

from bindery.config import Settings
from bindery.storage.table import ByDue, Item, M, Models, Rows, bound_model


class FeedHeadItem(Item):
    head = NumberAttribute()


class EventItem(Item):
    event_id = UnicodeAttribute()
    type = UnicodeAttribute()
    recorded_at = NumberAttribute()
    body = UnicodeAttribute()  # JSON, the event as the feed and the webhooks show it
    ttl = NumberAttribute()


class EventSeenItem(Item):
    """The dedupe: an event id is recorded once, and this says where."""

    caller = UnicodeAttribute()
    seq = NumberAttribute()
    ttl = NumberAttribute()


class HookSetItem(Item):
    hook_ids = UnicodeSetAttribute(null=True)


# The states a delivery can be in, each with its count on the endpoint (`n_<state>`).
DELIVERY_STATES = ("queued", "in_flight", "acked", "rejected", "expired", "withdrawn")


class EndpointsDue(ByDue):
    """The same sparse `by_due` index, read for deleted endpoints whose deliveries are to be withdrawn."""


class EndpointItem(Item):
    endpoint_id = UnicodeAttribute()
    url = UnicodeAttribute()
    events = UnicodeSetAttribute()
    description = UnicodeAttribute(default="")
    # JSON: [{"key": "whsec_...", "not_after": <time> | null}], the newest first. Never shown after the
    # answer that made it: an endpoint's read shows how many there are and until when.
    secrets = UnicodeAttribute()
    state = UnicodeAttribute()  # active / deleted
    deleted_by = UnicodeAttribute(null=True)  # the DELETE's token: how its resend knows its own write
    enabled = NumberAttribute(default=1)
    disabled_at = NumberAttribute(null=True)
    disabled_reason = UnicodeAttribute(null=True)
    fails_in_row = NumberAttribute(default=0)
    created_at = NumberAttribute()
    updated_at = NumberAttribute()
    # The ledger's counts, one per state, moved in the same transaction as the delivery they count: exact,
    # and never the size of a page.
    n_queued = NumberAttribute(default=0)
    n_in_flight = NumberAttribute(default=0)
    n_acked = NumberAttribute(default=0)
    n_rejected = NumberAttribute(default=0)
    n_expired = NumberAttribute(default=0)
    n_withdrawn = NumberAttribute(default=0)
    # A deleted endpoint waits in the `withdraw` queue until its queued deliveries are withdrawn.
    queue = UnicodeAttribute(null=True)
    due_at = NumberAttribute(null=True)
    ttl = NumberAttribute(null=True)
    by_due = EndpointsDue()


class DeliveriesDue(ByDue):
    """The same sparse `by_due` index, read for deliveries rather than exports."""


class DeliveryItem(Item):
    event_id = UnicodeAttribute()
    type = UnicodeAttribute()
    caller = UnicodeAttribute()
    book_id = UnicodeAttribute(null=True)
    body = UnicodeAttribute()  # JSON: the event exactly as the feed shows it
    state = UnicodeAttribute()
    attempt = NumberAttribute(default=0)  # attempts begun
    budget = NumberAttribute()  # attempts allowed
    redeliveries = NumberAttribute(default=0)
    attempts = UnicodeAttribute(default="[]")  # JSON: every attempt, when, status or error, latency
    claim = UnicodeAttribute(null=True)  # the claimer's token: how a claim or record knows its own write
    lease_until = NumberAttribute(null=True)
    created_at = NumberAttribute()
    window_ends = NumberAttribute()
    queue = UnicodeAttribute(null=True)
    due_at = NumberAttribute(null=True)
    ttl = NumberAttribute(null=True)
    by_due = DeliveriesDue()


def feed_pk(caller: str) -> str:
    return f"FEED#{caller}"


def event_sk(seq: int) -> str:
    # Zero-padded so that the sort key's order is the sequence's.
    return f"E#{seq:012d}"


def seen_pk(event_id: str) -> str:
    return f"EVT#{event_id}"


def caller_pk(caller: str) -> str:
    return f"CALLER#{caller}"


def endpoint_sk(endpoint_id: str) -> str:
    return f"HOOK#{endpoint_id}"


def hook_pk(endpoint_id: str) -> str:
    return f"HOOK#{endpoint_id}"


def delivery_sk(seq: int) -> str:
    return f"DLV#{seq:012d}"


HEAD_SK, SEEN_SK, HOOKS_SK = "HEAD", "EVT", "HOOKS"


@dataclass(frozen=True)
class FeedModels:
    """The feed's model classes, bound to the Store's table and sharing its one connection (see Models)."""

    head: type[FeedHeadItem]
    event: type[EventItem]
    seen: type[EventSeenItem]
    hooks: type[HookSetItem]
    endpoint: type[EndpointItem]
    delivery: type[DeliveryItem]

    @classmethod
    def bound(cls, models: Models) -> FeedModels:
        base = models.item.Meta

        def bind(model: type[M]) -> type[M]:
            return bound_model(model, base.table_name, base.region)

        feed = cls(
            head=bind(FeedHeadItem),
            event=bind(EventItem),
            seen=bind(EventSeenItem),
            hooks=bind(HookSetItem),
            endpoint=bind(EndpointItem),
            delivery=bind(DeliveryItem),
        )
        shared = models.export._get_connection()
        for model in feed.__dict__.values():
            model._connection = shared
        return feed


class HookRows(Rows):
    """What the feed's, the endpoints' and the deliveries' rows share: Rows, and the feed's own models."""

    def __init__(self, settings: Settings, models: Models, feed_models: FeedModels):
        super().__init__(settings, models)
        self.feed_models = feed_models
