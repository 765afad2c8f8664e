"""The webhook delivery ledger: one delivery per (endpoint, event), its attempts claimed one at a time, each
recorded once, and the endpoint's count of each state moved in the same transaction as the delivery it
counts, so the counts are exact.

    queued --claim--> in_flight --record--> acked | rejected | queued (its next attempt) | expired
      |  `-- window or budget spent --> expired        in_flight, lease run out --claim again--^
      `-- endpoint deleted / book deleted --> withdrawn
    acked | rejected | expired | withdrawn --redeliver--> queued (one more attempt)

Each write names the race it closes. A claim or a record carries the claimer's token, and a refusal's
ALL_OLD item shows whether the write it refused was this claimer's own, applied with its answer lost.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from enum import StrEnum
from typing import Any

from bindery.faults import item_or_none, translate_faults
from bindery.states import DELIVERY_ENDED, NO_ANSWER_RECORDED, DeliveryState, Queue
from bindery.storage.conditions import (
    ItemRefused,
    Tx,
    update_if,
)
from bindery.storage.hookmodels import (
    DeliveryItem,
    EndpointItem,
    HookRows,
    caller_pk,
    delivery_sk,
    endpoint_sk,
    hook_pk,
)
from bindery.storage.types import Attempt, Delivery

# A delivery may be sent again by hand this many times; its attempts, all kept, stay under one item's size.
MAX_REDELIVERIES = 10
S = DeliveryState


class Created(StrEnum):
    CREATED = "created"
    EXISTS = "exists"  # this event's delivery to this endpoint was made before (a replay, or our resend)
    NOT_ELIGIBLE = "not_eligible"  # the endpoint is deleted, disabled, unsubscribed, or newer than the event


def _count(state: str, by: int) -> Any:
    return getattr(EndpointItem, f"n_{state}").add(by)


@translate_faults
class DeliveryRows(HookRows):
    def create_delivery(self, delivery: Delivery, event_time: float) -> Created:
        """Write the event's delivery to one endpoint, and count it, unless it exists or the endpoint may
        not have it."""
        tx = Tx()
        tx.put(
            "delivery",
            self._delivery_item(delivery),
            # At most one per (endpoint, event): the key is the pair, and it must be new. A redriven or
            # duplicated event, or this transaction's own resend, finds it there.
            DeliveryItem.pk.does_not_exist(),
        )
        tx.update(
            "endpoint",
            self.feed_models.endpoint(caller_pk(delivery.caller), endpoint_sk(delivery.endpoint_id)),
            [_count(S.QUEUED, 1)],
            # Read at the instant of the write, not when ingest listed the endpoints: one deleted,
            # disabled or unsubscribed since gets nothing, and one registered after the event happened
            # does not receive it.
            (EndpointItem.state == "active")
            & (EndpointItem.enabled == 1)
            & EndpointItem.events.contains(delivery.type)
            # EventBridge's time is whole seconds: an endpoint made earlier in the event's second gets it.
            & (EndpointItem.created_at < event_time + 1),
        )
        refused = tx.commit(self._connection())
        if refused is None:
            return Created.CREATED
        return Created.EXISTS if refused.failed("delivery") else Created.NOT_ELIGIBLE

    def read_delivery(self, endpoint_id: str, seq: int) -> Delivery | None:
        key = hook_pk(endpoint_id), delivery_sk(seq)
        item = item_or_none(lambda: self.feed_models.delivery.get(*key, consistent_read=True))
        return None if item is None else to_delivery(item)

    def claim_delivery(self, d: Delivery, token: str, now: float, budget: int) -> Delivery | None:
        """Take the delivery's next attempt, under `budget` (the delivery's, or one more where the attempt
        taken over is given back), or None if it is not this claimer's to take.

        A queued delivery is claimed from queued; an in_flight one only once its lease has run out (its
        sender died, or its claim was applied with every answer lost), and that attempt is recorded as
        unanswered."""
        lease_until = now + self.settings.webhook_lease_seconds
        attempts = list(d.attempts)
        if d.state == S.IN_FLIGHT:
            attempts.append(Attempt(d.attempt, d.lease_until or now, None, NO_ANSWER_RECORDED, 0))
        actions = [
            DeliveryItem.state.set(S.IN_FLIGHT.value),
            DeliveryItem.attempt.set(d.attempt + 1),
            DeliveryItem.budget.set(budget),
            DeliveryItem.claim.set(token),
            DeliveryItem.lease_until.set(lease_until),
            DeliveryItem.attempts.set(_attempts_json(attempts)),
            # Should this sender die mid-send, the sweep finds the row again when the lease runs out.
            DeliveryItem.due_at.set(lease_until),
        ]
        # One attempt is never sent twice: the claim names the attempt and budget it saw, so of two senders
        # given the same message only one moves it (and gives a lapsed attempt back once), and a budget or
        # window that is spent takes no more. A duplicate message, or the sweep's, cannot bring an attempt
        # forward of its schedule: it must be due.
        spendable = (
            (DeliveryItem.due_at <= now)
            & (DeliveryItem.attempt == d.attempt)
            & (DeliveryItem.redeliveries == d.redeliveries)
            & (DeliveryItem.budget == d.budget)
            & (DeliveryItem.attempt < budget)
            & (DeliveryItem.window_ends > now)
        )
        tx = Tx()
        row = self.feed_models.delivery(hook_pk(d.endpoint_id), delivery_sk(d.seq))
        if d.state == S.QUEUED:
            tx.update("delivery", row, actions, spendable & (DeliveryItem.state == S.QUEUED.value), old=True)
            self._move(tx, d, S.QUEUED, S.IN_FLIGHT)
        elif d.state == S.IN_FLIGHT:
            lapsed = (DeliveryItem.state == S.IN_FLIGHT.value) & (DeliveryItem.lease_until <= now)
            tx.update("delivery", row, actions, spendable & lapsed, old=True)
        else:
            return None
        refused = tx.commit(self._connection())
        claimed = replace(d, state=S.IN_FLIGHT.value, attempt=d.attempt + 1, attempts=tuple(attempts))
        claimed = replace(claimed, budget=budget, lease_until=lease_until, due_at=lease_until)
        if refused is None:
            return claimed
        old = refused.old(self.feed_models.delivery, "delivery")
        if old is not None and old.claim == token and int(old.attempt) == d.attempt + 1:
            return claimed  # our own claim, applied, its answer lost
        return None

    def record_attempt(
        self, d: Delivery, token: str, attempt: Attempt, to: DeliveryState, next_due: float | None, now: float
    ) -> bool:
        """End the claimed attempt: the delivery moves to `to` (queued again at `next_due`, or an ending),
        the attempt joins its record, and the endpoint's counts and run of failures move with it."""
        attempts = (*d.attempts, attempt)
        actions: list[Any] = [
            DeliveryItem.state.set(to.value),
            DeliveryItem.attempts.set(_attempts_json(attempts)),
            DeliveryItem.lease_until.remove(),
        ]
        actions += _queue_actions(to, next_due, now, self.settings.ended_retention_seconds)
        tx = Tx()
        tx.update(
            "delivery",
            self.feed_models.delivery(hook_pk(d.endpoint_id), delivery_sk(d.seq)),
            actions,
            # A late attempt cannot overwrite its successor's: only the claimer of this very attempt,
            # while it is still in flight, records it.
            (DeliveryItem.state == S.IN_FLIGHT.value)
            & (DeliveryItem.attempt == d.attempt)
            & (DeliveryItem.claim == token),
            old=True,
        )
        fails = EndpointItem.fails_in_row.set(0) if to == S.ACKED else EndpointItem.fails_in_row.add(1)
        self._move(tx, d, S.IN_FLIGHT, to, extra=[fails])
        refused = tx.commit(self._connection())
        if refused is None:
            return True
        old = refused.old(self.feed_models.delivery, "delivery")
        # Our own record, applied, its answer lost: the row holds the attempt we just wrote.
        return old is not None and old.claim == token and old.attempts == _attempts_json(attempts)

    def end_waiting(self, d: Delivery, to: DeliveryState, now: float) -> bool:
        """A delivery that will not be sent ends: withdrawn (its endpoint or book was deleted) or expired
        (its budget or window is spent). From queued, or from in_flight once the lease ran out."""
        token = uuid.uuid4().hex
        actions = [DeliveryItem.state.set(to.value), DeliveryItem.claim.set(token)]
        actions += _queue_actions(to, None, now, self.settings.ended_retention_seconds)
        if d.state == S.QUEUED:
            # An attempt claimed meanwhile is sent and recorded first; this one is not ours to end.
            waiting = DeliveryItem.state == S.QUEUED.value
        else:
            waiting = (DeliveryItem.state == S.IN_FLIGHT.value) & (DeliveryItem.lease_until <= now)
            attempts = (*d.attempts, Attempt(d.attempt, d.lease_until or now, None, NO_ANSWER_RECORDED, 0))
            actions += [
                DeliveryItem.attempts.set(_attempts_json(attempts)),
                DeliveryItem.lease_until.remove(),
            ]
        tx = Tx()
        tx.update(
            "delivery",
            self.feed_models.delivery(hook_pk(d.endpoint_id), delivery_sk(d.seq)),
            actions,
            # The same attempt of the same round: a redelivery since this sender read it is not its to end.
            waiting & (DeliveryItem.attempt == d.attempt) & (DeliveryItem.redeliveries == d.redeliveries),
            old=True,
        )
        self._move(tx, d, DeliveryState(d.state), to)
        refused = tx.commit(self._connection())
        if refused is None:
            return True
        old = refused.old(self.feed_models.delivery, "delivery")
        return old is not None and old.claim == token  # our own, applied, its answer lost

    def defer_delivery(self, d: Delivery, until: float, now: float) -> bool:
        """A delivery to a disabled endpoint waits: looked at again at `until` (its window's end at the
        latest), sent if the endpoint was enabled again by then. One whose sender died in flight waits the
        same way, its lapsed lease kept, so it cannot sit at the head of the sweep's queue."""
        try:
            update_if(
                self.client,
                self.feed_models.delivery,
                hook_pk(d.endpoint_id),
                delivery_sk(d.seq),
                [DeliveryItem.due_at.set(until)],
                (
                    (DeliveryItem.state == S.QUEUED.value)
                    | ((DeliveryItem.state == S.IN_FLIGHT.value) & (DeliveryItem.lease_until <= now))
                )
                & (DeliveryItem.attempt == d.attempt)
                & (DeliveryItem.redeliveries == d.redeliveries),
            )
        except ItemRefused:
            return False
        return True

    def redeliver(self, d: Delivery, now: float) -> Delivery | None:
        """An ended delivery queued for one more attempt, the same delivery, its record kept. None if it
        is not ended, it was sent again too often, or its endpoint is gone."""
        if d.state not in DELIVERY_ENDED or d.redeliveries >= MAX_REDELIVERIES:
            return None
        token = uuid.uuid4().hex
        actions = [
            DeliveryItem.state.set(S.QUEUED.value),
            DeliveryItem.claim.set(token),
            DeliveryItem.budget.set(d.attempt + 1),
            DeliveryItem.redeliveries.set(d.redeliveries + 1),
            DeliveryItem.window_ends.set(now + self.settings.webhook_window_seconds),
            DeliveryItem.queue.set(Queue.DELIVER.value),
            DeliveryItem.due_at.set(now),
            DeliveryItem.ttl.remove(),
        ]
        tx = Tx()
        tx.update(
            "delivery",
            self.feed_models.delivery(hook_pk(d.endpoint_id), delivery_sk(d.seq)),
            actions,
            # Two redeliveries of the same ended delivery cannot both queue it: the second finds it queued.
            (DeliveryItem.state == d.state) & (DeliveryItem.redeliveries == d.redeliveries),
            old=True,
        )
        self._move(tx, d, DeliveryState(d.state), S.QUEUED, active=True)
        refused = tx.commit(self._connection())
        queued = replace(d, state=S.QUEUED.value, budget=d.attempt + 1, redeliveries=d.redeliveries + 1)
        queued = replace(queued, window_ends=now + self.settings.webhook_window_seconds, due_at=now)
        if refused is None:
            return queued
        old = refused.old(self.feed_models.delivery, "delivery")
        if old is not None and old.claim == token:
            return queued  # our own, applied, its answer lost
        return None

    def list_deliveries(
        self, endpoint_id: str, state: str | None, limit: int, before: int | None
    ) -> tuple[list[Delivery], int | None]:
        """The endpoint's deliveries, newest first, optionally in one state; one more than the page is
        read, so a last page says it is the last. Writes nothing."""
        start = {"pk": {"S": hook_pk(endpoint_id)}, "sk": {"S": delivery_sk(before)}} if before else None
        found: list[Delivery] = []
        for item in self.feed_models.delivery.query(
            hook_pk(endpoint_id),
            DeliveryItem.sk.startswith("DLV#"),
            filter_condition=(DeliveryItem.state == state) if state else None,
            scan_index_forward=False,
            last_evaluated_key=start,
            consistent_read=True,
        ):
            found.append(to_delivery(item))
            if len(found) > limit:
                return found[:limit], found[limit - 1].seq
        return found, None

    def due_deliveries(self, now: float, limit: int) -> list[tuple[str, int]]:
        """(endpoint, seq) of up to `limit` deliveries whose next attempt is due, or whose attempt's lease
        ran out, oldest first; the query reads on, page after page, until it has them."""
        due = self.feed_models.delivery.by_due.query(
            Queue.DELIVER.value, DeliveryItem.due_at <= now, limit=limit, page_size=min(limit, 1000)
        )
        return [(item.pk.removeprefix("HOOK#"), int(item.sk.removeprefix("DLV#"))) for item in due]

    def queued_deliveries(self, endpoint_id: str) -> list[Delivery]:
        """The endpoint's deliveries that wait for an attempt, read consistently."""
        return [
            to_delivery(item)
            for item in self.feed_models.delivery.query(
                hook_pk(endpoint_id),
                DeliveryItem.sk.startswith("DLV#"),
                filter_condition=DeliveryItem.state == "queued",
                consistent_read=True,
            )
        ]

    def _move(
        self,
        tx: Tx,
        d: Delivery,
        frm: DeliveryState,
        to: DeliveryState,
        extra: list[Any] | None = None,
        *,
        active: bool = False,
    ) -> None:
        """The endpoint's counts follow the delivery, in the same transaction: exact, by construction."""
        actions = [*(extra or [])]
        if frm != to:
            actions += [_count(frm, -1), _count(to, 1)]
        if not actions:
            return
        tx.update(
            "endpoint",
            self.feed_models.endpoint(caller_pk(d.caller), endpoint_sk(d.endpoint_id)),
            actions,
            # Counts move on the endpoint that exists (tombstones included), never on one conjured up.
            (EndpointItem.state == "active") if active else EndpointItem.pk.exists(),
        )

    def _delivery_item(self, d: Delivery) -> DeliveryItem:
        return self.feed_models.delivery(
            hook_pk(d.endpoint_id),
            delivery_sk(d.seq),
            event_id=d.event_id,
            type=d.type,
            caller=d.caller,
            book_id=d.book_id,
            body=json.dumps(d.body, separators=(",", ":")),
            state=d.state,
            attempt=d.attempt,
            budget=d.budget,
            redeliveries=d.redeliveries,
            attempts=_attempts_json(d.attempts),
            created_at=d.created_at,
            window_ends=d.window_ends,
            queue=Queue.DELIVER.value,
            due_at=d.due_at,
        )


