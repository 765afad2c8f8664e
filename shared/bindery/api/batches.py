"""The batches' routes."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response

from bindery.api.http import (
    BATCH_BODY_LIMIT,
    answer,
    caller,
    class_of,
    no_content,
    read_body,
    reads,
    services,
    writes,
)
from bindery.exports import RETRY_AFTER_PENDING


@writes.post("/batches")
def create_batch() -> Response:
    who = caller(writes)
    body = read_body(writes, BATCH_BODY_LIMIT, {"exports": object})
    key = writes.current_event.headers.get("idempotency-key")
    view, created = services(writes).batches.create_batch(who, class_of(writes), body["exports"], key)
    headers = {"Location": f"/batches/{view['id']}", "Retry-After": str(RETRY_AFTER_PENDING)}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return answer(202, view, headers)


@writes.delete("/batches/<batch_id>")
def cancel_batch(batch_id: str) -> Response:
    who = caller(writes)
    services(writes).batches.cancel_batch(who, batch_id)
    return no_content()


@reads.get("/batches")
def list_batches() -> Response:
    who = caller(reads)
    params = reads.current_event.query_string_parameters or {}
    return answer(200, services(reads).batches.list_batches(who, params.get("limit"), params.get("cursor")))


@reads.get("/batches/<batch_id>")
def get_batch(batch_id: str) -> Response:
    who = caller(reads)
    view = services(reads).batches.read_batch(who, batch_id)
    headers = {"Retry-After": str(RETRY_AFTER_PENDING)} if view["status"] in ("queued", "running") else None
    return answer(200, view, headers)
