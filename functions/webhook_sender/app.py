"""webhook_sender: one signed attempt of each due delivery the queue names. A failed record is reported
back to SQS alone; the claim by attempt number means a duplicate message sends nothing twice."""

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from bindery import wiring
from bindery.deliveries import Deliveries
from bindery.observability import logger, metrics
from bindery.sendqueue import parse_message

processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def _send(deliveries: Deliveries, record: SQSRecord) -> str:
    try:
        endpoint_id, seq = parse_message(record.body)
    except ValueError:
        logger.exception("dropping a message that names no delivery", extra={"message_id": record.message_id})
        return "dropped"
    return deliveries.send(endpoint_id, seq)


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, deliveries: Deliveries | None = None) -> dict[str, Any]:
    service = deliveries or wiring.default_webhooks()
    response = process_partial_response(
        event=event,
        record_handler=lambda record: _send(service, record),
        processor=processor,
        context=context,
    )
    return dict(response)
