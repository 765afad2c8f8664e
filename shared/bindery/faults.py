"""How an AWS fault reaches the rest of the code: as one error, translated in one place.

Only a failed condition means "refused", and storage decodes those itself, into domain outcomes. Anything
else that DynamoDB or S3 answers (throttling, a 5xx, a timeout, a connection reset, a validation error)
leaves `bindery.storage` and `bindery.objects` as :class:`StorageError`: every route answers it with 503 and
`Retry-After`, and the worker answers it by giving its lease back. No caller has to know which library
raised what (PynamoDB wraps botocore's errors in its own, botocore raises two families of its own).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError
from pynamodb.exceptions import PynamoDBException

# Every error an AWS call can end in, whichever library raised it.
AWS_ERRORS = (PynamoDBException, BotoCoreError, ClientError)

C = TypeVar("C", bound=type)


class StorageError(Exception):
    """DynamoDB or S3 failed in a way that is not a refused condition (throttling, a timeout, an outage)."""


def _translated(method: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(*args, **kwargs)
            except AWS_ERRORS as exc:
                raise StorageError(f"{type(exc).__name__}: {exc}") from exc

        return generator

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except AWS_ERRORS as exc:
            raise StorageError(f"{type(exc).__name__}: {exc}") from exc

    return call


def translate_faults(cls: C) -> C:
    """Wrap every public method of `cls` so that an AWS error escapes it only as StorageError.

    The method's own handling runs first (a refused condition decoded into an outcome, a 404 read as
    "not there"); only what it lets through is translated."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _translated(member))
    return cls
