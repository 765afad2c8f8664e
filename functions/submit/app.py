"""submit: a caller's writes. POST /books, POST /books/{bookId}/exports, DELETE .../exports/{exportId}."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths

from bindery.api import writes
from bindery.exports import Exports, default_exports
from bindery.observability import logger, metrics


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, exports: Exports | None = None) -> dict[str, Any]:
    writes.append_context(exports=exports or default_exports())
    return writes.resolve(event, context)
