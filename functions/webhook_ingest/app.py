"""webhook_ingest: each export event from the bus becomes an entry in its caller's feed and one delivery
per subscribed endpoint. A failed record is reported back to SQS alone; a replay repeats nothing."""

from typing import Any

from bindery import wiring
from bindery.deliveries import BadEvent, Deliveries
from bindery.observability import logger, metrics
from bindery.queues import process_batch


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, deliveries: Deliveries | None = None) -> dict[str, Any]:
    service = deliveries or wiring.default_webhooks()
    return process_batch(
        event,
        context,
        lambda record: service.ingest(record.body),
        poison=BadEvent,
        dropping="dropping a message that is not an event",
    )
