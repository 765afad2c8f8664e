"""Webhook endpoints and the events feed, as API callers see them.

An endpoint is a caller's URL, the event kinds it wants, and a signing secret shown once. Its URL is
checked when it is registered (https, no credentials, a public address) and again at every send, at the
address actually connected to (`bindery.outbound`). Its deliveries and their ledger are
`bindery.deliveries`'; this module reads them for the caller and redelivers one by hand.

An endpoint belongs to its caller: every read and write is keyed by the caller, so another caller's id is
not found, exactly as a missing one.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable
from typing import Any

from bindery import errors, outbound
from bindery.clock import Clock, iso
from bindery.config import Settings
from bindery.errors import not_found
from bindery.ids import new_id, valid_id
from bindery.paging import decode_cursor, encode_cursor, page_size
from bindery.states import DELIVERY_ENDED, EVENT_TYPES, DeliveryState
from bindery.storage import (
    MAX_REDELIVERIES,
    CursorAhead,
    CursorGone,
    Delivery,
    DeliveryRows,
    Endpoint,
    EndpointOverCap,
    EndpointRows,
    FeedEvent,
    FeedRows,
    Secret,
)

MAX_DESCRIPTION = 500
MAX_EVENTS_PAGE = 100
# The cursor of a feed nobody has read yet: everything after it.
FEED_START = 0


def new_secret() -> str:
    """Standard Webhooks' form: whsec_ and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def _cursor(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 12:
        raise errors.BadRequest(
            f"{name} must be a cursor this API gave out (a whole number)", code="invalid_cursor"
        )
    return int(value)


