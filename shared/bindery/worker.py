"""What the build queue carries, and how one message becomes one build.

The message is the table stream's INSERT record of the export row, forwarded by the EventBridge Pipe: the
export row IS the job, so there is no second write that could be lost between accepting and enqueueing.
"""

from __future__ import annotations

import json

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from bindery.builds import Builds, RetryLater
from bindery.observability import logger
from bindery.states import BuildOutcome


class BadMessage(ValueError):
    """A message that names no export: poison, logged and dropped, as redelivering it cannot help."""


def export_key(body: str) -> tuple[str, str]:
    """(book_id, export_id) from a stream record: Keys.pk is BOOK#<book>, Keys.sk is EXPORT#<export>."""
    try:
        keys = json.loads(body)["dynamodb"]["Keys"]
        pk, sk = keys["pk"]["S"], keys["sk"]["S"]
    except (ValueError, KeyError, TypeError) as exc:
        raise BadMessage(f"not a stream record of an export: {exc}") from None
    if not (pk.startswith("BOOK#") and sk.startswith("EXPORT#")):
        raise BadMessage(f"not an export's key: {pk} {sk}")
    return pk.removeprefix("BOOK#"), sk.removeprefix("EXPORT#")


def build_from_record(builds: Builds, record: SQSRecord) -> BuildOutcome:
    """What came of the build the record names. A record that names no export raises `BadMessage`, which the
    handler drops (`bindery.queues`)."""
    book_id, export_id = export_key(record.body)
    logger.append_keys(export_id=export_id, book_id=book_id)
    try:
        outcome = builds.build(book_id, export_id)
    except RetryLater as exc:
        # Raising marks this record failed, so SQS redelivers it after its visibility timeout.
        logger.warning("build will be retried", extra={"reason": str(exc)})
        raise
    finally:
        logger.remove_keys(["export_id", "book_id"])
    return outcome
