"""An SQS batch as each queue's handler takes it (the build queue, the webhook event and send queues).

Each record is handled on its own. One whose handling raises is reported back to SQS alone (Lambda's
partial batch response), so SQS redelivers exactly that one after its visibility timeout and the rest of
the batch is not handled twice. A poison message, one that no redelivery can help (it names no export,
is no event of ours, is no delivery key), is logged and dropped instead: reported as handled, so SQS
deletes it rather than redelivering it until it reaches the dead-letter queue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from bindery.observability import logger

# A whole batch that failed is reported record by record too, not raised: SQS then redelivers exactly those.
_processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def process_batch(
    event: dict[str, Any],
    context: Any,
    handle: Callable[[SQSRecord], object],
    *,
    poison: type[Exception],
    dropping: str,
) -> dict[str, Any]:
    """Lambda's partial batch response for `event`: `handle` called on each record, a record that raises
    `poison` logged with `dropping` and counted as handled, any other that raises reported as failed."""

    def handle_or_drop(record: SQSRecord) -> object:
        try:
            return handle(record)
        except poison:
            logger.exception(dropping, extra={"message_id": record.message_id})
            return None

    response = process_partial_response(
        event=event, record_handler=handle_or_drop, processor=_processor, context=context
    )
    return dict(response)
