"""The fault matrix: every AWS call the handler paths make, each failed in five ways, then the system is run
to quiescence and held to its promises.

The call points are enumerated from a recording of a clean run, so a call added to the code is covered
without editing this test. Four faults strike before AWS applies the call, through botocore's before-call
hook: a ClientError (500), a throttle, a timeout, and a crash (a BaseException that no `except Exception`
in the code can swallow: the process dies between two calls and the platform retries the event). The fifth
strikes after: the request reaches moto and is applied, then its answer is lost (a before-send hook
registered after moto's own raises ReadTimeoutError), and botocore resends it, as it does in AWS.

`make test` deals the five kinds across the call points: call `at` of the i-th scenario is struck by the
kind (at + i) mod 5, so every call point is struck once and each kind strikes a fifth of every scenario's
points. `make reliability` (BINDERY_MATRIX_EVERY_KIND=1) strikes with every kind at every point, five
times the runs, and publishes those figures.

Besides the five promises at quiescence, two are checked throughout: after every step every ready row's
object exists and every URL a poll returned downloads it; and every answer a caller got is true (a 2xx
means the change is there, a 4xx that nothing changed).
"""

from __future__ import annotations

import contextlib
import json
import os
import types
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3
import botocore.endpoint
import moto.s3.models
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

import bindery.objects
from bindery.objects import ARTIFACT_PREFIX, artifact_key, upload_key
from bindery.states import State
from tests.books.illustrated import picture
from tests.calls import recording
from tests.figures import record
from tests.invariants import _all_items, items_of, keys_of, violations
from tests.unit.conftest import Reply, Stack
from tests.unit.hooks import Hooked, envelope, hooked
from tests.unit.test_events import _events


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


# Faults that strike before the call is applied.
FAULTS: dict[str, Callable[[str], BaseException]] = {
    "client_error": _client_error,
    "throttle": _throttle,
    "timeout": _timeout,
    "crash": _crash,
}
LOST_ANSWER = "applied_then_lost"
IMAGES = [
    ("a.png", picture("PNG", 40, 30, seed=1), "image/png"),
    ("b.gif", picture("GIF", 20, 20, seed=2), "image/gif"),
]
SCENARIOS = (
    "exports", "replacements", "book_delete", "stale", "released", "multipart", "assets", "webhooks",
    "batches",
)  # fmt: skip
HOOK, DOOMED = "https://hooks.example.com/in", "https://doomed.example.com/in"
KINDS = [*sorted(FAULTS), LOST_ANSWER]
EVERY_KIND = os.environ.get("BINDERY_MATRIX_EVERY_KIND") == "1"


def dealt(kind: str, scenario: str, at: int) -> bool:
    """Whether `kind` strikes call `at` of `scenario` this run: always under BINDERY_MATRIX_EVERY_KIND."""
    return EVERY_KIND or KINDS[(at + SCENARIOS.index(scenario)) % len(KINDS)] == kind


@dataclass
class Injector:
    """Strikes at the `at`-th AWS call (counting from 0), once: with `fault` before the call is sent, or
    (`fault` None) by losing the answer to a call that was applied, so that botocore resends it."""

    at: int
    fault: Callable[[str], BaseException] | None
    seen: int = 0
    fired: bool = False
    _armed: bool = False

    def before_call(self, model: Any, **_: Any) -> None:
        index, self.seen = self.seen, self.seen + 1
        if index == self.at and not self.fired:
            if self.fault is not None:
                self.fired = True
                raise self.fault(model.name)
            self._armed = True

    def before_send(self, request: Any, **_: Any) -> None:
        # Registered after moto's own before-send handler: by now the request has been applied.
        if self._armed:
            self._armed, self.fired = False, True
            raise ReadTimeoutError(endpoint_url=request.url)

    def hooks(self) -> list[tuple[str, Callable[..., None]]]:
        return [("before-call", self.before_call), ("before-send", self.before_send)]

    def arm(self, *clients: Any) -> None:
        for client in clients:
            for event, hook in self.hooks():
                client.meta.events.register(event, hook)

    def disarm(self, *clients: Any) -> None:
        for client in clients:
            for event, hook in self.hooks():
                client.meta.events.unregister(event, hook)


