"""The one Logger and the one Metrics. Service name and namespace come from template.yaml's Globals
(POWERTOOLS_SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE); the defaults serve tests and the local stack."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics

logger = Logger(service=os.getenv("POWERTOOLS_SERVICE_NAME", "bindery"))
metrics = Metrics(namespace=os.getenv("POWERTOOLS_METRICS_NAMESPACE", "Bindery"))


def state_change(export_id: str, book_id: str, change: str, **fields: object) -> None:
    """One log line per state change, with the ids on it so a single export can be followed."""
    logger.info(change, extra={"export_id": export_id, "book_id": book_id, "change": change, **fields})
