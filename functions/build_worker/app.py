"""build_worker: builds each export the queue hands it. A failed record is reported back to SQS alone,
so the rest of the batch is not redelivered."""

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from bindery import wiring
from bindery.builds import Builds
from bindery.observability import logger, metrics
from bindery.worker import build_from_record

# A whole batch that failed is reported record by record too, not raised: SQS then redelivers exactly those.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, builds: Builds | None = None) -> dict[str, Any]:
    service = builds or wiring.default_build_worker()
    response = process_partial_response(
        event=event,
        record_handler=lambda record: build_from_record(service, record),
        processor=processor,
        context=context,
    )
    return dict(response)
