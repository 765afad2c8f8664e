"""The OpenAPI document, the resolvers and template.yaml describe the same routes, and docs/openapi.json is
what the code prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bindery.api import reads, writes
from bindery.openapi import OPERATIONS, document
from bindery_local.template import routes

ROOT = Path(__file__).resolve().parents[2]


def _resolver_routes() -> set[str]:
    found = set()
    for resolver in (writes, reads):
        for route in resolver._static_routes + resolver._dynamic_routes:
            path = re.sub(r"<(\w+)>", lambda m: "{" + _camel(m.group(1)) + "}", route.path)
            path = path.replace("/.+", "/{name+}")  # the greedy route, as API Gateway writes it
            found.add(f"{route.method} {path}")
    return found


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_the_document_the_resolvers_and_the_template_name_the_same_routes() -> None:
    template = {route.route_key for route in routes()}
    assert set(OPERATIONS) == template == _resolver_routes()


def test_docs_openapi_json_is_what_the_code_prints() -> None:
    checked_in = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert checked_in == document(), "run: python -m bindery.openapi > docs/openapi.json"


def test_every_operation_documents_its_refusals() -> None:
    for key, operation in OPERATIONS.items():
        assert "401" in operation["responses"], key
        assert "404" in operation["responses"] or key == "POST /books", key
