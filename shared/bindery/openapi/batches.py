"""The OpenAPI document's batches and what a caller holds (GET /me)."""

from __future__ import annotations

from typing import Any

from bindery.openapi.parts import ID, PAGE, TIME, exactly, operation, ref

COUNT = {"type": "integer", "minimum": 0}
STATES = ["pending", "ready", "failed", "cancelled", "expired"]
BATCH_ID = {"name": "batchId", "in": "path", "required": True, "schema": ID}
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
}
_BATCH_FIELDS: dict[str, Any] = {
    "id": ID,
    "status": {"type": "string", "enum": ["queued", "running", "done", "partial", "failed", "cancelled"]},
    "targets_total": COUNT,
    "targets_done": COUNT,
    "ended": exactly(ready=COUNT, failed=COUNT, cancelled=COUNT),
    "bytes": COUNT,
    "created_at": TIME,
    "finished_at": TIME,
    # Set once, when a cancel ended the links of a batch that had ended (its status stays as it ended).
    "revoked_at": TIME,
}
NULLABLE_COUNT = {"type": ["integer", "null"], "minimum": 0}
NULLABLE_TEXT = {"type": ["string", "null"]}

SCHEMAS: dict[str, Any] = {
    "CreateBatch": {
        "type": "object",
        "required": ["exports"],
        "additionalProperties": False,
        "properties": {
            "exports": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["book_id", "format"],
                    "additionalProperties": False,
                    "properties": {
                        "book_id": ID,
                        "format": {"type": "string"},
                        "options": {"type": "object"},
                    },
                },
            }
        },
    },
    "Batch": exactly(
        **_BATCH_FIELDS,
        counts=exactly(**{s: COUNT for s in STATES}),
        targets={
            "type": "array",
            "items": exactly(
                export_id=ID,
                book_id=ID,
                format={"type": "string"},
                state={"type": "string", "enum": STATES},
                failure_code={"type": ["string", "null"]},
            ),
        },
        bundle={
            "oneOf": [
                {"type": "null"},
                exactly(
                    id=ID,
                    state={"type": "string", "enum": STATES},
                    size_bytes=NULLABLE_COUNT,
                    sha256=NULLABLE_TEXT,
                    expires_at=TIME,
                    failure_code=NULLABLE_TEXT,
                    download_url=NULLABLE_TEXT,
                    download_expires_at=TIME,
                ),
            ],
            "description": "the batch's one download (a zip of its ready files and a manifest), once it "
            "has ended with a target ready; null before that, or when none was ready",
        },
    ),
    "BatchSummary": exactly(**_BATCH_FIELDS),
    "BatchPage": exactly(
        batches={"type": "array", "items": ref("BatchSummary")}, next_cursor={"type": ["string", "null"]}
    ),
    "Me": exactly(
        caller={"type": "string"},
        **{"class": {"type": "string", "enum": ["standard", "fleet", "restricted"]}},
        limits=exactly(
            live_exports=COUNT,
            live_batches=COUNT,
            batch_targets=COUNT,
            storage_bytes=COUNT,
            pdf_manuscript_bytes=COUNT,
            live_exports_total=COUNT,
        ),
        live=exactly(exports=COUNT, batches=COUNT),
        storage=exactly(usage_bytes=COUNT, budget_bytes=COUNT, remaining_bytes=COUNT),
    ),
}

OPERATIONS: dict[str, dict[str, Any]] = {
    "POST /batches": operation(
        "createBatch", "Request many exports of your books as one job", [IDEMPOTENCY_KEY],
        {202: ("accepted; poll Location", "Batch")}, (400, 404, 413, 422, 429, 503, 507), body="CreateBatch",
        said={404: "a target names a book that does not exist or is not yours: nothing was written",
              422: "a target's format or options are not acceptable (`error.index` names it), or there are "
                   "more targets than your class allows (`too_many_targets`)",
              429: "you have as many batches in progress as your class allows (`too_many_live_batches`)"}),
    "GET /batches": operation(
        "listBatches", "Your batches, newest first", PAGE, {200: ("one page", "BatchPage")}, (400, 503)),
    "GET /batches/{batchId}": operation(
        "getBatch", "A batch: its status, its counts, and each target's state", [BATCH_ID],
        {200: ("the batch", "Batch")}, (404, 503), said={404: "no such batch, or not yours"}),
    "DELETE /batches/{batchId}": operation(
        "cancelBatch", "Cancel a batch: its pending targets are cancelled and its ready ones' links end",
        [BATCH_ID], {204: ("cancelled", None)}, (404, 503), said={404: "no such batch, or not yours"}),
    "GET /me": operation(
        "getMe", "Your class, what you hold now, and every cap you are held to", [],
        {200: ("you", "Me")}, (503,)),
}  # fmt: skip