def injector(kind: str, at: int) -> Injector:
    return Injector(at, None if kind == LOST_ANSWER else FAULTS[kind])


@dataclass(frozen=True)
class Snapshot:
    """What a caller can see at one instant: the table's items (the attributes the checks compare) and the
    bucket's keys, read through clients of the test's own, which no fault hook reaches."""

    items: dict[tuple[str, str], dict[str, Any]]
    keys: frozenset[str]

    def item(self, pk: str, sk: str) -> dict[str, Any] | None:
        return self.items.get((pk, sk))

    def visible(self) -> dict[str, Any]:
        """The caller-visible facts: each book's revision and cut, each export's state, and the bytes."""
        facts: dict[str, Any] = {"keys": self.keys}
        for (pk, sk), item in self.items.items():
            if sk == "BOOK":
                facts[pk] = (item["revision"]["N"], item["cut"]["S"])
            elif sk.startswith("EXPORT#"):
                facts[f"{pk}/{sk}"] = item["state"]["S"]
        return facts

    def ready_without_object(self) -> list[str]:
        return [
            f"ready export {sk} has no object"
            for (_, sk), item in self.items.items()
            if sk.startswith("EXPORT#")
            and item["state"]["S"] == State.READY.value
            and item.get("path", {}).get("S") not in self.keys
        ]


class Truth:
    def __init__(self, stack: Stack):
        self.stack = stack
        self.dynamodb, self.s3 = boto3.client("dynamodb"), boto3.client("s3")

    def snapshot(self) -> Snapshot:
        # Read as the checker reads (from moto's own table and bucket, in this process), never through the
        # clients the faults strike.
        found = {
            (item["pk"], item["sk"]): {k: _typed(v) for k, v in item.items()}
            for item in items_of(self.stack.store)
            if item["sk"] == "BOOK" or item["sk"].startswith(("EXPORT#", "BATCH#"))
        }
        return Snapshot(found, frozenset(keys_of(self.stack.objects, "")))

    def downloads(self, url: str) -> bool:
        key = artifact_of(url)
        try:
            self.s3.get_object(Bucket=self.stack.exports.settings.bucket, Key=key)["Body"].read()
        except ClientError:
            return False
        return True


def _typed(value: Any) -> Any:
    """A plain value in the shape the snapshot compares (DynamoDB JSON's: {"S": ...}, {"N": ...})."""
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, (int, float)) or hasattr(value, "as_integer_ratio"):
        return {"N": str(value)}
    return value


def artifact_of(url: str) -> str:
    """The artifact key a presigned download URL names (path-style or virtual-hosted)."""
    path = unquote(urlsplit(url).path)
    return path[path.index(ARTIFACT_PREFIX) :]


Claim = Callable[[Snapshot, Reply], list[str]]