class Webhooks:
    """Register, read, change, rotate and delete endpoints; read their ledgers; redeliver; read the feed."""

    def __init__(
        self,
        settings: Settings,
        feed_rows: FeedRows,
        endpoint_rows: EndpointRows,
        delivery_rows: DeliveryRows,
        clock: Clock,
        resolve: Callable[[str, int], list[str]] | None = None,
        lookup_seconds: float = outbound.LOOKUP_SECONDS,
    ):
        self.settings, self.clock = settings, clock
        self.feed_rows, self.endpoint_rows, self.delivery_rows = feed_rows, endpoint_rows, delivery_rows
        self.resolve, self.lookup_seconds = resolve or outbound.system_resolve, lookup_seconds

    # ---- endpoints -------------------------------------------------------------------------------

    def register(self, caller: str, body: dict[str, Any]) -> dict[str, Any]:
        """A new endpoint; the answer carries its secret, the only time it is shown."""
        url, events, description = (
            self._url(body["url"]),
            self._events(body["events"]),
            body.get("description", ""),
        )
        self._description(description)
        now = self.clock()
        endpoint = Endpoint(
            id=new_id(now),
            caller=caller,
            url=url,
            events=events,
            description=description,
            secrets=(Secret(new_secret(), None),),
            enabled=True,
            disabled_at=None,
            disabled_reason=None,
            fails_in_row=0,
            created_at=now,
            updated_at=now,
            counts={s.value: 0 for s in DeliveryState},
        )
        made = self.endpoint_rows.register_endpoint(endpoint)
        if isinstance(made, EndpointOverCap):
            cap = self.settings.max_webhooks
            raise errors.Conflict(
                f"you have {made.count} webhook endpoints, the most allowed; delete one first",
                code="too_many_webhooks",
                limit=cap,
            )
        return {**self.view(made), "secret": made.secrets[0].key}

    def list(self, caller: str, limit: Any, cursor: str | None) -> dict[str, Any]:
        size = page_size(limit)
        # The same opaque cursor as every other list's: a bare id-shaped string is not one this API gave
        # out, and is refused rather than read as a place to start (it answered an empty page).
        after = decode_cursor(cursor) if cursor is not None else None
        page, last = self.endpoint_rows.list_endpoints(caller, size, after)
        return {
            "webhooks": [self.view(e) for e in page],
            "next_cursor": encode_cursor(last) if last else None,
        }

    def get(self, caller: str, endpoint_id: str) -> dict[str, Any]:
        return self.view(self._endpoint(caller, endpoint_id))

    def patch(self, caller: str, endpoint_id: str, body: dict[str, Any]) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        if "url" in body:
            changes["url"] = self._url(body["url"])
        if "events" in body:
            changes["events"] = self._events(body["events"])
        if "description" in body:
            changes["description"] = self._description(body["description"])
        if "enabled" in body:
            if not isinstance(body["enabled"], bool):
                raise errors.BadRequest("field enabled must be true or false", code="invalid_field")
            changes["enabled"] = body["enabled"]
        if not valid_id(endpoint_id):
            raise not_found("webhook endpoint")
        changed = self.endpoint_rows.patch_endpoint(caller, endpoint_id, changes, self.clock())
        if changed is None:
            raise not_found("webhook endpoint")
        return self.view(changed)

    def delete(self, caller: str, endpoint_id: str) -> None:
        """The endpoint stops at once; its waiting deliveries end withdrawn (the sweep ends them)."""
        if not (
            valid_id(endpoint_id) and self.endpoint_rows.delete_endpoint(caller, endpoint_id, self.clock())
        ):
            raise not_found("webhook endpoint")

    def rotate(self, caller: str, endpoint_id: str) -> dict[str, Any]:
        """A new current secret, shown once; the one it replaces signs beside it for the overlap."""
        endpoint = self._endpoint(caller, endpoint_id)
        key = new_secret()
        rotated = self.endpoint_rows.rotate_secret(endpoint, key, self.clock())
        if rotated is None:
            raise errors.Conflict(
                "another rotation of this endpoint's secret won meanwhile; read it and rotate again",
                code="rotation_conflict",
            )
        return {**self.view(rotated), "secret": key}

    # ---- the ledger ------------------------------------------------------------------------------

    def deliveries(
        self, caller: str, endpoint_id: str, state: str | None, limit: Any, cursor: str | None
    ) -> dict[str, Any]:
        size = page_size(limit)
        if state is not None and state not in {s.value for s in DeliveryState}:
            raise errors.BadRequest(
                f"state must be one of {', '.join(s.value for s in DeliveryState)}", code="invalid_state"
            )
        before = _cursor(cursor, "cursor")
        endpoint = self._endpoint(caller, endpoint_id)
        page, last = self.delivery_rows.list_deliveries(endpoint.id, state, size, before)
        return {
            "deliveries": [delivery_view(d) for d in page],
            "next_cursor": None if last is None else str(last),
            "counts": endpoint.counts,
        }

    def redeliver(self, caller: str, endpoint_id: str, delivery_id: str) -> dict[str, Any]:
        """Send an ended delivery once more, as a new attempt of the same delivery."""
        endpoint = self._endpoint(caller, endpoint_id)
        # An id of no shape a delivery has names no delivery: the 404 a missing one is (it is a path's id,
        # not a cursor, so invalid_cursor would name the wrong thing).
        well_formed = delivery_id.isascii() and delivery_id.isdigit() and len(delivery_id) <= 12
        found = self.delivery_rows.read_delivery(endpoint.id, int(delivery_id)) if well_formed else None
        if found is None or found.caller != caller:
            raise not_found("delivery")
        if not endpoint.enabled:
            raise errors.Conflict(
                "the endpoint is disabled: enable it (PATCH with enabled: true), then redeliver",
                code="endpoint_disabled",
            )
        if found.state not in DELIVERY_ENDED:
            raise errors.Conflict(
                f"the delivery is {found.state}: only an ended one is sent again", code="not_ended"
            )
        if found.redeliveries >= MAX_REDELIVERIES:
            raise errors.Conflict(
                f"the delivery was sent again {MAX_REDELIVERIES} times, the most allowed",
                code="redelivery_limit",
            )
        queued = self.delivery_rows.redeliver(found, self.clock())
        if queued is None:
            raise errors.Conflict("the delivery changed meanwhile; read it and try again", code="conflict")
        return delivery_view(queued)

    # ---- the events feed -------------------------------------------------------------------------

    def events(self, caller: str, after: str | None, limit: Any) -> dict[str, Any]:
        """The caller's events after the cursor, oldest first, with the feed's head. Writes nothing."""
        size = page_size(limit, MAX_EVENTS_PAGE)
        start = _cursor(after, "after")
        try:
            page = self.feed_rows.events_since(
                caller, FEED_START if start is None else start, size, self.clock()
            )
        except CursorAhead as exc:
            raise errors.BadRequest(
                f"cursor {exc.after} is past the feed's head ({exc.head}): no read of this feed gave it out",
                code="invalid_cursor",
                head=str(exc.head),  # a cursor, as the page's `head` and `next_cursor` are: a string
            ) from None
        except CursorGone as exc:
            raise errors.Gone(
                f"events after {exc.after} are no longer kept (30 days); read on from the oldest cursor kept",
                code="cursor_expired",
                oldest_cursor=str(exc.oldest),
            ) from None
        return {
            "events": [event_view(e) for e in page.events],
            "head": str(page.head),
            "next_cursor": str(page.next),
        }

    # ---- views and checks ------------------------------------------------------------------------

    def view(self, e: Endpoint) -> dict[str, Any]:
        now = self.clock()
        return {
            "id": e.id,
            "url": e.url,
            "events": sorted(e.events),
            "description": e.description,
            "enabled": e.enabled,
            "disabled_at": iso(e.disabled_at),
            "disabled_reason": e.disabled_reason,
            "consecutive_failures": e.fails_in_row,
            "created_at": iso(e.created_at),
            "updated_at": iso(e.updated_at),
            # Never a secret: how many sign, and until when the one being replaced does.
            "secrets": [
                {"current": s.not_after is None, "expires_at": iso(s.not_after)}
                for s in e.secrets
                if s.not_after is None or s.not_after > now
            ],
            "deliveries": dict(e.counts),
        }

    def _endpoint(self, caller: str, endpoint_id: str) -> Endpoint:
        found = self.endpoint_rows.read_endpoint(caller, endpoint_id) if valid_id(endpoint_id) else None
        if found is None:
            raise not_found("webhook endpoint")
        return found

    def _url(self, url: Any) -> str:
        if not isinstance(url, str):
            raise errors.BadRequest("field url must be a string", code="invalid_field")
        try:
            return outbound.check_url(
                url,
                local_http=self.settings.webhook_local,
                resolve=self.resolve,
                lookup_seconds=self.lookup_seconds,
            )
        except outbound.UrlRefused as exc:
            raise errors.Unprocessable(str(exc), code=exc.code) from None

    def _events(self, events: Any) -> frozenset[str]:
        if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
            raise errors.BadRequest(
                "field events must be a non-empty list of event names", code="invalid_field"
            )
        unknown = sorted(set(events) - set(EVENT_TYPES))
        if unknown:
            raise errors.Unprocessable(
                f"unknown event name(s): {', '.join(e[:60] for e in unknown[:5])}; "
                f"known: {', '.join(EVENT_TYPES)}",
                code="unknown_event",
                known=list(EVENT_TYPES),
            )
        return frozenset(events)

    def _description(self, description: Any) -> str:
        if not isinstance(description, str):
            raise errors.BadRequest("field description must be a string", code="invalid_field")
        if len(description) > MAX_DESCRIPTION:
            raise errors.Unprocessable(
                f"description may be at most {MAX_DESCRIPTION} characters", code="description_too_long"
            )
        return description


def delivery_view(d: Delivery) -> dict[str, Any]:
    return {
        "id": str(d.seq),
        "event_id": d.event_id,
        "event_type": d.type,
        "state": d.state,
        "created_at": iso(d.created_at),
        "next_attempt_at": iso(d.due_at) if d.state == DeliveryState.QUEUED else None,
        "attempts_allowed": d.budget,
        "redeliveries": d.redeliveries,
        "attempts": [
            {
                "n": a.n,
                "at": iso(a.at),
                "status": a.status,
                "error": a.error,
                "latency_ms": a.latency_ms,
                "redelivery": a.redelivery,
            }
            for a in d.attempts
        ],
    }


def event_view(e: FeedEvent) -> dict[str, Any]:
    # The event as the webhooks carry it, with its place in the feed.
    return {**e.body, "cursor": str(e.seq)}
