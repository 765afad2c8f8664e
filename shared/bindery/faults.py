"""How an AWS fault reaches the rest of the code: as one error, translated in this one module.

Only a failed condition means "refused", and only an absent item or object means "not there"; storage and
objects read those through the helpers here (:func:`conditional`, :func:`item_or_none`,
:func:`object_or_none`) and decode them into domain outcomes. Anything else that DynamoDB, S3 or SQS answers
(throttling, a 5xx, a timeout, a connection reset, a validation error) leaves as :class:`StorageError`,
raised by :func:`translated` (a context manager) or :func:`translate_faults` (the same, around every public
method of a class): every route answers it with 503 and `Retry-After`, and the worker answers it by giving
its lease back. No caller has to know which library raised what (PynamoDB wraps botocore's errors in its own,
botocore raises two families of its own), and no module but this one names them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError
from pynamodb.exceptions import DoesNotExist, PynamoDBException, TransactWriteError

# Every error an AWS call can end in, whichever library raised it.
_AWS_ERRORS = (PynamoDBException, BotoCoreError, ClientError)
_CONDITION_FAILED = "ConditionalCheckFailedException"
# How S3 says an object is not there: a HEAD's bare 404, or a GET's NoSuchKey.
_NO_OBJECT = ("404", "NoSuchKey", "NotFound")

C = TypeVar("C", bound=type)
T = TypeVar("T")


class StorageError(Exception):
    """DynamoDB or S3 failed in a way that is not a refused condition (throttling, a timeout, an outage)."""


class ConditionFailed(Exception):
    """A single item's write refused by its condition; `item` is the item as it was, raw (None: absent, or
    not asked for)."""

    def __init__(self, item: dict[str, Any] | None):
        super().__init__("the condition failed")
        self.item = item


class TransactionCancelled(Exception):
    """A TransactWriteItems cancelled: one reason per item, in the order they were sent (None: that item's
    condition held). Whether that is a refusal, a conflict to run again or a fault, the transaction's
    reader decides (`bindery.storage.conditions.Tx`)."""

    def __init__(self, reasons: Sequence[Any], cause: Exception):
        super().__init__(str(cause))
        self.reasons = list(reasons)


@contextlib.contextmanager
def translated(what: str | None = None) -> Iterator[None]:
    """Inside it, an AWS error leaves only as StorageError, named after `what` (else its own type)."""
    try:
        yield
    except _AWS_ERRORS as exc:
        raise StorageError(f"{what or type(exc).__name__}: {exc}") from exc


def translate_faults(cls: C) -> C:
    """Wrap every public method of `cls` in :func:`translated`, so that an AWS error escapes it only as
    StorageError. The method's own handling runs first (a refused condition decoded into an outcome, an
    absent item read as "not there"); only what it lets through is translated."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _translating(member))
    return cls


def _translating(method: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with translated():
                yield from method(*args, **kwargs)

        return generator

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with translated():
            return method(*args, **kwargs)

    return call


def item_or_none(read: Callable[[], T]) -> T | None:
    """One item's read: the item, or None when there is none (PynamoDB raises DoesNotExist for it)."""
    try:
        return read()
    except DoesNotExist:
        return None


def object_or_none(call: Callable[[], T]) -> T | None:
    """An S3 call on one object: its answer, or None when there is no such object."""
    try:
        return call()
    except ClientError as exc:
        if _code(exc) in _NO_OBJECT:
            return None
        raise StorageError(f"{type(exc).__name__}: {exc}") from exc


def conditional(write: Callable[[], T], what: str) -> T:
    """A conditional write: its answer; or :class:`ConditionFailed` (one item's condition refused it) or
    :class:`TransactionCancelled` (a transaction's); anything else is a StorageError naming `what`."""
    try:
        return write()
    except TransactWriteError as exc:
        if exc.cancellation_reasons:
            raise TransactionCancelled(exc.cancellation_reasons, exc) from exc
        raise StorageError(f"{what}: {exc}") from exc
    except _AWS_ERRORS as exc:
        if _code(exc) == _CONDITION_FAILED:
            item = exc.response.get("Item") if isinstance(exc, ClientError) else None
            raise ConditionFailed(item) from exc
        raise StorageError(f"{what}: {exc}") from exc


def _code(exc: Exception) -> str | None:
    """The error code AWS answered with, whichever library wrapped it."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code"))
    if isinstance(exc, PynamoDBException):
        return exc.cause_response_code
    return None
