"""The fault matrix: every AWS call the handler paths make, each failed in four ways, then the system is run
to quiescence and held to its five promises.

The call points are enumerated from a recording of a clean run, so a call added to the code is covered
without editing this test. Faults are injected with botocore's before-call hook: a ClientError (500), a
throttle, a timeout, and a crash (a BaseException that no `except Exception` in the code can swallow:
the process dies between two calls and the platform retries the event).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from tests.calls import recording
from tests.figures import record
from tests.invariants import violations
from tests.unit.conftest import Stack


class Crash(BaseException):
    """The process dies here: nothing after this call runs, and nothing catches it."""


def _client_error(op: str) -> BaseException:
    return ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, op)


def _throttle(op: str) -> BaseException:
    code = "SlowDown" if op.endswith("Object") else "ThrottlingException"
    return ClientError({"Error": {"Code": code, "Message": "injected"}}, op)


def _timeout(op: str) -> BaseException:
    return ReadTimeoutError(endpoint_url=f"https://aws/{op}")


def _crash(op: str) -> BaseException:
    return Crash(op)


FAULTS: dict[str, Callable[[str], BaseException]] = {
    "client_error": _client_error,
    "throttle": _throttle,
    "timeout": _timeout,
    "crash": _crash,
}


@dataclass
class Injector:
    """Raises `fault` at the `at`-th AWS call (counting from 0), once."""

    at: int
    fault: Callable[[str], BaseException]
    seen: int = 0
    fired: bool = False

    def __call__(self, model: Any, **_: Any) -> None:
        index, self.seen = self.seen, self.seen + 1
        if index == self.at and not self.fired:
            self.fired = True
            raise self.fault(model.name)


@dataclass
class Run:
    stack: Stack
    key_answers: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    poll_writes: list[str] = field(default_factory=list)

    def attempt(self, act: Callable[[], Any], tries: int = 3) -> Any:
        """An event the platform retries: an HTTP client retrying a 5xx or an error, SQS redelivering."""
        for _ in range(tries):
            try:
                result = act()
            except (Exception, Crash):
                continue
            status = getattr(result, "status", 200)
            if status < 500:
                return result
        return None

    def workload(self) -> None:
        s = self.stack
        reply = self.attempt(
            lambda: s.http("POST", "/books", body={"title": "Faults", "manuscript": "# A\n\nx\n"})
        )
        if reply is None or reply.status != 201:
            return
        book = reply.body["id"]
        empty = self.attempt(lambda: s.http("POST", "/books", body={"title": "Empty", "manuscript": ""}))
        ids = []
        for key in ("key-1", "key-1", None):
            answer = self.attempt(lambda k=key: s.submit(book, "html", key=k))
            if answer is not None and answer.status == 202:
                ids.append(answer.body["id"])
                if key:
                    self.key_answers[key].add(answer.body["id"])
        if empty is not None and empty.status == 201:
            failing = self.attempt(lambda: s.submit(empty.body["id"], "markdown"))
            if failing is not None and failing.status == 202:
                self.attempt(lambda: s.build(empty.body["id"], failing.body["id"]))
        if len(ids) >= 2:
            self.attempt(lambda: s.http("DELETE", f"/books/{book}/exports/{ids[-1]}"))
        copied = self.attempt(lambda: s.submit(book, "markdown"))  # a build by server-side copy
        if copied is not None and copied.status == 202:
            self.attempt(lambda: self._build_until_done(book, copied.body["id"]))
        for export_id in ids[:1]:
            self.attempt(lambda e=export_id: self._build_until_done(book, e))
            with recording(s.store.client, s.objects.client) as calls:
                self.attempt(lambda e=export_id: s.poll(book, e))
            self.poll_writes += calls.writes()
        s.clock.advance(s.exports.settings.link_ttl_seconds + 1)
        self.attempt(s.gc)
        self.attempt(s.sweep)

    def _build_until_done(self, book: str, export_id: str) -> Any:
        result = self.stack.build(book, export_id)
        if result["batchItemFailures"]:
            raise RuntimeError("the queue will redeliver")
        return result

    def quiesce(self) -> None:
        """Redeliver what is still pending, move the clock past every bound, and run the sweeps and the
        GC until nothing is left to do."""
        s = self.stack
        settings = s.exports.settings
        for _ in range(settings.max_attempts + 2):
            for row in list(s.store.all_exports()):
                if row.state == "pending":
                    self.attempt(lambda r=row: s.build(r.book_id, r.id))
            s.clock.advance(
                max(settings.lease_seconds + settings.retry_grace_seconds, settings.queue_grace_seconds)
                + settings.link_ttl_seconds
                + 1
            )
            self.attempt(s.sweep)
            self.attempt(s.gc)


def _fresh_run(stack: Stack) -> Run:
    return Run(stack)


def _call_points(stack: Stack) -> list[tuple[str, str]]:
    run = _fresh_run(stack)
    with recording(stack.store.client, stack.objects.client) as calls:
        run.workload()
    run.quiesce()
    assert (
        violations(stack.store, stack.objects, key_answers=run.key_answers, poll_writes=run.poll_writes) == []
    )
    return calls.made


def test_the_clean_run_keeps_every_promise(stack: Stack) -> None:
    points = _call_points(stack)
    assert len(points) > 30


@pytest.mark.slow(35)
@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_a_fault_at_every_call_point_loses_nothing(stack_factory: Callable[[], Any], kind: str) -> None:
    with stack_factory() as probe:
        points = _call_points(probe)
    failures: list[str] = []
    for at, (service, op) in enumerate(points):
        with stack_factory() as stack:
            injector = Injector(at, FAULTS[kind])
            for client in (stack.store.client, stack.objects.client):
                client.meta.events.register("before-call", injector)
            run = _fresh_run(stack)
            run.workload()
            run.quiesce()
            for client in (stack.store.client, stack.objects.client):
                client.meta.events.unregister("before-call", injector)
            found = violations(
                stack.store, stack.objects, key_answers=run.key_answers, poll_writes=run.poll_writes
            )
            failures += [f"{kind} at call {at} ({service} {op}): {v}" for v in found]
    print(f"\nfault matrix: {kind}: {len(points)} call points tried, {len(failures)} violations")
    record(f"fault matrix: {kind}: call points tried", len(points))
    record(f"fault matrix: {kind}: invariant violations", len(failures))
    assert failures == []
