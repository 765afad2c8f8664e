"""What must hold after a fault: the promises of tests/invariants.py at quiescence, and two throughout.

After every step, every ready row's object exists and every URL a poll returned downloads it; and every
answer a caller got is true (a 2xx means the change is there, a 4xx that nothing changed). A `Witness`
checks both as the workload goes, through clients of the test's own that no fault reaches, and `found()`
adds the twelve promises once the system is quiescent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3
from botocore.exceptions import ClientError

from bindery.objects import ARTIFACT_PREFIX
from bindery.states import State
from tests.faults.injector import Crash
from tests.invariants import _all_items, items_of, keys_of, violations
from tests.unit.conftest import Reply, Stack


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
        self._s3: Any = None  # made at the first download: most runs never check one (a client costs ~10 ms)

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
            if self._s3 is None:
                self._s3 = boto3.client("s3")
            self._s3.get_object(Bucket=self.stack.exports.settings.bucket, Key=key)["Body"].read()
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


# What a 2xx answer says, checked against the snapshot after it: the ways in which it is not so.
Claim = Callable[[Snapshot, Reply], list[str]]


def book_exists(now: Snapshot, reply: Reply) -> list[str]:
    book = now.item(f"BOOK#{reply.body['id']}", "BOOK")
    if book is None or int(book["revision"]["N"]) != reply.body["revision"]:
        return [f"book {reply.body['id']} is not there"]
    return []


def book_gone(book: str) -> Claim:
    return lambda now, _: [f"book {book} is still there"] if now.item(f"BOOK#{book}", "BOOK") else []


def export_exists(book: str) -> Claim:
    def claim(now: Snapshot, reply: Reply) -> list[str]:
        found = now.item(f"BOOK#{book}", f"EXPORT#{reply.body['id']}")
        return [] if found is not None else [f"export {reply.body['id']} does not exist"]

    return claim


def export_ended(book: str, export_id: str) -> Claim:
    def claim(now: Snapshot, _: Reply) -> list[str]:
        row = now.item(f"BOOK#{book}", f"EXPORT#{export_id}")
        state = row["state"]["S"] if row is not None else "gone"
        return [f"export {export_id} is still {state}"] if state in ("pending", "ready") else []

    return claim


def revision(book: str) -> Claim:
    def claim(now: Snapshot, reply: Reply) -> list[str]:
        current = now.item(f"BOOK#{book}", "BOOK")
        if current is None or int(current["revision"]["N"]) != reply.body["revision"]:
            return [f"book {book} is not at revision {reply.body['revision']}"]
        return []

    return claim


def batch_exists(now: Snapshot, reply: Reply) -> list[str]:
    found = now.item("CALLER#user-alice", f"BATCH#{reply.body['id']}")
    return [] if found is not None else [f"batch {reply.body['id']} does not exist"]


def batch_status(batch_id: str, status: str) -> Claim:
    def claim(now: Snapshot, _: Reply) -> list[str]:
        found = now.item("CALLER#user-alice", f"BATCH#{batch_id}")
        state = found["state"]["S"] if found is not None else "gone"
        return [] if state == status else [f"batch {batch_id} is {state}, not {status}"]

    return claim


def _endpoints(stack: Stack) -> set[str]:
    """The active endpoints, read from moto's own table: no call a fault could strike."""
    return {
        i["endpoint_id"]
        for i in _all_items(stack.store, ("HOOK#",))
        if i["pk"].startswith("CALLER#") and i["state"] == "active"
    }


def endpoint_exists(stack: Stack) -> Claim:
    def claim(_: Snapshot, reply: Reply) -> list[str]:
        return [] if reply.body["id"] in _endpoints(stack) else [f"endpoint {reply.body['id']} is not there"]

    return claim


def endpoint_gone(stack: Stack, endpoint_id: str) -> Claim:
    return lambda *_: [f"endpoint {endpoint_id} is still active"] if endpoint_id in _endpoints(stack) else []


@dataclass
class Witness:
    """Every answer the callers got, and whether it was true. Without `truth` it only keeps count of what
    was answered (the keys, the accepted exports, the polls' writes), and checks nothing as it goes."""

    stack: Stack
    truth: Truth | None = None
    key_answers: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    accepted: set[str] = field(default_factory=set)  # every export id a 202 answered with
    poll_writes: list[str] = field(default_factory=list)
    untrue: list[str] = field(default_factory=list)  # answers that said what did not happen, and steps after
    # which a ready row had no object
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

    def link_downloads(self, _: Snapshot, reply: Reply) -> list[str]:
        """A claim: the download URL the answer carries leads to the export's bytes."""
        url = reply.body.get("download_url")
        if url and self.truth is not None and not self.truth.downloads(url):
            return [f"its download URL leads to nothing ({url.split('?')[0]})"]
        return []

    def found(self) -> list[str]:
        """Every untrue answer, and every promise broken now (call it once the system is quiescent)."""
        return self.untrue + violations(
            self.stack.store,
            self.stack.objects,
            key_answers=self.key_answers,
            poll_writes=self.poll_writes,
            accepted=self.accepted,
        )
