"""The OpenAPI document's webhook endpoints, their deliveries and the events feed: each answer exactly as
`bindery.webhooks` builds it (its view functions), field for field, so a field added there and not here
fails schemathesis' response check."""

from __future__ import annotations

from typing import Any

from bindery import webhooks as hooks
from bindery.openapi.parts import ID, PAGE, TIME, exactly, operation, ref
from bindery.outbound import MAX_URL
from bindery.states import EVENT_TYPES, DeliveryState

EVENT_TYPE = {"type": "string", "enum": list(EVENT_TYPES)}
DELIVERY_STATE = {"type": "string", "enum": [s.value for s in DeliveryState]}
COUNTS = exactly(**{s.value: {"type": "integer", "minimum": 0} for s in DeliveryState}) | {
    "description": "how many of the endpoint's deliveries are in each state: exact, never a page's size"
}
SEQ = {"type": "string", "pattern": "^[0-9]{1,12}$"}
NULLABLE_TEXT = {"type": ["string", "null"]}
URL_REFUSED = "the URL is refused (`error.code` names why), or an event name is unknown"


def _webhook(*, secret: bool) -> dict[str, Any]:
    """An endpoint as its caller reads it; `secret` only in the answers that made it (create, rotate)."""
    shown = {"secret": {"type": "string", "pattern": "^whsec_", "description": "shown this once"}}
    return exactly(
        id=ID,
        url={"type": "string"},
        events={"type": "array", "items": EVENT_TYPE},
        description={"type": "string"},
        enabled={"type": "boolean"},
        disabled_at=TIME,
        disabled_reason={
            **NULLABLE_TEXT,
            "description": "gone (it answered 410), <n>_consecutive_failures, or disabled_by_caller",
        },
        consecutive_failures={"type": "integer", "minimum": 0},
        created_at=TIME,
        updated_at=TIME,
        secrets={
            "type": "array",
            "description": "the secrets signing now (during a rotation's overlap, two): never a key",
            "items": exactly(current={"type": "boolean"}, expires_at=TIME),
        },
        deliveries=COUNTS,
        **(shown if secret else {}),
    )


def _webhook_body(*, patch: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "url": {"type": "string", "maxLength": MAX_URL,
                "description": "https, no credentials, and a name that resolves to public addresses only"},
        "events": {"type": "array", "items": EVENT_TYPE, "minItems": 1},
        "description": {"type": "string", "maxLength": hooks.MAX_DESCRIPTION},
    }  # fmt: skip
    if patch:
        fields["enabled"] = {
            "type": "boolean",
            "description": "true enables it again, its failures forgotten",
        }
        return {"type": "object", "properties": fields, "minProperties": 1, "additionalProperties": False}
    return {
        "type": "object",
        "required": ["url", "events"],
        "properties": fields,
        "additionalProperties": False,
    }


ATTEMPT = exactly(
    n={"type": "integer"},
    at=TIME,
    status={"type": ["integer", "null"], "description": "the HTTP status, if it answered"},
    error={
        **NULLABLE_TEXT,
        "description": "timeout, deadline, connect_failed, tls_failed, address_refused, "
        "url_refused or no_answer_recorded",
    },
    latency_ms={"type": "integer"},
    redelivery={"type": "boolean"},
)
EVENT_DATA = {
    "type": "object",
    "description": "what happened: for an export's transition, these",
    "properties": {
        "export_id": ID,
        "book_id": ID,
        "format": {"type": "string"},
        "state": {"type": "string"},
        "attempt": {"type": "integer"},
        "failure_code": NULLABLE_TEXT,
    },
}

SCHEMAS: dict[str, Any] = {
    "CreateWebhook": _webhook_body(patch=False),
    "EditWebhook": _webhook_body(patch=True),
    "Webhook": _webhook(secret=False),
    "WebhookWithSecret": _webhook(secret=True),
    "WebhookPage": exactly(webhooks={"type": "array", "items": ref("Webhook")}, next_cursor=NULLABLE_TEXT),
    "Delivery": exactly(
        id=SEQ,
        event_id={"type": "string"},
        event_type=EVENT_TYPE,
        state=DELIVERY_STATE,
        created_at=TIME,
        next_attempt_at={**TIME, "description": "while queued; null otherwise"},
        attempts_allowed={
            "type": "integer",
            "description": "the highest attempt number it may reach: the schedule's 8, and one more for each "
            "of its first 3 attempts recorded no_answer_recorded; a redelivery sets it one past the last",
        },
        redeliveries={"type": "integer"},
        attempts={"type": "array", "items": ATTEMPT},
    ),
    "DeliveryPage": exactly(
        deliveries={"type": "array", "items": ref("Delivery")}, next_cursor=NULLABLE_TEXT, counts=COUNTS
    ),
    "Event": exactly(
        id={"type": "string", "description": "the event's id, the same as its webhooks' webhook-id"},
        type=EVENT_TYPE,
        created_at=TIME,
        data=EVENT_DATA,
        cursor={**SEQ, "description": "its place in the feed"},
    )
    | {"description": "the event exactly as its webhooks carry it (their body), and its place in the feed"},
    "EventPage": exactly(
        events={"type": "array", "items": ref("Event"), "maxItems": hooks.MAX_EVENTS_PAGE},
        head={**SEQ, "description": "the cursor of the feed's newest event when it was read"},
        next_cursor={**SEQ, "description": "pass it as `after` for the next page; it never walks backwards"},
    ),
}