@dataclass
class Run:
    stack: Stack
    key_answers: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    accepted: set[str] = field(default_factory=set)  # every export id a 202 answered with
    poll_writes: list[str] = field(default_factory=list)
    untrue: list[str] = field(default_factory=list)  # answers that said what did not happen, and steps after
    # which a ready row had no object
    truth: Truth | None = None
    hooks: Hooked | None = None
    _seen: Snapshot | None = None

    def attempt(self, act: Callable[[], Any], tries: int = 3, claim: Claim | None = None) -> Any:
        """An event the platform retries: an HTTP client retrying a 5xx or an error, SQS redelivering.
        After each try, every ready row must have its object. With `claim`, each answer is checked against
        what it says: `claim(snapshot, reply)` names what a 2xx says and is not so, and a 4xx must leave
        every caller-visible fact as it was."""
        for _ in range(tries):
            before = self._seen if self._seen is not None else self._step()
            try:
                result = act()
            except (Exception, Crash):
                self._step()
                continue
            after = self._step()
            status = getattr(result, "status", 200)
            body = getattr(result, "body", None)
            if status == 202 and isinstance(body, dict) and "id" in body and "book_id" in body:  # an export
                self.accepted.add(result.body["id"])
            if claim is not None and after is not None:
                if 200 <= status < 300:
                    self.untrue += [f"{status} although {v}" for v in claim(after, result)]
                elif 400 <= status < 500 and before is not None and after.visible() != before.visible():
                    self.untrue.append(f"{status} {result.body} although something changed")
            if status < 500:
                return result
        return None

    def _step(self) -> Snapshot | None:
        """What the system looks like after a step (also what the next step starts from: nothing else
        runs between two steps)."""
        if self.truth is None:
            return None
        self._seen = self.truth.snapshot()
        self.untrue += self._seen.ready_without_object()
        return self._seen

    # ---- what each answer claims ----------------------------------------------------------------------

    @staticmethod
    def _book_exists(now: Snapshot, reply: Reply) -> list[str]:
        book = now.item(f"BOOK#{reply.body['id']}", "BOOK")
        if book is None or int(book["revision"]["N"]) != reply.body["revision"]:
            return [f"book {reply.body['id']} is not there"]
        return []

    @staticmethod
    def _book_gone(book: str) -> Claim:
        return lambda now, _: [f"book {book} is still there"] if now.item(f"BOOK#{book}", "BOOK") else []

    @staticmethod
    def _export_exists(book: str) -> Claim:
        def claim(now: Snapshot, reply: Reply) -> list[str]:
            found = now.item(f"BOOK#{book}", f"EXPORT#{reply.body['id']}")
            return [] if found is not None else [f"export {reply.body['id']} does not exist"]

        return claim

    @staticmethod
    def _export_ended(book: str, export_id: str) -> Claim:
        def claim(now: Snapshot, _: Reply) -> list[str]:
            row = now.item(f"BOOK#{book}", f"EXPORT#{export_id}")
            state = row["state"]["S"] if row is not None else "gone"
            return [f"export {export_id} is still {state}"] if state in ("pending", "ready") else []

        return claim

    @staticmethod
    def _revision(book: str) -> Claim:
        def claim(now: Snapshot, reply: Reply) -> list[str]:
            current = now.item(f"BOOK#{book}", "BOOK")
            if current is None or int(current["revision"]["N"]) != reply.body["revision"]:
                return [f"book {book} is not at revision {reply.body['revision']}"]
            return []

        return claim

    def _link_downloads(self, _: Snapshot, reply: Reply) -> list[str]:
        url = reply.body.get("download_url")
        if url and self.truth is not None and not self.truth.downloads(url):
            return [f"its download URL leads to nothing ({url.split('?')[0]})"]
        return []

    # ---- the workload ---------------------------------------------------------------------------------

    def workload(self, scenario: str | None = None) -> None:
        """One scenario, or all of them in turn. Each starts from books of its own, so a fault matrix run
        can replay only the scenario its call point belongs to."""
        for name in [scenario] if scenario else SCENARIOS:
            getattr(self, f"_{name}")()

    def _exports(self) -> None:
        """Books, keyed and keyless submits, a failing build, a cancel, builds, a poll, a revoke, expiry."""
        s = self.stack
        reply = self.attempt(
            lambda: s.http("POST", "/books", body={"title": "Faults", "manuscript": "# A\n\nx\n"}),
            claim=self._book_exists,
        )
        if reply is None or reply.status != 201:
            return
        book = reply.body["id"]
        empty = self.attempt(
            lambda: s.http("POST", "/books", body={"title": "Empty", "manuscript": ""}),
            claim=self._book_exists,
        )
        ids = []
        for key in ("key-1", "key-1", None):
            answer = self.attempt(
                lambda k=key: s.submit(book, "html", key=k), claim=self._export_exists(book)
            )
            if answer is not None and answer.status == 202:
                ids.append(answer.body["id"])
                if key:
                    self.key_answers[key].add(answer.body["id"])
        if empty is not None and empty.status == 201:
            failing = self.attempt(
                lambda: s.submit(empty.body["id"], "markdown"), claim=self._export_exists(empty.body["id"])
            )
            if failing is not None and failing.status == 202:
                self.attempt(lambda: s.build(empty.body["id"], failing.body["id"]))
        if len(ids) >= 2:
            self.attempt(
                lambda: s.http("DELETE", f"/books/{book}/exports/{ids[-1]}"),
                claim=self._export_ended(book, ids[-1]),
            )
        copied = self.attempt(
            lambda: s.submit(book, "markdown"), claim=self._export_exists(book)
        )  # server-side copy
        if copied is not None and copied.status == 202:
            self.attempt(lambda: self._build_until_done(book, copied.body["id"]))
        for export_id in ids[:1]:
            self.attempt(lambda e=export_id: self._build_until_done(book, e))
            with recording(s.store.client, s.objects.client) as calls:
                self.attempt(lambda e=export_id: s.poll(book, e), claim=self._link_downloads)
            self.poll_writes += calls.writes()
        if copied is not None and copied.status == 202:
            # Revoking a ready link deletes its bytes before the answer.
            self.attempt(
                lambda: s.http("DELETE", f"/books/{book}/exports/{copied.body['id']}"),
                claim=self._export_ended(book, copied.body["id"]),
            )
        s.clock.advance(s.exports.settings.link_ttl_seconds + 1)
        self.attempt(s.gc)
        self.attempt(s.sweep)

    def _replacements(self) -> None:
        """A manuscript replaced with If-Match and without."""
        s = self.stack
        book = self._new_book("Revised", "# A\n\nx\n")
        if book is None:
            return
        self.attempt(
            lambda: s.http(
                "PUT",
                f"/books/{book}/manuscript",
                body={"manuscript": "# B\n\ny\n"},
                headers={"If-Match": '"1"'},
            ),
            claim=self._revision(book),
        )
        self.attempt(
            lambda: s.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "# C\n\nz\n"}),
            claim=self._revision(book),
        )

    def _book_delete(self) -> None:
        """A book with one ready export and one pending, deleted: both end, and the bytes go at once."""
        s = self.stack
        book = self._new_book("Doomed", "# D\n\nd\n")
        if book is None:
            return
        ready = self.attempt(lambda: s.submit(book, "markdown"), claim=self._export_exists(book))
        if ready is not None and ready.status == 202:
            self.attempt(lambda: self._build_until_done(book, ready.body["id"]))
        self.attempt(lambda: s.submit(book, "html"), claim=self._export_exists(book))
        self.attempt(lambda: s.http("DELETE", f"/books/{book}"), claim=self._book_gone(book))

    def _stale(self) -> None:
        """An export nobody builds, and one whose worker claimed it and died: past their bounds the stale
        sweep ends the first (queue_timeout) and takes the second back from its lost worker."""
        s = self.stack
        book = self._new_book("Stale", "# S\n\ns\n")
        if book is None:
            return
        self.attempt(lambda: s.submit(book, "html"), claim=self._export_exists(book))
        lost = self.attempt(lambda: s.submit(book, "markdown"), claim=self._export_exists(book))
        if lost is not None and lost.status == 202:
            export_id = lost.body["id"]
            path = artifact_key(book, export_id, "died")
            self.attempt(lambda: s.store.claim_build(book, export_id, path, s.clock()))
        settings = s.exports.settings
        s.clock.advance(
            max(settings.queue_grace_seconds, settings.lease_seconds + settings.retry_grace_seconds) + 1
        )
        self.attempt(s.sweep)

    def _released(self) -> None:
        """A build whose storage fails under it: the worker gives its lease back (release_claim) and asks
        for a redelivery, which builds it. (The failure is the workload's own, so the clean run records the
        release as a call point, and the faults strike it too.)"""
        s = self.stack
        book = self._new_book("Released", "# R\n\nr\n")
        if book is None:
            return
        export = self.attempt(lambda: s.submit(book, "markdown"), claim=self._export_exists(book))
        if export is None or export.status != 202:
            return
        with _scripted(s.objects.client, "CopyObject", _client_error):
            self.attempt(lambda: s.build(book, export.body["id"]), tries=1)
        self.attempt(lambda: self._build_until_done(book, export.body["id"]))

    def _multipart(self) -> None:
        """A book whose html goes up in parts. One build's part fails: its writer aborts the upload and the
        worker gives the build back. The next worker dies between two parts, so its upload stays open until
        the GC, past the lease, aborts it. The third build goes through. (Parts are small here: see
        `_small_parts`.)"""
        s = self.stack
        book = self._new_book("Parts", MULTIPART_MANUSCRIPT)
        if book is None:
            return
        export = self.attempt(lambda: s.submit(book, "html"), claim=self._export_exists(book))
        if export is None or export.status != 202:
            return
        export_id = export.body["id"]
        with _scripted(s.objects.client, "UploadPart", _client_error):
            self.attempt(lambda: s.build(book, export_id), tries=1)
        with _scripted(s.objects.client, "UploadPart", _crash, skip=1):
            self.attempt(lambda: s.build(book, export_id), tries=1)
        settings = s.exports.settings
        s.clock.advance(settings.lease_seconds + settings.retry_grace_seconds + 1)
        self.attempt(s.gc)
        self.attempt(lambda: self._build_until_done(book, export_id))

    def _assets(self) -> None:
        """Two images adopted, the cover and an author set, an html export built with them, the other image
        deleted, and the GC past the lease retiring its bytes. (A replacement retires bytes the same way,
        and a deleted book's images go by the purge: tests/unit/test_assets.py.)"""
        s = self.stack
        book = self._new_book("Pictures", "# P\n\n![a](a.png)\n\n![b](b.gif)\n")
        if book is None:
            return
        for name, data, content_type in IMAGES:
            body = {"name": name, "content_type": content_type, "size": len(data)}
            ticket = self.attempt(lambda b=body: s.http("POST", f"/books/{book}/assets", body=b))
            if ticket is None or ticket.status != 201:
                continue
            # The caller's PUT to the presigned URL, through a client no fault reaches: it is not Bindery's.
            key = upload_key(book, ticket.body["upload_id"])
            boto3.client("s3").put_object(
                Bucket=s.exports.settings.bucket, Key=key, Body=data, ContentType=content_type
            )
            adopt = {"upload_id": ticket.body["upload_id"]}
            self.attempt(
                lambda n=name, a=adopt: s.http("PUT", f"/books/{book}/assets/{n}", body=a),
                claim=self._revision(book),
            )
        edit = {"metadata": {"cover": "a.png", "authors": ["A. Painter"]}}
        self.attempt(lambda: s.http("PATCH", f"/books/{book}", body=edit), claim=self._revision(book))
        export = self.attempt(lambda: s.submit(book, "html"), claim=self._export_exists(book))
        if export is not None and export.status == 202:
            self.attempt(lambda: self._build_until_done(book, export.body["id"]))
        self.attempt(lambda: s.http("DELETE", f"/books/{book}/assets/b.gif"))
        s.clock.advance(s.exports.settings.lease_seconds + 1)
        self.attempt(s.gc)

    def _webhooks(self) -> None:
        """Two endpoints, one answering 500 and then 200, the other deleted with a delivery waiting; an
        export built; its event ingested twice (the bus redelivers); the sender and the sweep run until
        nothing is due; then an ended delivery redelivered by hand."""
        s = self.stack
        h = self.hooks = hooked(s)
        h.receiver.answer(HOOK, 500, 200)
        h.receiver.answer(DOOMED, 500)
        endpoints = []
        for url in (HOOK, DOOMED):
            body = {"url": url, "events": ["bindery.export.ready", "bindery.export.failed"]}
            made = self.attempt(
                lambda b=body: s.http("POST", "/webhooks", body=b), claim=self._endpoint_exists
            )
            if made is not None and made.status == 201:
                endpoints.append(made.body["id"])
        book = self._new_book("Hooks", "# H\n\nh\n")
        if book is None or len(endpoints) < 2:
            return
        export = self.attempt(lambda: s.submit(book, "markdown"), claim=self._export_exists(book))
        if export is None or export.status != 202:
            return
        self.attempt(lambda: self._build_until_done(book, export.body["id"]))
        for _ in range(2):
            for kind, detail in [e for e in _events(s) if e[1]["book_id"] == book]:
                message = envelope(kind, detail, h.happened.setdefault(detail["id"], s.clock()))
                self.attempt(lambda m=message: h.d.ingest(m))
        self._send_due(h)
        self.attempt(
            lambda: s.http("DELETE", f"/webhooks/{endpoints[1]}"), claim=self._endpoint_gone(endpoints[1])
        )
        for delay in s.exports.settings.webhook_delays[1:4]:
            s.clock.advance(delay)
            self.attempt(h.d.sweep)
            self._send_due(h)
        # Read as the checker reads, past the faults: the caller knows its delivery's id from the ledger.
        for d in _all_items(s.store, ("DLV#",)):
            if d["pk"] == f"HOOK#{endpoints[0]}" and d["state"] == "acked":
                seq = int(d["sk"].removeprefix("DLV#"))
                self.attempt(
                    lambda q=seq: s.http("POST", f"/webhooks/{endpoints[0]}/deliveries/{q}/redeliver")
                )
        s.clock.advance(s.exports.settings.webhook_lease_seconds)
        self.attempt(h.d.sweep)
        self._send_due(h)

    def _batches(self) -> None:
        """A keyed batch of two targets on two books (one fails: partial, and its bundle is built), read; a
        second batch of two, one built, then cancelled: its pending target cancelled, its ready one's link
        ended."""
        s = self.stack
        book = self._new_book("Catalogue", "# C\n\nc\n")
        empty = self._new_book("Blank", "")
        if book is None or empty is None:
            return
        targets = [{"book_id": book, "format": "markdown"}, {"book_id": empty, "format": "markdown"}]
        first = self.attempt(
            lambda: s.http("POST", "/batches", body={"exports": targets}, headers={"Idempotency-Key": "b-1"}),
            claim=self._batch_exists,
        )
        second = self.attempt(
            lambda: s.http("POST", "/batches", body={"exports": targets[:2]}), claim=self._batch_exists
        )
        for made in (first, second):
            if made is None or made.status != 202:
                continue
            if made is first:
                self.key_answers["b-1"].add(made.body["id"])
            self.accepted |= {t["export_id"] for t in made.body["targets"]}
            for t in made.body["targets"][: 2 if made is first else 1]:
                self.attempt(lambda t=t: self._build_until_done(t["book_id"], t["export_id"]))
        if first is not None and first.status == 202:
            with recording(s.store.client, s.objects.client) as calls:  # the read writes nothing
                self.attempt(lambda: s.http("GET", f"/batches/{first.body['id']}"))
            self.poll_writes += calls.writes()
        if second is not None and second.status == 202:
            self.attempt(
                lambda: s.http("DELETE", f"/batches/{second.body['id']}"),
                claim=self._batch_status(second.body["id"], "cancelled"),
            )

    @staticmethod
    def _batch_exists(now: Snapshot, reply: Reply) -> list[str]:
        found = now.item("CALLER#user-alice", f"BATCH#{reply.body['id']}")
        return [] if found is not None else [f"batch {reply.body['id']} does not exist"]

    @staticmethod
    def _batch_status(batch_id: str, status: str) -> Claim:
        def claim(now: Snapshot, _: Reply) -> list[str]:
            found = now.item("CALLER#user-alice", f"BATCH#{batch_id}")
            state = found["state"]["S"] if found is not None else "gone"
            return [] if state == status else [f"batch {batch_id} is {state}, not {status}"]

        return claim

    def _endpoints(self) -> set[str]:
        """The active endpoints, read from moto's own table: no call a fault could strike."""
        return {
            i["endpoint_id"]
            for i in _all_items(self.stack.store, ("HOOK#",))
            if i["pk"].startswith("CALLER#") and i["state"] == "active"
        }

    def _endpoint_exists(self, _: Snapshot, reply: Reply) -> list[str]:
        return [] if reply.body["id"] in self._endpoints() else [f"endpoint {reply.body['id']} is not there"]

    def _endpoint_gone(self, endpoint_id: str) -> Claim:
        return lambda *_: (
            [f"endpoint {endpoint_id} is still active"] if endpoint_id in self._endpoints() else []
        )

    def _send_due(self, h: Hooked) -> int:
        """Send every delivery the queue holds, as the sender would; how many it sent."""
        sent = 0
        while keys := h.keys.drain():
            for endpoint_id, seq in keys:
                self.attempt(lambda e=endpoint_id, q=seq: h.d.send(e, q))
                sent += 1
        return sent

    def _new_book(self, title: str, manuscript: str) -> str | None:
        """A book of the scenario's own, or None when its create never got a 201 (the scenario stops)."""
        made = self.attempt(
            lambda: self.stack.http("POST", "/books", body={"title": title, "manuscript": manuscript}),
            claim=self._book_exists,
        )
        return str(made.body["id"]) if made is not None and made.status == 201 else None

    def _build_until_done(self, book: str, export_id: str) -> Any:
        result = self.stack.build(book, export_id)
        if result["batchItemFailures"]:
            raise RuntimeError("the queue will redeliver")
        return result

    def quiesce(self) -> None:
        """Redeliver what is still pending, move the clock past every bound, and run the sweeps and the
        GC, until a round finds nothing to build and leaves the sweeps nothing to do: then the next round
        would find the same."""
        s = self.stack
        settings = s.exports.settings
        for _ in range(settings.max_attempts + 3):
            pending = [row for row in s.store.all_exports() if row.state == "pending"]
            for row in pending:
                self.attempt(lambda r=row: s.build(r.book_id, r.id))
            s.clock.advance(
                max(settings.lease_seconds + settings.retry_grace_seconds, settings.queue_grace_seconds)
                + settings.link_ttl_seconds
                + 1
            )
            swept, collected = self.attempt(s.sweep), self.attempt(s.gc)
            idle = not pending and _swept_nothing(swept) and _collected_nothing(collected, settings)
            if self.hooks is not None:  # the webhook sweep, every minute, and the sends it queues
                resent = self.attempt(self.hooks.d.sweep)
                idle = idle and resent is not None and not any(resent.values())
                idle = self._send_due(self.hooks) == 0 and idle
            if idle:
                return


