"""Webhooks end to end: the local stack sends to real receivers on 127.0.0.1, each of which verifies every
request's signature with the `standardwebhooks` library (the real clock, its 5-minute tolerance), and the
ledger, the endpoint and the events feed are read back over HTTP.

The stack's schedule is cut to seconds: attempts 1 to 3 a second apart (with the schedule's +-20 % jitter),
a 4th some 30 s after the 3rd, which is the time a test has to delete an endpoint whose delivery waits.
Each test is its own caller, so no endpoint of one test receives another test's events."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import pytest
import requests
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from bindery_local import tokens
from bindery_local.stack import TABLE
from tests.e2e.stack import RunningStack, auth, start
from tests.servers import free_port

SCHEDULE = "0,1,1,30"
OVERLAP = 8  # seconds the replaced secret keeps signing: from a rotation to its export's delivery, and more
LEASE = 15  # must outlast one attempt's 10 s deadline, or a hanging receiver's attempt would be claimed again
READ_TIMEOUT = 5  # bindery.outbound.post's read timeout: a receiver that hangs longer is timed out
WAIT = 30  # the longest any one wait below polls
MAX_REQUESTS = 20  # a receiver answers no more than this; past it, 503 and nothing recorded
READY = ["bindery.export.ready"]
T = TypeVar("T")


@pytest.fixture(scope="module")
def hooks() -> Iterator[RunningStack]:
    """`make run`'s stack, http to 127.0.0.1 allowed, with the schedule, overlap and lease above."""
    running = start(
        free_port(),
        local_http=True,
        BINDERY_WEBHOOK_SCHEDULE=SCHEDULE,
        BINDERY_WEBHOOK_SECRET_OVERLAP_SECONDS=str(OVERLAP),
        BINDERY_WEBHOOK_LEASE_SECONDS=str(LEASE),
        BINDERY_LOCAL_SWEEP_SECONDS="1",
    )
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            running.stop()


@dataclass(frozen=True)
class Seen:
    """One request a receiver got: which of its secrets verified it, what it answered, what it carried."""

    verified: dict[str, bool]  # by the secret's name
    status: int
    webhook_id: str
    signatures: int  # how many v1 signatures the header held
    body: dict[str, Any]
    at: datetime  # when it arrived

    @property
    def event_id(self) -> str:
        return str(self.body["id"])


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1. It answers each request with the next status of `answers` (the
    last one repeats), after hanging `hang_first` seconds on the first request; it checks every request's
    signature against each of `secrets`, and answers 401 when none verifies."""

    answers: list[int]
    hang_first: float = 0.0
    secrets: dict[str, str] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def answer(self, body: bytes, headers: dict[str, str]) -> tuple[int, float]:
        verified = {}
        for name, secret in self.secrets.items():
            try:
                Webhook(secret).verify(body, headers)
                verified[name] = True
            except WebhookVerificationError:
                verified[name] = False
        with self.lock:
            n = len(self.seen)
            if n >= MAX_REQUESTS:
                return 503, 0.0
            status = self.answers[min(n, len(self.answers) - 1)] if any(verified.values()) else 401
            signatures = len(headers.get("webhook-signature", "").split())
            webhook_id = headers.get("webhook-id", "")
            seen = Seen(verified, status, webhook_id, signatures, json.loads(body), datetime.now(UTC))
            self.seen.append(seen)
        return status, self.hang_first if n == 0 else 0.0


@pytest.fixture
def receiver() -> Iterator[Callable[..., Receiver]]:
    started: list[Receiver] = []

    def serve(answers: list[int], hang_first: float = 0.0) -> Receiver:
        hook = Receiver(answers, hang_first)

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # a client that stops sending mid-request is dropped

            def do_POST(self) -> None:
                body = self.rfile.read(min(int(self.headers.get("Content-Length") or 0), 1 << 20))
                status, hang = hook.answer(body, {k.lower(): v for k, v in self.headers.items()})
                hook.released.wait(hang)  # ended at once at teardown
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender gave up on a hanging answer and closed the connection

            def log_message(self, *_: Any) -> None:
                pass

        hook.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        hook.server.daemon_threads = True
        threading.Thread(
            target=hook.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        started.append(hook)
        return hook

    yield serve
    for hook in started:
        hook.released.set()
        assert hook.server is not None
        hook.server.shutdown()
        hook.server.server_close()


def until(what: str, probe: Callable[[], T | None], timeout: float = WAIT) -> T:
    """The first truthy answer of `probe`, polled until `timeout`; the test fails naming `what` if none."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:g}s")
        time.sleep(0.2)


