"""Deliveries that wait for the event: how an export's terminal transition becomes a feed entry and one
signed delivery per subscribed endpoint, and how each delivery is attempted until it is acked, refused,
or out of time.

    bus --rule--> WebhookEventsQueue --> ingest: append to the caller's feed, one delivery per endpoint
    WebhookSendQueue --> send: claim the next attempt, POST it signed, record the verdict
    every minute --> sweep: re-send what is due (retries, lapsed leases), withdraw a deleted endpoint's

Every step is keyed, so a replayed message repeats nothing: the feed appends an event id once, a delivery's
key is (endpoint, event), and an attempt is claimed by number. The retry schedule is in the table (each
delivery's `due_at`, on the `by_due` index), not in SQS delays, which stop at 15 minutes.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from standardwebhooks.webhooks import Webhook

from bindery import outbound
from bindery.clock import Clock, iso
from bindery.config import Settings
from bindery.observability import logger, metrics
from bindery.states import BATCH_EVENT_TYPES, EVENT_TYPES, NO_ANSWER_RECORDED, DeliveryState
from bindery.storage import Attempt, BookRows, Created, Delivery, DeliveryRows, EndpointRows, FeedRows

S = DeliveryState
# 4xx answers that say "not now" rather than "never": retried like a 5xx.
RETRIED_4XX = frozenset({408, 409, 425, 429})
JITTER = 0.2
# A disabled endpoint's queued deliveries are looked at again this often, until their window ends.
DISABLED_RECHECK_SECONDS = 600
# Seconds of its invocation the sweep keeps for itself: it stops starting work this close to its timeout.
SWEEP_MARGIN_SECONDS = 10.0
SWEEP_ROUNDS = 50  # 5,000 due deliveries a minute at the default batch: keys are cheap, sends are not here
# The last attempt is moved up to this long before the window ends rather than dropped when the jitter
# would push it past the window: the budget's 8 attempts all happen.
LAST_CALL_SECONDS = 300
# An attempt whose lease ran out with no answer recorded may never have left: its claim was applied and
# every answer to it lost, so its sender never POSTed (or the sender died, before the POST or after it).
# The receiver had no say in it, so it spends none of the budget: the claim that takes it over gives its
# place back. Only this many a delivery are given back, so that a sender that always dies, or a table
# whose answers are always lost, cannot claim without end: any lapse after these counts as an attempt.
FORGIVEN_LAPSES = 3


def _lapses(d: Delivery) -> int:
    return sum(a.error == NO_ANSWER_RECORDED for a in d.attempts)


class Poster(Protocol):
    def __call__(
        self, url: str, body: bytes, headers: dict[str, str], *, local_http: bool
    ) -> outbound.Sent: ...


class KeyQueue(Protocol):
    def send(self, keys: list[tuple[str, int]]) -> None: ...


@dataclass(frozen=True)
class Incoming:
    """An event as the bus delivers it: its id (stable across redeliveries), kind, caller, time, body."""

    id: str
    type: str
    caller: str
    time: float
    book_id: str | None
    body: dict[str, Any]


class BadEvent(ValueError):
    """A message that is not one of our events: logged and dropped, since redelivering it cannot help."""


def parse_event(message: str) -> Incoming:
    try:
        envelope = json.loads(message)
        detail, kind = envelope["detail"], envelope["detail-type"]
        event_id, caller = detail["id"], detail["owner"]
        when = datetime.fromisoformat(envelope["time"].replace("Z", "+00:00")).timestamp()
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadEvent(f"not an event of ours: {exc!r}") from None
    if kind not in EVENT_TYPES or not isinstance(event_id, str) or not isinstance(caller, str) or not caller:
        raise BadEvent(f"not an event of ours: {kind!r}")
    # One input template writes both kinds of row (the pipe writes a missing attribute as "", a number as
    # a string): each kind keeps its own fields, typed.
    try:
        if kind in BATCH_EVENT_TYPES:
            # Named by the kind, not the state: a revoked batch's state is still the one it ended with.
            event_id = f"{detail['batch_id']}:{kind.removeprefix('bindery.batch.')}"
            data: dict[str, Any] = {
                "batch_id": detail["batch_id"],
                "status": detail["state"],
                "targets_total": int(detail["targets_total"]),
                "targets_done": int(detail["targets_done"]),
            }
        else:
            data = {k: detail[k] for k in ("export_id", "book_id", "format", "state")}
            data["attempt"] = int(detail["attempt"])
            data["failure_code"] = detail.get("failure_code") or None
            data["batch_id"] = detail.get("batch_id") or None
    except (KeyError, TypeError, ValueError) as exc:
        raise BadEvent(f"not an event of ours: {exc!r}") from None
    # The event exactly as the feed shows it and every webhook carries it.
    body = {"id": event_id, "type": kind, "created_at": iso(when), "data": data}
    return Incoming(event_id, kind, caller, when, data.get("book_id"), body)


def verdict(sent: outbound.Sent) -> DeliveryState:
    """What an attempt's answer means: acked, rejected for good, or worth another attempt. Only a reply that
    came whole (up to the 64 KiB read) within the deadline is an answer."""
    if sent.error is not None:
        # Cut short (the deadline, a reset, a read timeout): a status that came before the cut is not the
        # receiver's verdict, so a 200 or a 410 cut by the deadline is retried like a timeout.
        return S.QUEUED
    if sent.status is not None and 200 <= sent.status < 300:
        return S.ACKED
    if sent.status is not None and 400 <= sent.status < 500 and sent.status not in RETRIED_4XX:
        return S.REJECTED
    return S.QUEUED  # a 5xx, a 3xx (never followed), a timeout, a refused address: try again later


class Deliveries:
    """Ingest, send and sweep: the three functions of the delivery path."""

    def __init__(
        self,
        settings: Settings,
        book_rows: BookRows,
        feed_rows: FeedRows,
        endpoint_rows: EndpointRows,
        delivery_rows: DeliveryRows,
        clock: Clock,
        queue: KeyQueue,
        post: Poster | None = None,
        jitter: Callable[[], float] = random.random,
    ):
        self.settings, self.clock, self.queue = settings, clock, queue
        self.book_rows, self.feed_rows = book_rows, feed_rows
        self.endpoint_rows, self.delivery_rows = endpoint_rows, delivery_rows
        self.post: Poster = post or outbound.post
        self.jitter = jitter

    # ---- ingest ----------------------------------------------------------------------------------

    def ingest(self, message: str) -> list[tuple[str, int]]:
        """Append the event to its caller's feed and make its deliveries; returns the keys sent on."""
        event = parse_event(message)
        now = self.clock()
        # Recorded at the time it happened, so a redriven event keeps its place in time.
        appended = self.feed_rows.append_event(
            event.caller, event.id, event.type, event.body, event.time, now
        )
        keys = []
        for endpoint in self.endpoint_rows.endpoints_of(event.caller):
            if event.type not in endpoint.events or not endpoint.enabled:
                continue  # the write would refuse it too; this saves the write
            delivery = Delivery(
                endpoint_id=endpoint.id,
                seq=appended.seq,
                event_id=event.id,
                type=event.type,
                caller=event.caller,
                book_id=event.book_id,
                body=event.body,
                state=S.QUEUED.value,
                attempt=0,
                budget=len(self.settings.webhook_delays),
                redeliveries=0,
                attempts=(),
                lease_until=None,
                created_at=now,
                window_ends=now + self.settings.webhook_window_seconds,
                due_at=now,
            )
            made = self.delivery_rows.create_delivery(delivery, event.time)
            if made == Created.CREATED:
                metrics.add_metric(name="WebhookDeliveriesCreated", unit="Count", value=1)
            if made != Created.NOT_ELIGIBLE:
                keys.append((endpoint.id, appended.seq))
        # Should this send fail, the deliveries are due now: the sweep sends them within a minute.
        if keys:
            self.queue.send(keys)
        return keys

    # ---- send ------------------------------------------------------------------------------------

    def send(self, endpoint_id: str, seq: int) -> str:
        """One attempt of one delivery, if one is due: what it came to, for the log."""
        now = self.clock()
        d = self.delivery_rows.read_delivery(endpoint_id, seq)
        if d is None:
            return "gone"
        caller = d.caller
        if d.state not in (S.QUEUED, S.IN_FLIGHT):
            return f"ended:{d.state}"
        if d.state == S.IN_FLIGHT and (d.lease_until or 0) > now:
            return "in_flight"  # another sender holds it; the sweep comes back when its lease runs out
        if d.state == S.QUEUED and (d.due_at or 0) > now:
            return "not_due"  # a duplicate or early message: its attempt waits for its time
        endpoint = self.endpoint_rows.read_endpoint(caller, endpoint_id)
        if endpoint is None or (d.book_id is not None and self.book_rows.read_book(d.book_id) is None):
            ended = self.delivery_rows.end_waiting(d, S.WITHDRAWN, now)
            return "withdrawn" if ended else "refused"
        # An in_flight delivery here has a lapsed lease: taking it over gives its attempt back, a few times.
        given_back = d.state == S.IN_FLIGHT and _lapses(d) < FORGIVEN_LAPSES
        budget = d.budget + given_back
        if d.attempt >= budget or now >= d.window_ends:
            ended = self.delivery_rows.end_waiting(d, S.EXPIRED, now)
            if ended:
                metrics.add_metric(name="WebhookDeliveriesExpired", unit="Count", value=1)
            return "expired" if ended else "refused"
        if not endpoint.enabled:
            self.delivery_rows.defer_delivery(d, min(d.window_ends, now + DISABLED_RECHECK_SECONDS), now)
            return "deferred:disabled"
        token = uuid.uuid4().hex
        claimed = self.delivery_rows.claim_delivery(d, token, now, budget)
        if claimed is None:
            return "claim_refused"
        body = json.dumps(claimed.body, separators=(",", ":"))
        sent = self.post(
            endpoint.url,
            body.encode(),
            self._signed(endpoint.secrets, claimed.event_id, body, now),
            local_http=self.settings.webhook_local,
        )
        return self._record(claimed, token, sent)

    def _signed(self, secrets: Any, event_id: str, body: str, now: float) -> dict[str, str]:
        """Standard Webhooks' headers: the event's id (the same on every attempt), the time, and one v1
        signature per secret still signing, so a receiver holding either secret of a rotation accepts."""
        at = datetime.fromtimestamp(int(now), UTC)
        live = [s for s in secrets if s.not_after is None or s.not_after > now]
        signatures = " ".join(Webhook(s.key).sign(event_id, at, body) for s in live)
        return {"webhook-id": event_id, "webhook-timestamp": str(int(now)), "webhook-signature": signatures}

    def _record(self, d: Delivery, token: str, sent: outbound.Sent) -> str:
        now = self.clock()
        to = verdict(sent)
        next_due = None
        if to == S.QUEUED:
            delays = self.settings.webhook_delays
            counted = d.attempt - min(_lapses(d), FORGIVEN_LAPSES)  # the schedule's place: lapses given back
            if d.attempt >= d.budget or counted >= len(delays):
                to = S.EXPIRED
            else:
                wait = delays[counted] * (1 - JITTER + 2 * JITTER * self.jitter())
                next_due = min(now + wait, d.window_ends - LAST_CALL_SECONDS)
                if next_due <= now:
                    to = S.EXPIRED
        latency = sent.latency_ms
        redelivery = d.redeliveries > 0 and d.attempt == d.budget
        attempt = Attempt(d.attempt, now - latency / 1000, sent.status, sent.error, latency, redelivery)
        if not self.delivery_rows.record_attempt(d, token, attempt, to, next_due, now):
            return "record_refused"
        if to != S.ACKED:
            # 410 Gone: the receiver says the endpoint is no more. Otherwise, a long enough run of failures.
            gone = to == S.REJECTED and sent.status == 410
            self.endpoint_rows.disable_if_failing(
                d.caller, d.endpoint_id, self.settings.webhook_disable_after, "gone" if gone else None, now
            )
        if to == S.EXPIRED:
            metrics.add_metric(name="WebhookDeliveriesExpired", unit="Count", value=1)
        logger.info(
            "webhook attempt",
            extra={"endpoint": d.endpoint_id, "seq": d.seq, "attempt": d.attempt, "status": sent.status,
                   "error": sent.error, "latency_ms": latency, "state": to.value},
        )  # fmt: skip
        return to.value

    # ---- sweep -----------------------------------------------------------------------------------

    def sweep(self, limit: int | None = None, time_left: Callable[[], float] | None = None) -> dict[str, int]:
        """Send on what is due, and withdraw the waiting deliveries of deleted endpoints. With `time_left`
        (seconds left in the invocation), it stops withdrawing SWEEP_MARGIN_SECONDS before the end: what
        is left waits in its queue for the next minute's run."""
        now = self.clock()
        batch = limit or self.settings.sweep_batch
        # Every due row, up to SWEEP_ROUNDS batches a run: the sender, not the sweep, moves them on.
        keys = self.delivery_rows.due_deliveries(now, batch * SWEEP_ROUNDS)
        if keys:
            self.queue.send(keys)
        withdrawn = 0
        for caller, endpoint_id in self.endpoint_rows.endpoints_to_withdraw(now, batch):
            if time_left is not None and time_left() < SWEEP_MARGIN_SECONDS:
                break
            for d in self.delivery_rows.queued_deliveries(endpoint_id):
                withdrawn += self.delivery_rows.end_waiting(d, S.WITHDRAWN, now)
            self.endpoint_rows.finish_withdraw(caller, endpoint_id, now)
        return {"resent": len(keys), "withdrawn": withdrawn}
