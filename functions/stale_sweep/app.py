"""stale_sweep (scheduled): end the builds nobody is coming back for, and the batches they leave ended."""

from typing import Any

from bindery.exports import Exports, default_exports
from bindery.observability import logger, metrics
from bindery.schedules import Deadline


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, exports: Exports | None = None) -> dict[str, Any]:
    exports = exports or default_exports()
    # Two chores, one deadline: the stale exports get their share first, the batches what is left of theirs.
    deadline = Deadline(lambda: context.get_remaining_time_in_millis() / 1000)
    swept = exports.fail_stale_exports(out_of_time=deadline.share(2))
    batches = exports.settle_batches(deadline.share(1))
    result = {"failed": swept.done, "refused": swept.refused, "errors": swept.failed, **batches}
    if any(result.values()):
        logger.info("stale sweep done", extra=result)
    return result