def caller(name: str) -> dict[str, str]:
    return auth(tokens.mint(f"hooks-{name}"))


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def register(stack: RunningStack, who: dict[str, str], hook: Receiver, events: list[str] = READY) -> str:
    made = requests.post(
        f"{stack.api}/webhooks",
        headers=who,
        json={"url": hook.url, "events": events, "description": "e2e receiver"},
        timeout=10,
    )
    assert made.status_code == 201, made.text
    hook.secrets["current"] = made.json()["secret"]
    return str(made.json()["id"])


def export_ready(stack: RunningStack, who: dict[str, str], title: str) -> str:
    """A new book exported as markdown, waited for until ready (which fires the event); its export id."""
    book = requests.post(
        f"{stack.api}/books",
        headers=who,
        json={"title": title, "manuscript": f"# {title}\n\nWords.\n"},
        timeout=10,
    )
    assert book.status_code == 201, book.text
    url = f"{stack.api}/books/{book.json()['id']}/exports"
    accepted = requests.post(url, headers=who, json={"format": "markdown"}, timeout=10)
    assert accepted.status_code == 202, accepted.text
    export_id = str(accepted.json()["id"])

    def ended() -> dict[str, Any] | None:
        body: dict[str, Any] = requests.get(f"{url}/{export_id}", headers=who, timeout=10).json()
        return body if body["state"] != "pending" else None

    assert until(f"export {export_id} ends", ended)["state"] == "ready"
    return export_id


