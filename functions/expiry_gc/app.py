"""expiry_gc (scheduled): expire lapsed links, then unlink the bytes of every ended export."""

from typing import Any

from bindery.exports import Exports, default_exports
from bindery.observability import logger, metrics


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, exports: Exports | None = None) -> dict[str, Any]:
    service = exports or default_exports()
    expired = service.expire_lapsed_links()
    unlinked = service.unlink_ended_artifacts()
    result = {"expired": expired.done, "unlinked": unlinked.done, "unlink_failures": unlinked.failed}
    if any(result.values()):
        logger.info("expiry gc done", extra=result)
    return result
