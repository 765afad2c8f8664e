"""expiry_gc (scheduled): expire lapsed links, end a deleted book's exports, unlink the bytes of every
ended export, retire superseded revisions' chapters, reconcile storage with the table, and record the run."""

from typing import Any

from bindery import wiring
from bindery.observability import logger, metrics
from bindery.schedules import Schedules


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, schedules: Schedules | None = None) -> dict[str, Any]:
    # The run shares the invocation's time among its chores and keeps a margin for its audit row.
    return (schedules or wiring.default_expiry_gc()).collect_garbage(
        time_left=lambda: context.get_remaining_time_in_millis() / 1000
    )