def ledger(stack: RunningStack, who: dict[str, str], endpoint: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{stack.api}/webhooks/{endpoint}/deliveries", headers=who, timeout=10)
    assert answer.status_code == 200, answer.text
    deliveries: list[dict[str, Any]] = answer.json()["deliveries"]
    return deliveries


def delivery_in(stack: RunningStack, who: dict[str, str], endpoint: str, state: str) -> dict[str, Any]:
    """The endpoint's one delivery, once it is in `state`."""

    def probe() -> dict[str, Any] | None:
        found = ledger(stack, who, endpoint)
        assert len(found) <= 1, found
        return found[0] if found and found[0]["state"] == state else None

    return until(f"the delivery to {endpoint} is {state}", probe)


def endpoint_view(stack: RunningStack, who: dict[str, str], endpoint: str) -> dict[str, Any]:
    answer = requests.get(f"{stack.api}/webhooks/{endpoint}", headers=who, timeout=10)
    assert answer.status_code == 200, answer.text
    view: dict[str, Any] = answer.json()
    return view


def table(stack: RunningStack) -> Any:
    return stack.client("dynamodb")


@pytest.mark.slow(5)
def test_a_receiver_that_fails_twice_then_answers_gets_three_signed_attempts_and_the_delivery_is_acked(
    hooks: RunningStack, receiver: Callable[..., Receiver]
) -> None:
    who = caller("500-500-200")
    hook = receiver([500, 500, 200])
    endpoint = register(hooks, who, hook)

    export_ready(hooks, who, "Third time")
    acked = delivery_in(hooks, who, endpoint, "acked")

    assert [s.status for s in hook.seen] == [500, 500, 200]
    assert all(s.verified == {"current": True} for s in hook.seen)
    # webhook-id is the event's id, the same on every attempt, and so is the body's.
    assert {s.webhook_id for s in hook.seen} == {s.event_id for s in hook.seen} == {acked["event_id"]}
    assert [(a["n"], a["status"], a["error"]) for a in acked["attempts"]] == [
        (1, 500, None),
        (2, 500, None),
        (3, 200, None),
    ]
    view = endpoint_view(hooks, who, endpoint)
    assert view["deliveries"] == {
        "queued": 0, "in_flight": 0, "acked": 1, "rejected": 0, "expired": 0, "withdrawn": 0
    }  # fmt: skip
    assert view["enabled"] is True and view["consecutive_failures"] == 0


@pytest.mark.slow(4)
def test_a_receiver_that_answers_400_gets_one_attempt_and_the_delivery_is_rejected(
    hooks: RunningStack, receiver: Callable[..., Receiver]
) -> None:
    who = caller("400")
    hook = receiver([400])
    endpoint = register(hooks, who, hook)

    export_ready(hooks, who, "Refused")
    rejected = delivery_in(hooks, who, endpoint, "rejected")
    time.sleep(2.5)  # past the schedule's next delay and a sweep: a retry, were there one, would be here

    assert [(s.status, s.verified["current"]) for s in hook.seen] == [(400, True)]
    assert [(a["n"], a["status"]) for a in rejected["attempts"]] == [(1, 400)]
    assert [d["state"] for d in ledger(hooks, who, endpoint)] == ["rejected"]
    assert endpoint_view(hooks, who, endpoint)["enabled"] is True  # only 410 disables at once


@pytest.mark.slow(9)
def test_a_receiver_that_hangs_past_the_read_timeout_is_retried_and_the_timeout_is_recorded(
    hooks: RunningStack, receiver: Callable[..., Receiver]
) -> None:
    who = caller("hang")
    hook = receiver([200], hang_first=READ_TIMEOUT + 1.5)
    endpoint = register(hooks, who, hook)

    export_ready(hooks, who, "Slow reader")
    acked = delivery_in(hooks, who, endpoint, "acked")

    assert len(hook.seen) >= 2 and all(s.verified == {"current": True} for s in hook.seen)
    assert {s.event_id for s in hook.seen} == {acked["event_id"]}
    first, last = acked["attempts"][0], acked["attempts"][-1]
    assert (first["n"], first["status"], first["error"]) == (1, None, "timeout")
    assert READ_TIMEOUT * 1000 - 100 <= first["latency_ms"] < (READ_TIMEOUT + 1.5) * 1000
    assert (last["status"], last["error"]) == (200, None) and len(acked["attempts"]) == len(hook.seen)


def test_a_410_disables_the_endpoint_at_once_and_says_since_when(
    hooks: RunningStack, receiver: Callable[..., Receiver]
) -> None:
    who = caller("410")
    hook = receiver([410])
    endpoint = register(hooks, who, hook)
    before = datetime.now(UTC)

    export_ready(hooks, who, "Gone")
    rejected = delivery_in(hooks, who, endpoint, "rejected")

    def disabled() -> dict[str, Any] | None:
        view = endpoint_view(hooks, who, endpoint)
        return view if view["enabled"] is False else None

    view = until("the endpoint is disabled", disabled)

    assert [(s.status, s.verified["current"]) for s in hook.seen] == [(410, True)]
    assert [a["status"] for a in rejected["attempts"]] == [410]
    assert (view["enabled"], view["disabled_reason"]) == (False, "gone")
    assert before - timedelta(seconds=1) <= parse_time(view["disabled_at"]) <= datetime.now(UTC)


@pytest.mark.slow(7)
def test_deleting_an_endpoint_whose_delivery_waits_for_a_retry_ends_it_withdrawn(
    hooks: RunningStack, receiver: Callable[..., Receiver]
) -> None:
    who = caller("deleted")  # the caller hooks-deleted
    hook = receiver([500])
    endpoint = register(hooks, who, hook)
    export_ready(hooks, who, "Withdrawn")

    # Given three failed attempts, the 4th waits ~30 s (the schedule's last delay)...
    def waiting() -> dict[str, Any] | None:
        found = ledger(hooks, who, endpoint)
        return (
            found[0] if found and found[0]["state"] == "queued" and len(found[0]["attempts"]) == 3 else None
        )

    queued = until("the delivery waits after three attempts", waiting)
    assert (parse_time(queued["next_attempt_at"]) - datetime.now(UTC)).total_seconds() > 15
    # ...when the endpoint is deleted.
    assert requests.delete(f"{hooks.api}/webhooks/{endpoint}", headers=who, timeout=10).status_code == 204

    assert requests.get(f"{hooks.api}/webhooks/{endpoint}", headers=who, timeout=10).status_code == 404
    gone = requests.get(f"{hooks.api}/webhooks/{endpoint}/deliveries", headers=who, timeout=10)
    assert gone.status_code == 404
    # The ledger of a deleted endpoint is the table's alone: read it there.
    db = table(hooks)
    key = {"pk": {"S": f"HOOK#{endpoint}"}, "sk": {"S": f"DLV#{int(queued['id']):012d}"}}

    def withdrawn() -> dict[str, Any] | None:
        item: dict[str, Any] = db.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]
        return item if item["state"]["S"] == "withdrawn" else None

    item = until("the sweep withdraws the delivery", withdrawn)
    assert [a["status"] for a in json.loads(item["attempts"]["S"])] == [500, 500, 500]
    assert "due_at" not in item  # out of the sweep's by_due index: nothing will send it again
    tombstone = db.get_item(
        TableName=TABLE,
        Key={"pk": {"S": "CALLER#hooks-deleted"}, "sk": {"S": f"HOOK#{endpoint}"}},
        ConsistentRead=True,
    )["Item"]
    assert (tombstone["n_queued"]["N"], tombstone["n_withdrawn"]["N"]) == ("0", "1")
    time.sleep(2.5)  # a few sweeps: none sends it
    assert [s.status for s in hook.seen] == [500, 500, 500]


