"""webhook_ingest: each export event from the bus becomes an entry in its caller's feed and one delivery
per subscribed endpoint. A failed record is reported back to SQS alone; a replay repeats nothing."""

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from bindery import wiring
from bindery.deliveries import BadEvent, Deliveries
from bindery.observability import logger, metrics

processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def _ingest(deliveries: Deliveries, record: SQSRecord) -> int:
    try:
        return len(deliveries.ingest(record.body))
    except BadEvent:
        logger.exception("dropping a message that is not an event", extra={"message_id": record.message_id})
        return 0


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, deliveries: Deliveries | None = None) -> dict[str, Any]:
    service = deliveries or wiring.default_webhooks()
    response = process_partial_response(
        event=event,
        record_handler=lambda record: _ingest(service, record),
        processor=processor,
        context=context,
    )
    return dict(response)
