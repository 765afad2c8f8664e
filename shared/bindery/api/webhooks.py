"""The webhook endpoints' routes, their deliveries' ledgers, and the events feed."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response

from bindery import errors
from bindery.api.http import SMALL_BODY_LIMIT, answer, caller, no_content, read_body, reads, services, writes


@writes.post("/webhooks")
def create_webhook() -> Response:
    who = caller(writes)
    body = read_body(
        writes,
        SMALL_BODY_LIMIT,
        {"url": object, "events": object, "description": object},
        optional=("description",),
    )
    made = services(writes).hooks.register(who, body)
    return answer(201, made, {"Location": f"/webhooks/{made['id']}"})


@writes.patch("/webhooks/<endpoint_id>")
def edit_webhook(endpoint_id: str) -> Response:
    who = caller(writes)
    fields: dict[str, type] = {"url": object, "events": object, "description": object, "enabled": object}
    body = read_body(writes, SMALL_BODY_LIMIT, fields, optional=tuple(fields))
    if not body:
        raise errors.BadRequest(f"send one or more of: {', '.join(fields)}", code="missing_field")
    return answer(200, services(writes).hooks.patch(who, endpoint_id, body))


@writes.delete("/webhooks/<endpoint_id>")
def delete_webhook(endpoint_id: str) -> Response:
    who = caller(writes)
    services(writes).hooks.delete(who, endpoint_id)
    return no_content()


@writes.post("/webhooks/<endpoint_id>/rotate-secret")
def rotate_webhook_secret(endpoint_id: str) -> Response:
    who = caller(writes)
    return answer(200, services(writes).hooks.rotate(who, endpoint_id))


@writes.post("/webhooks/<endpoint_id>/deliveries/<delivery_id>/redeliver")
def redeliver(endpoint_id: str, delivery_id: str) -> Response:
    who = caller(writes)
    return answer(202, services(writes).hooks.redeliver(who, endpoint_id, delivery_id))


@reads.get("/webhooks")
def list_webhooks() -> Response:
    who = caller(reads)
    params = reads.current_event.query_string_parameters or {}
    return answer(200, services(reads).hooks.list(who, params.get("limit"), params.get("cursor")))


@reads.get("/webhooks/<endpoint_id>")
def get_webhook(endpoint_id: str) -> Response:
    who = caller(reads)
    return answer(200, services(reads).hooks.get(who, endpoint_id))


@reads.get("/webhooks/<endpoint_id>/deliveries")
def list_deliveries(endpoint_id: str) -> Response:
    who = caller(reads)
    params = reads.current_event.query_string_parameters or {}
    page = services(reads).hooks.deliveries(
        who, endpoint_id, params.get("state"), params.get("limit"), params.get("cursor")
    )
    return answer(200, page)


@reads.get("/events")
def list_events() -> Response:
    who = caller(reads)
    params = reads.current_event.query_string_parameters or {}
    return answer(200, services(reads).hooks.events(who, params.get("after"), params.get("limit")))
