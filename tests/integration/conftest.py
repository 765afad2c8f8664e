"""The integration tier: DynamoDB Local for atomicity and races, moto's server for S3, both over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import boto3
import pytest
from moto.server import ThreadedMotoServer

from bindery.config import Settings
from bindery.exports import Exports
from bindery.objects import Objects
from bindery.storage import Store
from tests.conftest import FakeClock
from tests.infra import create_table
from tests.servers import dynamodb_local, free_port


@pytest.fixture(scope="session")
def ddb_endpoint() -> Iterator[str]:
    with dynamodb_local() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def exports(
    ddb_endpoint: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> Exports:
    """A service over a fresh table in DynamoDB Local and a fresh bucket in moto's server."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", ddb_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    name = f"bindery-{uuid.uuid4().hex[:12]}"
    create_table(boto3.client("dynamodb"), name)
    boto3.client("s3").create_bucket(Bucket=name)
    settings = Settings(table=name, bucket=name)
    store = Store(settings)
    assert store.client.meta.endpoint_url == ddb_endpoint  # the races run on the real engine, not moto
    return Exports(settings, store, Objects(settings), clock=clock)