@pytest.mark.slow(9)
def test_a_rotated_secret_signs_beside_the_old_one_during_the_overlap_and_alone_after_it(
    hooks: RunningStack, receiver: Callable[..., Receiver]
) -> None:
    who = caller("rotated")
    hook = receiver([200])
    endpoint = register(hooks, who, hook)
    hook.secrets["old"] = hook.secrets.pop("current")

    rotated = requests.post(f"{hooks.api}/webhooks/{endpoint}/rotate-secret", headers=who, timeout=10)
    assert rotated.status_code == 200, rotated.text
    hook.secrets["new"] = rotated.json()["secret"]
    assert hook.secrets["new"] != hook.secrets["old"]
    replaced = [s for s in rotated.json()["secrets"] if not s["current"]]
    assert len(replaced) == 1 and len(rotated.json()["secrets"]) == 2
    overlap_ends = parse_time(replaced[0]["expires_at"])

    # During the overlap: a receiver holding either secret accepts.
    export_ready(hooks, who, "During")
    during = until("the first delivery arrives", lambda: hook.seen[:1])[0]
    assert during.at < overlap_ends, "the delivery came after the overlap: this machine was too slow"
    assert (during.verified, during.signatures) == ({"old": True, "new": True}, 2)

    # After it: the old secret no longer verifies; the new one does.
    until(
        "the replaced secret stops signing",
        lambda: len(endpoint_view(hooks, who, endpoint)["secrets"]) == 1,
        timeout=OVERLAP + 5,
    )
    export_ready(hooks, who, "After")
    after = until("the second delivery arrives", lambda: hook.seen[1:2])[0]
    assert (after.verified, after.signatures) == ({"old": False, "new": True}, 1)
    assert after.event_id != during.event_id
    assert [d["state"] for d in ledger(hooks, who, endpoint)] == ["acked", "acked"]


