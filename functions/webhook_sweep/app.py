"""webhook_sweep (scheduled): send on the deliveries that are due (retries, lapsed leases), and withdraw
the waiting deliveries of deleted endpoints."""

from typing import Any

from bindery import wiring
from bindery.deliveries import Deliveries
from bindery.observability import logger, metrics


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, deliveries: Deliveries | None = None) -> dict[str, Any]:
    swept = (deliveries or wiring.default_webhooks()).sweep(
        time_left=lambda: context.get_remaining_time_in_millis() / 1000
    )
    if any(swept.values()):
        logger.info("webhook sweep done", extra=swept)
    return swept
