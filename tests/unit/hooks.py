"""What the webhook tests share: a stack whose deliveries go to a scripted receiver through a queue the test
drains, and events built exactly as the template's pipe builds them from a real run's stream."""

from __future__ import annotations

import base64
import json
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ReadTimeoutError

from bindery.deliveries import Deliveries
from bindery.outbound import Sent
from tests.unit.conftest import Stack
from tests.unit.test_events import _events

PUBLIC = "93.184.216.34"
ALICE = "user-alice"


def public_resolver(host: str, port: int) -> list[str]:
    return [PUBLIC]


@dataclass
class Keys:
    """The send queue, as a list the test drains."""

    sent: list[tuple[str, int]] = field(default_factory=list)

    def send(self, keys: list[tuple[str, int]]) -> None:
        self.sent.extend(keys)

    def drain(self) -> list[tuple[str, int]]:
        taken, self.sent[:] = list(self.sent), []
        return taken


@dataclass
class Receiver:
    """Answers each POST to a URL with the next scripted answer (the last one repeats), and keeps what it
    was sent: headers and body, in order."""

    script: dict[str, deque[Sent]] = field(default_factory=lambda: defaultdict(deque))
    got: dict[str, list[tuple[dict[str, str], bytes]]] = field(default_factory=lambda: defaultdict(list))

    def answer(self, url: str, *answers: int | str) -> None:
        for a in answers:
            self.script[url].append(
                Sent(a, None, "", 7) if isinstance(a, int) else Sent(None, a, "", 7)  # type: ignore[arg-type]
            )

    def __call__(self, url: str, body: bytes, headers: dict[str, str], *, local_http: bool) -> Sent:
        self.got[url].append((dict(headers), body))
        queue = self.script[url]
        return queue.popleft() if len(queue) > 1 else (queue[0] if queue else Sent(200, None, "ok", 7))


@dataclass
class Hooked:
    stack: Stack
    keys: Keys
    receiver: Receiver
    # When each event first happened: a redriven event keeps its envelope's time.
    happened: dict[str, float] = field(default_factory=dict)

    @property
    def d(self) -> Deliveries:
        return self.stack.services.deliveries

    def register(
        self, url: str, events: Iterable[str] = ("bindery.export.ready",), caller: str = ALICE
    ) -> dict:
        r = self.stack.http("POST", "/webhooks", body={"url": url, "events": list(events)}, caller=caller)
        assert r.status == 201, r.body
        return r.body

    def publish(self) -> list[str]:
        """Every event the pipe has put on the bus since the run began, ingested (replays included)."""
        ids = []
        for kind, detail in _events(self.stack):
            when = self.happened.setdefault(detail["id"], self.stack.clock())
            self.d.ingest(envelope(kind, detail, when))
            ids.append(detail["id"])
        return ids

    def send_all(self) -> list[str]:
        """Drain the queue into the sender until it is empty: what each send came to."""
        out = []
        while keys := self.keys.drain():
            out += [self.d.send(ep, seq) for ep, seq in keys]
        return out

    def retry_round(self, seconds: float) -> list[str]:
        """Time passes, the sweep finds what is due, and the sender sends it."""
        self.stack.clock.advance(seconds)
        self.d.sweep()
        return self.send_all()

    def delivery(self, endpoint_id: str, caller: str = ALICE) -> dict[str, Any]:
        r = self.stack.http("GET", f"/webhooks/{endpoint_id}/deliveries", caller=caller)
        assert r.status == 200, r.body
        assert len(r.body["deliveries"]) == 1, r.body
        return r.body["deliveries"][0]

    def endpoint(self, endpoint_id: str, caller: str = ALICE) -> dict[str, Any]:
        r = self.stack.http("GET", f"/webhooks/{endpoint_id}", caller=caller)
        assert r.status == 200, r.body
        return r.body


def hooked(stack: Stack) -> Hooked:
    keys, receiver = Keys(), Receiver()
    services = stack.services
    services.hooks.resolve = public_resolver
    services.deliveries = services.deliveries_with(keys, post=receiver, jitter=lambda: 0.5)
    return Hooked(stack, keys, receiver)


def envelope(kind: str, detail: dict[str, Any], now: float) -> str:
    """The event as EventBridge hands it to SQS: its envelope, with the pipe's detail inside."""
    when = datetime.fromtimestamp(int(now), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps(
        {
            "version": "0",
            "id": base64.b32encode(detail["id"].encode()).decode()[:36],
            "detail-type": kind,
            "source": "bindery",
            "account": "000000000000",
            "time": when,
            "region": "us-east-1",
            "resources": [],
            "detail": detail,
        }
    )


@contextmanager
def answers_lost(
    client: Any, operation: str, nth: int | None = None, *, applied: bool = True
) -> Iterator[list[str]]:
    """While it lasts, the `nth` `operation` call through `client` (every one, if None) times out, and
    botocore resends it; once it gives up, the caller gets the fault. With `applied`, moto has applied the
    request (or refused it on its conditions) first, and only the answer is lost; without, the request
    never reached the table.

    botocore calls the handlers of a more specific event before those of a less specific one: a hook on
    `before-send` itself, registered after moto's own there, runs once moto has applied the request; one
    on `before-send.*.<operation>` runs before moto's, and nothing is applied."""
    lost: list[str] = []
    seen = [0]

    def lose(request: Any, event_name: str = "", **_: Any) -> None:
        if event_name.endswith(f".{operation}"):
            seen[0] += 1
            if nth is None or seen[0] == nth:
                lost.append(operation)
                raise ReadTimeoutError(endpoint_url=request.url)

    event = "before-send" if applied else f"before-send.*.{operation}"
    client.meta.events.register(event, lose)
    try:
        yield lost
    finally:
        client.meta.events.unregister(event, lose)
    assert lost, f"no {operation} answer was lost"
