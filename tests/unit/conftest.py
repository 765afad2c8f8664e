from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import boto3
import pytest
from moto import mock_aws

from bindery.config import Settings
from bindery.exports import ExportRequests
from bindery.objects import Objects
from bindery.piece_cache import BuildPieces, CacheCounts
from bindery.storage import Store
from functions.build_worker import app as build_worker
from functions.expiry_gc import app as expiry_gc
from functions.poll import app as poll
from functions.stale_sweep import app as stale_sweep
from functions.submit import app as submit
from tests.conftest import FakeClock, FakeContext
from tests.events import http_event, sample, sqs_event_for
from tests.iam import acting_as
from tests.infra import create_table
from tests.services import Services, wired

TABLE, BUCKET = "bindery-unit", "bindery-unit-artifacts"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass
class Stack:
    """The five handlers over moto, with one set of services and one fake clock."""

    services: Services
    clock: FakeClock
    context: FakeContext

    @property
    def exports(self) -> ExportRequests:
        return self.services.exports

    @property
    def store(self) -> Store:
        return self.services.store

    @property
    def objects(self) -> Objects:
        return self.services.objects

    def http(self, method: str, path: str, **kw: Any) -> Reply:
        handler, name = (poll.handler, "poll") if method == "GET" else (submit.handler, "submit")
        with acting_as(name):
            raw = handler(http_event(method, path, **kw), self.context, services=self.services.api)
        body = json.loads(raw["body"]) if raw.get("body") else None
        return Reply(raw["statusCode"], raw.get("headers") or {}, body)

    def create_book(
        self,
        manuscript: str = "# One\n\nfirst\n\n# Two\n\nsecond\n",
        caller: str = "user-alice",
        title: str = "A Book",
    ) -> str:
        reply = self.http("POST", "/books", caller=caller, body={"title": title, "manuscript": manuscript})
        assert reply.status == 201, reply.body
        return str(reply.body["id"])

    def submit(
        self,
        book_id: str,
        fmt: str = "html",
        caller: str = "user-alice",
        key: str | None = None,
        caller_class: str | None = None,
    ) -> Reply:
        headers = {"Idempotency-Key": key} if key else None
        return self.http(
            "POST",
            f"/books/{book_id}/exports",
            caller=caller,
            body={"format": fmt},
            headers=headers,
            caller_class=caller_class,
        )

    def reconfigured(self, **changes: Any) -> Stack:
        """The same table, bucket and clock, under settings with these changes (the store's too: the caps'
        conditions read its settings)."""
        settings = dataclasses.replace(self.services.settings, **changes)
        self.services = wired(settings, Store(settings), Objects(settings), self.clock)
        return self

    def poll(self, book_id: str, export_id: str, caller: str = "user-alice") -> Reply:
        return self.http("GET", f"/books/{book_id}/exports/{export_id}", caller=caller)

    def build(self, book_id: str, export_id: str) -> dict[str, Any]:
        with acting_as("build_worker"):
            result: dict[str, Any] = build_worker.handler(
                sqs_event_for(book_id, export_id), self.context, builds=self.services.builds
            )
        return result

    def gc(self) -> dict[str, Any]:
        with acting_as("expiry_gc"):
            result: dict[str, Any] = expiry_gc.handler(
                sample("expiry_gc_schedule.json"), self.context, schedules=self.services.schedules
            )
        return result

    def sweep(self) -> dict[str, Any]:
        with acting_as("stale_sweep"):
            result: dict[str, Any] = stale_sweep.handler(
                sample("stale_sweep_schedule.json"),
                self.context,
                schedules=self.services.schedules,
                batches=self.services.batches,
            )
        return result


@lru_cache(maxsize=8)
def _setup_client(service: str, env: tuple[str | None, ...]) -> Any:
    return boto3.client(service)


def setup_client(service: str) -> Any:
    """A client for making and dropping a stack's table and bucket: one per process (and per endpoint and
    credentials in the environment), not one per stack. A client costs 5-10 ms to make, and the fault matrix
    and the stateful test make a stack per run (about 360 and 300)."""
    return _setup_client(service, tuple(os.environ.get(name) for name in _CLIENT_ENV))


_CLIENT_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
)


def drop_table(name: str) -> None:
    """Delete a used-up stack's table. moto copies every table it holds for each transaction (to roll a
    cancelled one back), so a run that made a table per example would slow down with each one it made."""
    setup_client("dynamodb").delete_table(TableName=name)


@pytest.fixture
def settings() -> Settings:
    return Settings(table=TABLE, bucket=BUCKET)


def _new_stack(settings: Settings, clock: FakeClock, context: FakeContext) -> Stack:
    create_table(setup_client("dynamodb"), settings.table)
    setup_client("s3").create_bucket(Bucket=settings.bucket)
    return Stack(wired(settings, Store(settings), Objects(settings), clock), clock, context)


@pytest.fixture
def stack(settings: Settings, clock: FakeClock, lambda_context: FakeContext) -> Iterator[Stack]:
    with mock_aws():
        yield _new_stack(settings, clock, lambda_context)


@pytest.fixture
def stack_factory(lambda_context: FakeContext) -> Iterator[Callable[[], AbstractContextManager[Stack]]]:
    """Fresh stacks, each with its own table, bucket and clock, inside one moto: for tests that rerun a
    whole workload many times."""

    @contextmanager
    def fresh() -> Iterator[Stack]:
        name = f"bindery-{uuid.uuid4().hex[:10]}"
        try:
            yield _new_stack(Settings(table=name, bucket=name), FakeClock(), lambda_context)
        finally:
            drop_table(name)

    with mock_aws():
        yield fresh


def count_pieces(monkeypatch: pytest.MonkeyPatch) -> list[CacheCounts]:
    """Each build's counts of its pieces found and made, from now on, in order."""
    counted: list[CacheCounts] = []
    finish = BuildPieces.finish

    def counting(pieces: BuildPieces) -> None:
        counted.append(pieces.counts)
        finish(pieces)

    monkeypatch.setattr(BuildPieces, "finish", counting)
    return counted
