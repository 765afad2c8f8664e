"""stale_sweep (scheduled): end the builds nobody is coming back for, and the batches they leave ended."""

from typing import Any

from bindery import wiring
from bindery.batches import BatchRequests
from bindery.observability import logger, metrics
from bindery.schedules import Deadline, Schedules


@logger.inject_lambda_context
@metrics.log_metrics
def handler(
    event: dict[str, Any],
    context: Any,
    *,
    schedules: Schedules | None = None,
    batches: BatchRequests | None = None,
) -> dict[str, Any]:
    if schedules is None or batches is None:
        schedules, batches = wiring.default_stale_sweep()
    # Two chores, one deadline: the stale exports get their share first, the batches what is left of theirs.
    deadline = Deadline(lambda: context.get_remaining_time_in_millis() / 1000)
    swept = schedules.fail_stale_exports(out_of_time=deadline.share(2))
    settled = batches.settle_batches(deadline.share(1))
    result = {"failed": swept.done, "refused": swept.refused, "errors": swept.failed, **settled}
    if any(result.values()):
        logger.info("stale sweep done", extra=result)
    return result
