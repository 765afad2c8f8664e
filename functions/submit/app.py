"""submit: a caller's writes. POST /books, POST /books/{bookId}/exports, DELETE .../exports/{exportId}."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths

from bindery import wiring
from bindery.api import writes
from bindery.api.http import ApiServices
from bindery.observability import logger, metrics


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, services: ApiServices | None = None) -> dict[str, Any]:
    writes.append_context(services=services or wiring.default_api())
    return writes.resolve(event, context)
