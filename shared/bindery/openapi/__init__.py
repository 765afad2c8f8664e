"""The API's OpenAPI 3.1 document, built from the route table (`python -m bindery.openapi` prints it).

The resolvers in `bindery.api` are Powertools' without pydantic validation (it would triple cold start), so
the bodies and answers are described here, once, and a test holds this document, the resolvers' routes and
template.yaml's routes to the same set; another holds docs/openapi.json to what this prints. One module per
part of the API: `books` (books, assets, exports), `webhooks` (endpoints, deliveries, the events feed) and
`batches` (batches, and GET /me), over `parts`, what every operation shares.
"""

from __future__ import annotations

from typing import Any

from bindery.openapi import batches, books, parts, webhooks

# Route key (as template.yaml and API Gateway write it) -> operation.
OPERATIONS: dict[str, dict[str, Any]] = {**books.OPERATIONS, **webhooks.OPERATIONS, **batches.OPERATIONS}
SCHEMAS: dict[str, Any] = {**parts.SCHEMAS, **books.SCHEMAS, **webhooks.SCHEMAS, **batches.SCHEMAS}


def document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route_key, operation in OPERATIONS.items():
        method, path = route_key.split(" ", 1)
        paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Bindery",
            "version": "1",
            "description": "Turns a user's book into a downloadable file. Every route needs a bearer JWT.",
        },
        "servers": [{"url": "http://127.0.0.1:3000", "description": "make run"}],
        "security": [{"jwt": []}],
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"jwt": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
        },
    }