def _queue_actions(to: DeliveryState, next_due: float | None, now: float, retention: int) -> list[Any]:
    if to == S.QUEUED:
        return [DeliveryItem.queue.set(Queue.DELIVER.value), DeliveryItem.due_at.set(next_due or now)]
    # Ended: out of the sweep's queue, and gone from the table 30 days on.
    return [DeliveryItem.queue.remove(), DeliveryItem.due_at.remove(), DeliveryItem.ttl.set(now + retention)]


def _attempts_json(attempts: Any) -> str:
    return json.dumps(
        [{"n": a.n, "at": a.at, "status": a.status, "error": a.error, "latency_ms": a.latency_ms,
          **({"redelivery": True} if a.redelivery else {})} for a in attempts],
        separators=(",", ":"),
    )  # fmt: skip


def to_delivery(item: DeliveryItem) -> Delivery:
    return Delivery(
        endpoint_id=item.pk.removeprefix("HOOK#"),
        seq=int(item.sk.removeprefix("DLV#")),
        event_id=item.event_id,
        type=item.type,
        caller=item.caller,
        book_id=item.book_id,
        body=json.loads(item.body),
        state=item.state,
        attempt=int(item.attempt or 0),
        budget=int(item.budget),
        redeliveries=int(item.redeliveries or 0),
        attempts=tuple(
            Attempt(a["n"], a["at"], a["status"], a["error"], a["latency_ms"], a.get("redelivery", False))
            for a in json.loads(item.attempts or "[]")
        ),
        lease_until=item.lease_until,
        created_at=item.created_at,
        window_ends=item.window_ends,
        due_at=item.due_at,
    )
