"""webhook_sender: one signed attempt of each due delivery the queue names. A failed record is reported
back to SQS alone; the claim by attempt number means a duplicate message sends nothing twice."""

from typing import Any

from bindery import wiring
from bindery.deliveries import Deliveries
from bindery.observability import logger, metrics
from bindery.queues import process_batch
from bindery.sendqueue import BadKey, parse_message


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, deliveries: Deliveries | None = None) -> dict[str, Any]:
    service = deliveries or wiring.default_webhooks()
    return process_batch(
        event,
        context,
        lambda record: service.send(*parse_message(record.body)),
        poison=BadKey,
        dropping="dropping a message that names no delivery",
    )
