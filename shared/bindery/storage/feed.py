"""Each caller's events feed: an event appended exactly once per event id, at a gapless sequence, and read
by cursor so that a reader who always passes the cursor it was given sees every event once, in order.

The sequence is a counter moved in the same transaction as the event's put (the design brief's option A):
item E#k exists exactly when HEAD >= k, so a reader that reads HEAD first, consistently, and then queries
up to it, consistently, can miss nothing that HEAD counts. A time-ordered key with a visibility horizon
would skip a write delayed past the horizon for ever; an ADD and then a put would leave a crash's hole that
looks exactly like a slow write.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from bindery.faults import StorageError, item_or_none, translate_faults
from bindery.storage.conditions import (
    Tx,
)
from bindery.storage.hookmodels import (
    HEAD_SK,
    SEEN_SK,
    EventItem,
    EventSeenItem,
    FeedHeadItem,
    HookRows,
    event_sk,
    feed_pk,
    seen_pk,
)
from bindery.storage.table import expired_ttl
from bindery.storage.types import Appended, CursorAhead, CursorGone, FeedEvent, FeedPage

# Tries of one append against other appends to the same feed, each refused try re-aimed at the head its
# refusal showed, after a short random pause that grows with the tries (so that writers who keep colliding
# spread out). Tx.commit retries TransactionConflicts itself.
APPEND_TRIES = 64


@translate_faults
class FeedRows(HookRows):
    def append_event(
        self,
        caller: str,
        event_id: str,
        type: str,
        body: dict[str, Any],
        recorded_at: float,
        now: float | None = None,
    ) -> Appended:
        """Record the event (which happened at `recorded_at`) in `caller`'s feed at head + 1, unless its id
        was recorded before. It is kept 30 days from `now`, its append: so what is kept expires in the
        feed's own order, never a hole in the middle of what a reader has yet to read."""
        pk = feed_pk(caller)
        ttl = (recorded_at if now is None else now) + self.settings.ended_retention_seconds
        head = 0  # a guess: the refusal tells the truth, so no read comes first
        for n in range(APPEND_TRIES):
            if n:
                time.sleep(random.uniform(0, 0.001 * min(n, 16)))
            seq = head + 1
            tx = Tx()
            tx.update(
                "head",
                self.feed_models.head(pk, HEAD_SK),
                [FeedHeadItem.head.set(seq)],
                # Two appends that read the same head cannot both take seq: the loser's condition fails,
                # and its ALL_OLD says where the head went. The first append finds no HEAD at all.
                FeedHeadItem.head == head if head else FeedHeadItem.pk.does_not_exist(),
                old=True,
            )
            tx.put(
                "event",
                self.feed_models.event(
                    pk,
                    event_sk(seq),
                    event_id=event_id,
                    type=type,
                    recorded_at=recorded_at,
                    body=json.dumps(body, separators=(",", ":")),
                    ttl=ttl,
                ),
                # Never overwrite an event: with the head's guard it cannot happen, and if it could, a
                # reader who had passed it would never see the one that replaced it.
                EventItem.pk.does_not_exist(),
            )
            tx.put(
                "seen",
                self.feed_models.seen(seen_pk(event_id), SEEN_SK, caller=caller, seq=seq, ttl=ttl),
                # One event id, one sequence: a redriven or replayed event is not appended twice. Also how
                # a resend of this very transaction is recognised after its answer was lost.
                EventSeenItem.pk.does_not_exist(),
                old=True,
            )
            refused = tx.commit(self._connection())
            if refused is None:
                return Appended(seq, new=True)
            if refused.failed("seen"):
                seen = refused.old(self.feed_models.seen, "seen")
                if seen is None:
                    raise StorageError(f"event {event_id} refused as seen, with no item returned")
                return Appended(int(seen.seq), new=False)
            if not refused.failed("head"):
                # E#seq exists while HEAD is below seq: the invariant the readers rely on is broken.
                raise StorageError(f"feed {caller}: event {seq} exists past its head {head}")
            old = refused.old(self.feed_models.head, "head")
            head = int(old.head) if old is not None else 0
        raise StorageError(f"feed {caller}: no append of {event_id} won in {APPEND_TRIES} tries")

    def feed_head(self, caller: str) -> int:
        """The last sequence number given out in `caller`'s feed (0: none yet), read consistently."""
        item = item_or_none(lambda: self.feed_models.head.get(feed_pk(caller), HEAD_SK, consistent_read=True))
        return 0 if item is None else int(item.head)

    def events_since(self, caller: str, after: int, limit: int, now: float) -> FeedPage:
        """Up to `limit` events after the cursor `after`, oldest first. Writes nothing.

        HEAD first, then the query up to it: every event HEAD counts already exists (it was put in the
        same transaction), so nothing at or below it can appear later and be skipped by a reader past it.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        head = self.feed_head(caller)
        if after < 0 or after > head:
            raise CursorAhead(after, head)
        if after == head:
            return FeedPage((), head, after)
        events = self._events_between(caller, after, head, limit, now)
        # The first kept event is not the next one: TTL removed the ones between.
        if not events or events[0].seq != after + 1:
            raise CursorGone(after, self._oldest_cursor(caller, after, head, now))
        # A hole further on (clocks disagree by a second at the 30-day edge): the page ends before it, so
        # the next read is told of the gap rather than reading past it.
        for n, event in enumerate(events):
            if event.seq != after + 1 + n:
                events = events[:n]
                break
        return FeedPage(tuple(events), head, max(after, events[-1].seq))

    def _events_between(self, caller: str, after: int, head: int, limit: int, now: float) -> list[FeedEvent]:
        found = []
        for item in self.feed_models.event.query(
            feed_pk(caller),
            EventItem.sk.between(event_sk(after + 1), event_sk(head)),
            consistent_read=True,
            limit=limit,
        ):
            if not expired_ttl(item.ttl, now):  # DynamoDB deletes TTL'd items days late
                found.append(_to_event(item))
        return found

    def _oldest_cursor(self, caller: str, after: int, head: int, now: float) -> int:
        """The cursor just before the oldest event still kept (the head, if none is)."""
        for item in self.feed_models.event.query(
            feed_pk(caller),
            EventItem.sk.between(event_sk(after + 1), event_sk(head)),
            consistent_read=True,
        ):
            if not expired_ttl(item.ttl, now):
                return _seq(item) - 1
        return head


def _seq(item: EventItem) -> int:
    return int(item.sk.removeprefix("E#"))


def _to_event(item: EventItem) -> FeedEvent:
    return FeedEvent(_seq(item), item.event_id, item.type, item.recorded_at, json.loads(item.body))
