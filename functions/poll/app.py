"""poll: a caller's reads. GET /books/{bookId}, GET .../exports, GET .../exports/{exportId}. Never writes."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths

from bindery import wiring
from bindery.api import reads
from bindery.api.http import ApiServices
from bindery.observability import logger


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def handler(event: dict[str, Any], context: Any, *, services: ApiServices | None = None) -> dict[str, Any]:
    reads.append_context(services=services or wiring.default_api())
    return reads.resolve(event, context)