ENDPOINT_ID = {"name": "endpointId", "in": "path", "required": True, "schema": {"type": "string"}}
DELIVERY_ID = {"name": "deliveryId", "in": "path", "required": True, "schema": {"type": "string"}}
STATE = {"name": "state", "in": "query", "required": False, "schema": DELIVERY_STATE}
AFTER = {
    "name": "after",
    "in": "query",
    "required": False,
    "description": "the next_cursor of the page before; left out, the feed from its beginning",
    "schema": SEQ,
}
EVENTS_LIMIT = {
    "name": "limit",
    "in": "query",
    "required": False,
    "schema": {"type": "integer", "minimum": 1, "maximum": hooks.MAX_EVENTS_PAGE},
}
NOT_YOURS = {404: "no such webhook endpoint, or not yours"}

OPERATIONS: dict[str, dict[str, Any]] = {
    "POST /webhooks": operation(
        "createWebhook", "Register an endpoint for the events named; the answer shows its secret, once", [],
        {201: ("registered; its secret is never shown again", "WebhookWithSecret")},
        (400, 409, 413, 422, 503), body="CreateWebhook",
        said={409: "you have as many endpoints as allowed (`error.limit`)", 422: URL_REFUSED}),
    "GET /webhooks": operation(
        "listWebhooks", "Your endpoints, oldest first", PAGE, {200: ("one page", "WebhookPage")}, (400, 503)),
    "GET /webhooks/{endpointId}": operation(
        "getWebhook", "An endpoint: enabled or since when not, and its deliveries' exact counts",
        [ENDPOINT_ID], {200: ("the endpoint", "Webhook")}, (404, 503), said=NOT_YOURS),
    "PATCH /webhooks/{endpointId}": operation(
        "editWebhook", "Change its URL, events or description, or enable it again", [ENDPOINT_ID],
        {200: ("the endpoint as changed", "Webhook")}, (400, 404, 413, 422, 503), body="EditWebhook",
        said={**NOT_YOURS, 422: URL_REFUSED}),
    "DELETE /webhooks/{endpointId}": operation(
        "deleteWebhook", "Delete an endpoint; its waiting deliveries end withdrawn", [ENDPOINT_ID],
        {204: ("deleted", None)}, (404, 503), said=NOT_YOURS),
    "POST /webhooks/{endpointId}/rotate-secret": operation(
        "rotateWebhookSecret", "A new secret, shown once; the one it replaces signs beside it for 24 h",
        [ENDPOINT_ID], {200: ("the endpoint, with its new secret", "WebhookWithSecret")}, (404, 409, 503),
        said={**NOT_YOURS, 409: "another rotation won meanwhile: read the endpoint and rotate again"}),
    "GET /webhooks/{endpointId}/deliveries": operation(
        "listDeliveries", "An endpoint's deliveries, newest first, each with its attempts",
        [ENDPOINT_ID, STATE, *PAGE], {200: ("one page, with the exact counts", "DeliveryPage")},
        (400, 404, 503), said=NOT_YOURS),
    "POST /webhooks/{endpointId}/deliveries/{deliveryId}/redeliver": operation(
        "redeliver", "Send an ended delivery again, as one more attempt of the same delivery",
        [ENDPOINT_ID, DELIVERY_ID], {202: ("queued: the webhook sweep sends it within a minute", "Delivery")},
        (400, 404, 409, 503),
        said={404: "no such endpoint or delivery, or not yours",
              409: "the delivery has not ended, was sent again too many times, or changed meanwhile"}),
    "GET /events": operation(
        "listEvents", "Your events in the order they happened, after a cursor, with the feed's head",
        [AFTER, EVENTS_LIMIT], {200: ("the events after the cursor", "EventPage")}, (400, 410, 503),
        said={400: "a limit out of range, or a cursor this API never gave out (past the head)",
              410: "the events after this cursor are no longer kept (30 days): read on from "
                   "`error.oldest_cursor`"}),
}  # fmt: skip