def _swept_nothing(result: dict[str, Any] | None) -> bool:
    """The stale sweep's answer says it ended, refused, deferred and settled nothing (None: it failed)."""
    return result is not None and not any(result.values())


def _collected_nothing(result: dict[str, Any] | None, settings: Any) -> bool:
    """The GC's answer says it did nothing, left nothing, and its reconciliation read the last page."""
    if result is None or result["left_for_next_run"] or result["failed_chores"]:
        return False
    done = ("expired", "unlinked", "unlink_failures", "books_purged", "cuts_retired", "chore_failures")
    return not any(result[k] for k in (*done, "orphans_deleted", "uploads_aborted")) and (
        result["orphans_scanned"] < settings.reconcile_batch
    )


@pytest.fixture(autouse=True)
def _no_retry_sleep(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """botocore backs off before each resend; on moto and a fake clock there is nothing to wait for."""
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda _: None))
    yield


@contextlib.contextmanager
def _scripted(client: Any, op: str, fault: Callable[[str], BaseException], skip: int = 0) -> Iterator[None]:
    """The workload's own failure: the (`skip`+1)-th call to `op` on `client` fails with `fault`, once."""
    seen = {"calls": 0}

    def strike(model: Any, **_: Any) -> None:
        if model.name == op:
            seen["calls"] += 1
            if seen["calls"] == skip + 1:
                raise fault(op)

    client.meta.events.register("before-call", strike)
    try:
        yield
    finally:
        client.meta.events.unregister("before-call", strike)


