from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

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
class FakeContext:
    """The parts of a Lambda context the handlers and Powertools read."""

    function_name: str = "bindery-test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:bindery-test"
    aws_request_id: str = "req-00000000"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


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
