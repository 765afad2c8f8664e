"""Conditional writes: the named transaction and the single-item refusal, and how each refusal is read.

A refused condition is decoded in one of two ways, and only here: a transaction's by the names its items
were given (:class:`Tx`, :class:`TxRefused`), and a single item's write as :class:`ItemRefused`, carrying
the old item an update refused (:func:`update_if`, :func:`put_if`).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pynamodb.constants import ALL_NEW, ALL_OLD
from pynamodb.exceptions import CancellationReason
from pynamodb.expressions.condition import Condition
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from bindery.faults import (
    ConditionFailed,
    StorageError,
    TransactionCancelled,
    conditional,
    item_or_none,
)

M = TypeVar("M", bound=Model)

_TRANSACTION_RETRIES = 8
_CONDITION_FAILED = "ConditionalCheckFailed"


@dataclass(frozen=True)
class TxRefused:
    """A transaction that DynamoDB cancelled because conditions failed: each item's reason, by the name
    the transaction gave the item (None: that item's condition held)."""

    reasons: dict[str, CancellationReason | None]

    def failed(self, name: str) -> bool:
        reason = self.reasons.get(name)
        return reason is not None and reason.code == _CONDITION_FAILED

    def old(self, model: type[M], name: str) -> M | None:
        """The item as it was when its condition failed (the write asked for ALL_OLD), or None if absent."""
        reason = self.reasons.get(name)
        if reason is None or reason.raw_item is None:
            return None
        return model.from_raw_data(reason.raw_item)


@dataclass
class Tx:
    """One TransactWriteItems whose items have names, so that a cancellation is read by name.

    DynamoDB answers a cancellation with one reason per item, in the order the items were sent, and
    PynamoDB sends a transaction's items grouped as condition checks, deletes, puts, then updates. The
    names are kept in that same grouping here, so the reasons line up with them whatever order the
    items were added in.
    """

    _items: dict[str, list[tuple[str, Callable[[TransactWrite], None]]]] = field(
        default_factory=lambda: {"check": [], "delete": [], "put": [], "update": []}
    )

    def check(self, name: str, model: type[Model], hash_key: str, range_key: str, condition: Any) -> None:
        self._add(
            "check", name, lambda tx: tx.condition_check(model, hash_key, range_key, condition=condition)
        )

    def delete(self, name: str, item: Model, condition: Any = None) -> None:
        self._add("delete", name, lambda tx: tx.delete(item, condition=condition))

    def put(self, name: str, item: Model, condition: Any = None, *, old: bool = False) -> None:
        returns = ALL_OLD if old else None
        self._add("put", name, lambda tx: tx.save(item, condition=condition, return_values=returns))

    def update(
        self, name: str, item: Model, actions: list[Any], condition: Any = None, *, old: bool = False
    ) -> None:
        returns = ALL_OLD if old else None
        self._add(
            "update",
            name,
            lambda tx: tx.update(item, actions=actions, condition=condition, return_values=returns),
        )

    def _add(self, kind: str, name: str, add: Callable[[TransactWrite], None]) -> None:
        self._items[kind].append((name, add))

    def commit(self, connection: Any) -> TxRefused | None:
        """Run it; None when it committed, a TxRefused when conditions refused it.

        Each try carries a fresh ClientRequestToken: should DynamoDB apply a try and its answer be lost,
        botocore resends that try, and DynamoDB answers the resend with the first one's success rather
        than evaluating the conditions again. (Where the token is not honoured, as on moto, the resend
        is refused by the conditions the first one made true, and each caller recognises its own write
        in the ALL_OLD item.) A TransactionConflict (another writer touched an item at the same instant)
        says nothing about our conditions, so the transaction is run again, with a new token; anything
        else that is not a failed condition is a StorageError.
        """
        ordered = [entry for kind in ("check", "delete", "put", "update") for entry in self._items[kind]]
        names = [name for name, _ in ordered]
        for n in range(_TRANSACTION_RETRIES):
            try:
                conditional(lambda: self._run(ordered, connection), "TransactWriteItems")
                return None
            except TransactionCancelled as exc:
                reasons = exc.reasons
                codes = {r.code for r in reasons if r is not None}
                if "TransactionConflict" in codes and n < _TRANSACTION_RETRIES - 1:
                    time.sleep(random.uniform(0, 0.01 * (2**n)))
                    continue
                # Throttled, timed out, or cancelled for anything but our conditions: not a refusal.
                if len(reasons) != len(names) or not codes or codes != {_CONDITION_FAILED}:
                    raise StorageError(f"TransactWriteItems: {exc}") from exc
                return TxRefused(dict(zip(names, reasons, strict=True)))
        raise AssertionError("unreachable")

    @staticmethod
    def _run(ordered: list[tuple[str, Callable[[TransactWrite], None]]], connection: Any) -> None:
        with TransactWrite(connection=connection, client_request_token=uuid.uuid4().hex) as tx:
            for _, add in ordered:
                add(tx)


def future_value(future: Any) -> Any:
    """A transactional read's item, or None when there is none."""
    return item_or_none(future.get)


class ItemRefused(Exception):
    """A single item's write refused by its condition; `old` is the item as it was (None: absent, or a put,
    which asks for no old item)."""

    def __init__(self, old: Any):
        self.old = old


def update_if(
    client: Any, model: type[M], hash_key: str, range_key: str, actions: list[Any], condition: Condition
) -> M:
    """UpdateItem returning the new item, or raising :class:`ItemRefused` carrying the OLD item.

    PynamoDB's ``Model.update`` does not ask for ``ReturnValuesOnConditionCheckFailure``, so PynamoDB builds
    the request (the same public builder its transactions use) and botocore's `client` sends it. The loser
    learns why it lost from the failure, not from a second read.
    """
    request = model(hash_key, range_key).get_update_kwargs_from_instance(
        actions, condition, return_values_on_condition_failure=ALL_OLD
    )
    try:
        data = conditional(lambda: client.update_item(**request, ReturnValues=ALL_NEW), "UpdateItem")
    except ConditionFailed as refused:
        raise ItemRefused(model.from_raw_data(refused.item) if refused.item else None) from refused
    return model.from_raw_data(data["Attributes"])


def put_if(item: Model, condition: Condition) -> None:
    """PutItem under `condition`, raising :class:`ItemRefused` when the condition refuses it."""
    try:
        conditional(lambda: item.save(condition=condition), "PutItem")
    except ConditionFailed as refused:
        raise ItemRefused(None) from refused


def chunks(items: Iterable[Any], n: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch
