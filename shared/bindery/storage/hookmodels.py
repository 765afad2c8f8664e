"""The events feed's items as PynamoDB models, beside `table`'s (which is near its size limit), bound per
Store the same way.

Key layout (pk / sk):

    FEED#<sub>     HEAD                       the caller's feed head: the last sequence number given out
    FEED#<sub>     E#<seq:012d>               one event of that caller's feed, kept 30 days
    EVT#<event>    EVT                        which caller's feed holds the event, and at what sequence
"""

from __future__ import annotations

from dataclasses import dataclass

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from bindery.storage.table import Item, M, Models


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


def feed_pk(caller: str) -> str:
    return f"FEED#{caller}"


def event_sk(seq: int) -> str:
    # Zero-padded so that the sort key's order is the sequence's.
    return f"E#{seq:012d}"


def seen_pk(event_id: str) -> str:
    return f"EVT#{event_id}"


HEAD_SK, SEEN_SK = "HEAD", "EVT"


@dataclass(frozen=True)
class FeedModels:
    """The feed's model classes, bound to the Store's table and sharing its one connection (see Models)."""

    head: type[FeedHeadItem]
    event: type[EventItem]
    seen: type[EventSeenItem]

    @classmethod
    def bound(cls, models: Models) -> FeedModels:
        base = models.item.Meta

        def bind(model: type[M]) -> type[M]:
            meta = type("Meta", (model.Meta,), {"table_name": base.table_name, "region": base.region})
            return type(model.__name__, (model,), {"Meta": meta, "__module__": model.__module__})

        feed = cls(head=bind(FeedHeadItem), event=bind(EventItem), seen=bind(EventSeenItem))
        shared = models.export._get_connection()
        for model in feed.__dict__.values():
            model._connection = shared
        return feed
