"""What every operation of the OpenAPI document shares: ids and times, the error bodies, the pages, and
the builder of one operation."""

from __future__ import annotations

from typing import Any

ID = {"type": "string", "pattern": "^[0-9a-z]{8,40}$"}
TIME = {"type": ["string", "null"], "format": "date-time"}
PAGE = [
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": 100},
    },
    {"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"}},
]

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                "additionalProperties": True,
            }
        },
    },
    "GatewayError": {"type": "object", "properties": {"message": {"type": "string"}}},
}


def ref(schema: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{schema}"}


def json_content(schema: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": ref(schema)}}}


def exactly(**properties: Any) -> dict[str, Any]:
    """An answer with exactly these fields, every one always present (null where there is nothing)."""
    return {
        "type": "object",
        "required": list(properties),
        "properties": properties,
        "additionalProperties": False,
    }


def refusals(*statuses: int, said: dict[int, str] | None = None) -> dict[str, Any]:
    """The error answers, each described in the shared words unless `said` words it for the operation."""
    described = {
        400: "the request names its problem in `error.code`", 401: "no valid bearer token",
        404: "no such book, export or asset, or not yours",
        409: "the book kept changing, or the asset is its cover",
        410: "no longer kept", 412: "If-Match named an older revision",
        413: "the body, the manuscript or the assets are too large",
        422: "understood, but not acceptable (see `error.code`)", 429: "too many exports in progress",
        503: "storage is busy, or the service holds its cap of live exports (`service_at_capacity`); retry "
             "after Retry-After",
        507: "your finished files are at your storage budget (`error.usage_bytes`, `error.budget_bytes`): "
             "cancel ready exports or wait for links to lapse",
    } | (said or {})  # fmt: skip
    answers = {str(s): {"description": described[s], **json_content("Error")} for s in statuses}
    answers["401"] = {"description": described[401], **json_content("GatewayError")}
    if "413" in answers:  # API Gateway itself refuses a payload over 10 MB, in its own shape
        answers["413"] = {
            "description": described[413],
            "content": {"application/json": {"schema": {"anyOf": [ref("Error"), ref("GatewayError")]}}},
        }
    return answers


def operation(
    operation_id: str,
    summary: str,
    parameters: list[dict[str, Any]],
    answers: dict[int, tuple[str, str | None]],
    errors: tuple[int, ...],
    body: str | None = None,
    said: dict[int, str] | None = None,
) -> dict[str, Any]:
    """One operation: `answers` maps each success status to (its description, its schema or None); `said`
    words its refusals where the shared words do not fit."""
    built: dict[str, Any] = {"operationId": operation_id, "summary": summary, "parameters": parameters}
    if body is not None:
        built["requestBody"] = {"required": True, **json_content(body)}
    responses = {
        str(status): {"description": text, **(json_content(schema) if schema else {})}
        for status, (text, schema) in answers.items()
    }
    built["responses"] = {**responses, **refusals(*errors, said=said)}
    return built
