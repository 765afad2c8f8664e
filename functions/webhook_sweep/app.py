"""webhook_sweep (scheduled): send on the deliveries that are due (retries, lapsed leases), and withdraw
the waiting deliveries of deleted endpoints."""

from typing import Any

from bindery.exports import Exports, default_exports
from bindery.observability import logger, metrics


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, exports: Exports | None = None) -> dict[str, Any]:
    swept = (exports or default_exports()).deliveries.sweep(
        time_left=lambda: context.get_remaining_time_in_millis() / 1000
    )
    if any(swept.values()):
        logger.info("webhook sweep done", extra=swept)
    return swept