# A part of 8 KiB on both sides (Bindery's writer and moto's floor, 5 MiB each in earnest), so that a 40 KiB
# book's html goes up as a multipart upload of several parts and the matrix strikes each of its calls.
SMALL_PART = 8 * 1024
MULTIPART_MANUSCRIPT = "".join(
    f"# Part {n}\n\n" + "Many words, each in its place. " * 130 + "\n\n" for n in range(10)
)


@pytest.fixture(autouse=True)
def _small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bindery.objects, "PART_BYTES", SMALL_PART)
    monkeypatch.setattr(moto.s3.models, "S3_UPLOAD_PART_MIN_SIZE", SMALL_PART)


def _checked_run(stack: Stack) -> Run:
    run = Run(stack, truth=Truth(stack))
    run.workload()
    run.quiesce()
    return run


def _found(stack: Stack, run: Run) -> list[str]:
    return run.untrue + violations(
        stack.store,
        stack.objects,
        key_answers=run.key_answers,
        poll_writes=run.poll_writes,
        accepted=run.accepted,
    )


_POINTS: dict[str, list[tuple[str, str]]] = {}


def _scenario_points(stack_factory: Callable[[], Any], scenario: str) -> list[tuple[str, str]]:
    """A scenario's call points, recorded once per process: the clean run is the same for every kind."""
    if scenario not in _POINTS:
        with stack_factory() as probe:
            _POINTS[scenario] = _call_points(probe, scenario)
    return _POINTS[scenario]


