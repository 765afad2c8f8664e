"""What an export's lifecycle asks of AWS, counted from its calls: the cost figures' inputs.

DynamoDB's units are the ones DynamoDB Local reports for each call (every call is sent with
`ReturnConsumedCapacity=INDEXES`): item sizes, transactions' double price and the by_due index's writes all
come from the server, not from a table of constants. S3's requests are counted by price class.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

DYNAMODB_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
DYNAMODB_METERED = DYNAMODB_READS | {
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
}
# S3 bills PUT, COPY, POST and LIST requests at one price, GET and every other request at a tenth of it, and
# DELETE and the abort of an upload not at all.
S3_PUT_CLASS = frozenset(
    {
        "PutObject",
        "CopyObject",
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "ListObjectsV2",
        "ListMultipartUploads",
    }
)
S3_FREE = frozenset({"DeleteObject", "DeleteObjects", "AbortMultipartUpload"})


@dataclass
class Phase:
    calls: int = 0
    wru: float = 0.0  # the table's write units
    index_wru: float = 0.0  # the by_due index's
    rru: float = 0.0
    s3_put_class: int = 0
    s3_get_class: int = 0

    def __truediv__(self, n: int) -> Phase:
        return Phase(
            self.calls / n,  # type: ignore[arg-type]
            self.wru / n,
            self.index_wru / n,
            self.rru / n,
            self.s3_put_class / n,  # type: ignore[arg-type]
            self.s3_get_class / n,  # type: ignore[arg-type]
        )


class Ledger:
    """Hooks on a service's DynamoDB and S3 clients that book each call to the phase that is current."""

    def __init__(self, dynamodb: Any, s3: Any):
        self.phases: dict[str, Phase] = defaultdict(Phase)
        self._current = "unbooked"
        self._hooks = [
            (dynamodb, "before-parameter-build.dynamodb", self._ask_for_capacity),
            (dynamodb, "after-call.dynamodb", self._book_capacity),
            (s3, "before-call.s3", self._book_request),
        ]

    @contextmanager
    def phase(self, name: str) -> Iterator[Phase]:
        previous, self._current = self._current, name
        try:
            yield self.phases[name]
        finally:
            self._current = previous

    def __enter__(self) -> Ledger:
        for client, event, hook in self._hooks:
            client.meta.events.register(event, hook)
        return self

    def __exit__(self, *_: object) -> None:
        for client, event, hook in self._hooks:
            client.meta.events.unregister(event, hook)

    def _ask_for_capacity(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in DYNAMODB_METERED:
            params["ReturnConsumedCapacity"] = "INDEXES"

    def _book_capacity(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        phase = self.phases[self._current]
        phase.calls += 1
        consumed = parsed.get("ConsumedCapacity") or []
        for entry in consumed if isinstance(consumed, list) else [consumed]:
            table = entry.get("Table", {}).get("CapacityUnits", 0.0)
            index = sum(g["CapacityUnits"] for g in entry.get("GlobalSecondaryIndexes", {}).values())
            if model.name in DYNAMODB_READS:
                phase.rru += table + index
            else:
                phase.wru += table
                phase.index_wru += index

    def _book_request(self, model: Any, **_: Any) -> None:
        phase = self.phases[self._current]
        phase.calls += 1
        if model.name in S3_PUT_CLASS:
            phase.s3_put_class += 1
        elif model.name not in S3_FREE:
            phase.s3_get_class += 1
