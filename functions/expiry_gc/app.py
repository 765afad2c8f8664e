"""expiry_gc (scheduled): expire lapsed links, end a deleted book's exports, unlink the bytes of every
ended export, and retire superseded revisions' chapters."""

from typing import Any

from bindery.exports import Exports, default_exports
from bindery.observability import logger, metrics


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any, *, exports: Exports | None = None) -> dict[str, Any]:
    service = exports or default_exports()
    expired = service.expire_lapsed_links()
    purged = service.books.purge_deleted_books()
    unlinked = service.unlink_ended_artifacts()
    retired = service.books.retire_cuts()
    result = {
        "expired": expired.done,
        "unlinked": unlinked.done,
        "unlink_failures": unlinked.failed,
        "books_purged": purged.done,
        "cuts_retired": retired.done,
        "chore_failures": purged.failed + retired.failed,
    }
    if any(result.values()):
        logger.info("expiry gc done", extra=result)
    return result