def _call_points(stack: Stack, scenario: str | None = None) -> list[tuple[str, str]]:
    with recording(stack.store.client, stack.objects.client) as calls:
        run = Run(stack, truth=Truth(stack))
        run.workload(scenario)
    run.quiesce()
    assert _found(stack, run) == []
    return calls.made


def test_the_clean_run_keeps_every_promise_and_tells_only_the_truth(stack: Stack) -> None:
    points = _call_points(stack)
    assert len(points) > 60
    # Every S3 call a build or the GC can make is among the points the matrix strikes.
    multipart = {"CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "AbortMultipartUpload"}
    reached = {op for _, op in points}
    assert multipart | {"ListMultipartUploads", "CopyObject", "PutObject"} <= reached
    assert [op for _, op in points].count("AbortMultipartUpload") == 2  # the writer's and the GC's
    # The webhooks scenario went all the way: the kept endpoint's delivery acked (and acked again when it was
    # redelivered), after a 500; the deleted endpoint's withdrawn.
    deliveries = sorted(
        (i["state"], len(json.loads(i["attempts"]))) for i in _all_items(stack.store, ("DLV#",))
    )
    assert deliveries == [("acked", 3), ("withdrawn", 1)]


def test_every_call_point_is_dealt_to_one_kind_and_every_kind_to_a_fifth_of_each_scenario() -> None:
    for scenario in SCENARIOS:
        takers = [[kind for kind in KINDS if dealt(kind, scenario, at)] for at in range(40)]
        assert all(len(t) == (len(KINDS) if EVERY_KIND else 1) for t in takers), scenario
        assert {k: sum(k in t for t in takers) for k in KINDS} == {
            k: 40 // (1 if EVERY_KIND else 5) for k in KINDS
        }


@pytest.mark.slow(45)
@pytest.mark.parametrize("kind", KINDS)
def test_a_fault_at_every_call_point_loses_nothing(stack_factory: Callable[[], Any], kind: str) -> None:
    failures: list[str] = []
    tried = fired = points_seen = least = 0
    # BINDERY_MATRIX_SCENARIOS=webhooks,stale runs those alone: for working on one path.
    chosen = os.environ.get("BINDERY_MATRIX_SCENARIOS")
    for scenario in chosen.split(",") if chosen else SCENARIOS:
        points = _scenario_points(stack_factory, scenario)
        points_seen += len(points)
        least += len(points) if EVERY_KIND else len(points) // len(KINDS)
        for at, (service, op) in enumerate(points):
            if not dealt(kind, scenario, at):
                continue
            where = f"{kind} at call {at} of {scenario} ({service} {op})"
            with stack_factory() as stack:
                strike = injector(kind, at)
                clients = (stack.store.client, stack.objects.client)
                strike.arm(*clients)
                run = Run(stack, truth=Truth(stack))
                run.workload(scenario)
                strike.disarm(*clients)
                run.quiesce()
                tried += 1
                fired += strike.fired
                if not strike.fired:
                    failures.append(f"{where}: the fault never struck")
                failures += [f"{where}: {v}" for v in _found(stack, run)]
    print(
        f"\nfault matrix: {kind}: {tried} of {points_seen} call points tried, {fired} struck, "
        f"{len(failures)} violations"
    )
    record(f"fault matrix: {kind}: call points tried", tried)
    record(f"fault matrix: {kind}: faults that struck", fired)
    record(f"fault matrix: {kind}: violations (untrue answers and broken promises)", len(failures))
    # At least a fifth of each scenario's points were dealt to this kind (all of them, under EVERY_KIND).
    assert (points_seen > 300 or chosen) and tried >= least
    assert failures == []
