"""Counting AWS calls with botocore's event hooks: exact figures, fit for unit tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The operations that change nothing; every other call may write.
READ_ONLY = frozenset(
    {
        "GetItem",
        "Query",
        "Scan",
        "TransactGetItems",
        "BatchGetItem",
        "GetObject",
        "HeadObject",
        "ListObjectsV2",
        "ListMultipartUploads",
        "DescribeTable",
    }
)


class Calls:
    def __init__(self) -> None:
        self.made: list[tuple[str, str]] = []

    def __call__(self, model: Any, **_: Any) -> None:
        self.made.append((model.service_model.service_id.hyphenize(), model.name))

    def count(self, service: str | None = None) -> Counter[str]:
        return Counter(op for svc, op in self.made if service is None or svc == service)

    def writes(self) -> list[str]:
        return [op for _, op in self.made if op not in READ_ONLY]


@contextmanager
def recording(*clients: Any) -> Iterator[Calls]:
    calls = Calls()
    for client in clients:
        client.meta.events.register("before-call", calls)
    try:
        yield calls
    finally:
        for client in clients:
            client.meta.events.unregister("before-call", calls)
