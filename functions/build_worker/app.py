"""build_worker: builds each export the queue hands it. A failed record is reported back to SQS alone,
so the rest of the batch is not redelivered; a message that names no export is dropped."""

from typing import Any

from bindery import wiring
from bindery.builds import Builds
from bindery.observability import logger, metrics
from bindery.queues import process_batch
from bindery.worker import BadMessage, build_from_record


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, builds: Builds | None = None) -> dict[str, Any]:
    service = builds or wiring.default_build_worker()
    return process_batch(
        event,
        context,
        lambda record: build_from_record(service, record),
        poison=BadMessage,
        dropping="dropping a message that names no export",
    )
