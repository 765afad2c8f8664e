from __future__ import annotations

import os
from dataclasses import dataclass

import botocore.loaders
import botocore.session
import pynamodb.connection.base
import pytest

from bindery_local.aws import (
    dynamodb_answers_are_dumped_as_they_are,
    records_are_not_copied,
    streams_read_the_live_table,
    transactions_undo_their_own_items,
)
from bindery_local.context import LambdaContext

# In-process moto too: without it every transaction copies each stream record its table ever wrote.
records_are_not_copied()
transactions_undo_their_own_items()
dynamodb_answers_are_dumped_as_they_are()
streams_read_the_live_table()

# PynamoDB gives every connection a new botocore session, which reads botocore's service models from disk
# again: a fifth of the fault matrix's time went to that, once per stack (in Lambda a process makes one).
# Each session here still resolves credentials of its own (DynamoDB Local files tables by access key), but
# they all read the models through one loader, which caches what it has read.
_models = botocore.loaders.create_loader()


def _session() -> botocore.session.Session:
    session = botocore.session.get_session()
    session.register_component("data_loader", _models)
    return session


pynamodb.connection.base.get_session = _session

# Tests never reach AWS: dummy credentials, one region, and no endpoint from the developer's shell.
for _name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
    os.environ.pop(_name, None)
os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_SESSION_TOKEN="testing",
    AWS_DEFAULT_REGION="us-east-1",
    AWS_REGION="us-east-1",
    POWERTOOLS_SERVICE_NAME="bindery",
    POWERTOOLS_METRICS_NAMESPACE="Bindery",
    POWERTOOLS_METRICS_DISABLED="true",
    POWERTOOLS_LOG_LEVEL="WARNING",
)


@dataclass
class FakeContext(LambdaContext):
    """The local stack's Lambda context, named for tests, with Lambda's longest timeout: no test's GC run
    is cut short by its deadline unless the test asks for it."""

    function_name: str = "bindery-test"
    timeout_ms: int = 900_000
    aws_request_id: str = "req-00000000"


class FakeClock:
    """Time that moves only when a test moves it."""

    def __init__(self, start: float = 1_800_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def lambda_context() -> FakeContext:
    return FakeContext()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deal the slow tests across the xdist workers, longest first, each to the least loaded one.

    `make test` runs `--dist worksteal`, which first gives each of n workers one contiguous nth of the
    collection, then lets an idle worker steal from the tail of a busy one's queue. So each worker's share
    is laid out here: its slow tests first (they are never stolen, and never start last), then an equal
    count of the quick ones, which the stealing balances at the end. Each worker collects the same order.
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2:
        return

    def weight(item: pytest.Item) -> float:
        marker = item.get_closest_marker("slow")
        return float(marker.args[0]) if marker is not None else 0.0

    slow = sorted((item for item in items if weight(item)), key=weight, reverse=True)
    quick = [item for item in items if not weight(item)]
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for item in slow:
        lightest = loads.index(min(loads))
        shares[lightest].append(item)
        loads[lightest] += weight(item)
    # The sizes worksteal cuts the collection into: worker i gets len // (workers - i) of what is left.
    left, sizes = len(items), []
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    for share, size in zip(shares, sizes, strict=True):
        while len(share) < size and quick:
            share.append(quick.pop(0))
    items[:] = [item for share in shares for item in share] + quick