def test_the_events_feed_pages_hold_each_event_once_with_the_ids_and_bodies_the_receiver_got(
    hooks: RunningStack, receiver: Callable[..., Receiver]
) -> None:
    who = caller("feed")
    hook = receiver([200])
    register(hooks, who, hook)
    for n in range(3):
        export_ready(hooks, who, f"Feed {n}")
    until("the receiver has all three events", lambda: len({s.event_id for s in hook.seen}) == 3)

    pages: list[list[dict[str, Any]]] = []
    after: str | None = None
    for _ in range(10):  # 3 events at 2 a page: 2 pages and an empty one
        params = {"limit": "2", **({"after": after} if after is not None else {})}
        page = requests.get(f"{hooks.api}/events", headers=who, params=params, timeout=10)
        assert page.status_code == 200, page.text
        pages.append(page.json()["events"])
        head, after = page.json()["head"], page.json()["next_cursor"]
        if not pages[-1]:
            break

    assert [len(p) for p in pages] == [2, 1, 0]
    events = [e for p in pages for e in p]
    assert [e["cursor"] for e in events] == ["1", "2", "3"] and head == after == "3"
    ids = [e["id"] for e in events]
    assert len(set(ids)) == 3 and set(ids) == {s.event_id for s in hook.seen}
    # The feed and the webhooks carry the same event: the body a receiver got is the feed's, less its cursor.
    by_id = {s.event_id: s.body for s in hook.seen}
    assert all({k: v for k, v in e.items() if k != "cursor"} == by_id[e["id"]] for e in events)
    assert {e["type"] for e in events} == {"bindery.export.ready"}


def test_a_batchs_ending_reaches_its_subscriber_once_signed_and_is_in_the_events_feed(
    hooks: RunningStack, receiver: Callable[..., Receiver]
) -> None:
    who = caller("batch")
    hook = receiver([200])
    endpoint = register(hooks, who, hook, events=["bindery.batch.done"])
    book = requests.post(
        f"{hooks.api}/books",
        headers=who,
        json={"title": "Both", "manuscript": "# Both\n\nWords.\n"},
        timeout=10,
    )
    assert book.status_code == 201, book.text
    targets = [{"book_id": book.json()["id"], "format": f} for f in ("markdown", "html")]
    made = requests.post(f"{hooks.api}/batches", headers=who, json={"exports": targets}, timeout=10)
    assert made.status_code == 202, made.text
    batch = made.json()["id"]

    acked = delivery_in(hooks, who, endpoint, "acked")

    # Only the batch's ending was subscribed to: its two targets' own endings were not sent.
    assert len(hook.seen) == 1 and hook.seen[0].verified == {"current": True}
    body = hook.seen[0].body
    assert body["id"] == acked["event_id"] == f"{batch}:done" and body["type"] == "bindery.batch.done"
    assert body["data"] == {"batch_id": batch, "status": "done", "targets_total": 2, "targets_done": 2}
    shown = requests.get(f"{hooks.api}/batches/{batch}", headers=who, timeout=10).json()
    assert (shown["status"], shown["targets_done"]) == ("done", 2)

    # The feed holds every event of the caller's, the two targets' and the batch's, and the sent one as sent.
    def whole_feed() -> list[dict[str, Any]] | None:
        events: list[dict[str, Any]] = requests.get(f"{hooks.api}/events", headers=who, timeout=10).json()[
            "events"
        ]
        return events if len(events) >= 3 else None

    feed = until("the feed holds the batch's three events", whole_feed)
    assert sorted(e["type"] for e in feed) == ["bindery.batch.done", *["bindery.export.ready"] * 2]
    assert [{k: v for k, v in e.items() if k != "cursor"} for e in feed if e["id"] == body["id"]] == [body]
