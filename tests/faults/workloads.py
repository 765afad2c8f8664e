"""The ten workloads the fault matrix strikes: each a scenario of its own, from books of its own, so that a
run can replay only the scenario a call point belongs to; and `Run`, which drives them and then the
system to quiescence.

Every call a workload makes goes through `Run.attempt` (the platform's retry, and the witness's check of
the answer: tests/faults/oracle.py), so a fault at any call point meets the code's own recovery.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import boto3

from bindery.objects import ARTIFACT_PREFIX, Objects, artifact_key, upload_key
from bindery.states import State
from bindery.storage import Store
from tests.books.illustrated import picture
from tests.calls import recording
from tests.faults import oracle
from tests.faults.injector import client_error, crash, scripted
from tests.faults.oracle import Claim, Truth, Witness
from tests.invariants import _all_items
from tests.services import wired
from tests.unit.conftest import Stack
from tests.unit.hooks import Hooked, envelope, hooked
from tests.unit.test_events import _events

IMAGES = [
    ("a.png", picture("PNG", 40, 30, seed=1), "image/png"),
    ("b.gif", picture("GIF", 20, 20, seed=2), "image/gif"),
]
HOOK, DOOMED = "https://hooks.example.com/in", "https://doomed.example.com/in"
# A part of 8 KiB on both sides (Bindery's writer and moto's floor, 8 and 5 MiB in earnest), so that a 40 KiB
# book's html goes up as a multipart upload of several parts and the matrix strikes each of its calls.
SMALL_PART = 8 * 1024
MULTIPART_MANUSCRIPT = "".join(
    f"# Part {n}\n\n" + "Many words, each in its place. " * 130 + "\n\n" for n in range(10)
)


class Run:
    """One run of the workloads on one stack, and what its callers were answered (`witness`). With
    `truth`, every answer is checked as it comes (tests/faults/oracle.py)."""

    def __init__(self, stack: Stack, truth: Truth | None = None):
        self.stack = stack
        self.witness = Witness(stack, truth)
        self.hooks: Hooked | None = None  # the webhooks scenario's endpoints, for quiescence to drain

    def attempt(self, act: Callable[[], Any], tries: int = 3, claim: Claim | None = None) -> Any:
        return self.witness.attempt(act, tries, claim)

    def workload(self, scenario: str | None = None) -> None:
        """One scenario, or all of them in turn."""
        for name in [scenario] if scenario else SCENARIOS:
            WORKLOADS[name](self)

    def new_book(self, title: str, manuscript: str) -> str | None:
        """A book of the scenario's own, or None when its create never got a 201 (the scenario stops)."""
        made = self.attempt(
            lambda: self.stack.http("POST", "/books", body={"title": title, "manuscript": manuscript}),
            claim=oracle.book_exists,
        )
        return str(made.body["id"]) if made is not None and made.status == 201 else None

    def build_until_done(self, book: str, export_id: str) -> Any:
        result = self.stack.build(book, export_id)
        if result["batchItemFailures"]:
            raise RuntimeError("the queue will redeliver")
        return result

    def send_due(self, h: Hooked) -> int:
        """Send every delivery the queue holds, as the sender would; how many it sent."""
        sent = 0
        while keys := h.keys.drain():
            for endpoint_id, seq in keys:
                self.attempt(lambda e=endpoint_id, q=seq: h.d.send(e, q))
                sent += 1
        return sent

    def quiesce(self) -> None:
        """Redeliver what is still pending, move the clock past every bound, and run the sweeps and the
        GC, until a round finds nothing to build and leaves the sweeps nothing to do: then the next round
        would find the same."""
        s = self.stack
        settings = s.exports.settings
        for _ in range(settings.max_attempts + 3):
            pending = [row for row in s.store.exports.all_exports() if row.state == "pending"]
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
                idle = self.send_due(self.hooks) == 0 and idle
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


# ---- the ten --------------------------------------------------------------------------------------------


def exports(run: Run) -> None:
    """Books, keyed and keyless submits, a failing build, a cancel, builds, a poll, a revoke, expiry."""
    s, w = run.stack, run.witness
    reply = run.attempt(
        lambda: s.http("POST", "/books", body={"title": "Faults", "manuscript": "# A\n\nx\n"}),
        claim=oracle.book_exists,
    )
    if reply is None or reply.status != 201:
        return
    book = reply.body["id"]
    empty = run.attempt(
        lambda: s.http("POST", "/books", body={"title": "Empty", "manuscript": ""}),
        claim=oracle.book_exists,
    )
    ids = []
    for key in ("key-1", "key-1", None):
        answer = run.attempt(lambda k=key: s.submit(book, "html", key=k), claim=oracle.export_exists(book))
        if answer is not None and answer.status == 202:
            ids.append(answer.body["id"])
            if key:
                w.key_answers[key].add(answer.body["id"])
    if empty is not None and empty.status == 201:
        failing = run.attempt(
            lambda: s.submit(empty.body["id"], "markdown"), claim=oracle.export_exists(empty.body["id"])
        )
        if failing is not None and failing.status == 202:
            run.attempt(lambda: s.build(empty.body["id"], failing.body["id"]))
    if len(ids) >= 2:
        run.attempt(
            lambda: s.http("DELETE", f"/books/{book}/exports/{ids[-1]}"),
            claim=oracle.export_ended(book, ids[-1]),
        )
    copied = run.attempt(
        lambda: s.submit(book, "markdown"), claim=oracle.export_exists(book)
    )  # server-side copy
    if copied is not None and copied.status == 202:
        run.attempt(lambda: run.build_until_done(book, copied.body["id"]))
    for export_id in ids[:1]:
        run.attempt(lambda e=export_id: run.build_until_done(book, e))
        with recording(s.store.client, s.objects.client) as calls:
            run.attempt(lambda e=export_id: s.poll(book, e), claim=w.link_downloads)
        w.poll_writes += calls.writes()
    if copied is not None and copied.status == 202:
        # Revoking a ready link deletes its bytes before the answer.
        run.attempt(
            lambda: s.http("DELETE", f"/books/{book}/exports/{copied.body['id']}"),
            claim=oracle.export_ended(book, copied.body["id"]),
        )
    s.clock.advance(s.exports.settings.link_ttl_seconds + 1)
    run.attempt(s.gc)
    run.attempt(s.sweep)


def replacements(run: Run) -> None:
    """A manuscript replaced with If-Match and without."""
    s = run.stack
    book = run.new_book("Revised", "# A\n\nx\n")
    if book is None:
        return
    run.attempt(
        lambda: s.http(
            "PUT",
            f"/books/{book}/manuscript",
            body={"manuscript": "# B\n\ny\n"},
            headers={"If-Match": '"1"'},
        ),
        claim=oracle.revision(book),
    )
    run.attempt(
        lambda: s.http("PUT", f"/books/{book}/manuscript", body={"manuscript": "# C\n\nz\n"}),
        claim=oracle.revision(book),
    )


def book_delete(run: Run) -> None:
    """A book with one ready export and one pending, deleted: both end, and the bytes go at once."""
    s = run.stack
    book = run.new_book("Doomed", "# D\n\nd\n")
    if book is None:
        return
    ready = run.attempt(lambda: s.submit(book, "markdown"), claim=oracle.export_exists(book))
    if ready is not None and ready.status == 202:
        run.attempt(lambda: run.build_until_done(book, ready.body["id"]))
    run.attempt(lambda: s.submit(book, "html"), claim=oracle.export_exists(book))
    run.attempt(lambda: s.http("DELETE", f"/books/{book}"), claim=oracle.book_gone(book))


def stale(run: Run) -> None:
    """An export nobody builds, and one whose worker claimed it and died: past their bounds the stale
    sweep ends the first (queue_timeout) and takes the second back from its lost worker."""
    s = run.stack
    book = run.new_book("Stale", "# S\n\ns\n")
    if book is None:
        return
    run.attempt(lambda: s.submit(book, "html"), claim=oracle.export_exists(book))
    lost = run.attempt(lambda: s.submit(book, "markdown"), claim=oracle.export_exists(book))
    if lost is not None and lost.status == 202:
        export_id = lost.body["id"]
        path = artifact_key(book, export_id, "died")
        run.attempt(lambda: s.store.claims.claim_build(book, export_id, path, s.clock()))
    settings = s.exports.settings
    s.clock.advance(
        max(settings.queue_grace_seconds, settings.lease_seconds + settings.retry_grace_seconds) + 1
    )
    run.attempt(s.sweep)


def released(run: Run) -> None:
    """A build whose storage fails under it: the worker gives its lease back (release_claim) and asks
    for a redelivery, which builds it. (The failure is the workload's own, so the clean run records the
    release as a call point, and the faults strike it too.)"""
    s = run.stack
    book = run.new_book("Released", "# R\n\nr\n")
    if book is None:
        return
    export = run.attempt(lambda: s.submit(book, "markdown"), claim=oracle.export_exists(book))
    if export is None or export.status != 202:
        return
    with scripted(s.objects.client, "CopyObject", client_error):
        run.attempt(lambda: s.build(book, export.body["id"]), tries=1)
    run.attempt(lambda: run.build_until_done(book, export.body["id"]))


def multipart(run: Run) -> None:
    """A book whose html goes up in parts. One build's part fails: its writer aborts the upload and the
    worker gives the build back. The next worker dies between two parts, so its upload stays open until
    the GC, past the lease, aborts it. The third build goes through. (Parts are small under the fault
    matrix: SMALL_PART.)"""
    s = run.stack
    book = run.new_book("Parts", MULTIPART_MANUSCRIPT)
    if book is None:
        return
    export = run.attempt(lambda: s.submit(book, "html"), claim=oracle.export_exists(book))
    if export is None or export.status != 202:
        return
    export_id = export.body["id"]
    # The artifact's parts (the cache's pack goes up in parts too: its own faults are the pieces scenario's).
    with scripted(s.objects.client, "UploadPart", client_error, under=ARTIFACT_PREFIX):
        run.attempt(lambda: s.build(book, export_id), tries=1)
    with scripted(s.objects.client, "UploadPart", crash, skip=1, under=ARTIFACT_PREFIX):
        run.attempt(lambda: s.build(book, export_id), tries=1)
    settings = s.exports.settings
    s.clock.advance(settings.lease_seconds + settings.retry_grace_seconds + 1)
    run.attempt(s.gc)
    run.attempt(lambda: run.build_until_done(book, export_id))


def assets(run: Run) -> None:
    """Two images adopted, the cover and an author set, an html export built with them, the other image
    deleted, and the GC past the lease retiring its bytes. (A replacement retires bytes the same way,
    and a deleted book's images go by the purge: tests/unit/test_assets.py.)"""
    s = run.stack
    book = run.new_book("Pictures", "# P\n\n![a](a.png)\n\n![b](b.gif)\n")
    if book is None:
        return
    for name, data, content_type in IMAGES:
        body = {"name": name, "content_type": content_type, "size": len(data)}
        ticket = run.attempt(lambda b=body: s.http("POST", f"/books/{book}/assets", body=b))
        if ticket is None or ticket.status != 201:
            continue
        # The caller's PUT to the presigned URL, through a client no fault reaches: it is not Bindery's.
        key = upload_key(book, ticket.body["upload_id"])
        boto3.client("s3").put_object(
            Bucket=s.exports.settings.bucket, Key=key, Body=data, ContentType=content_type
        )
        adopt = {"upload_id": ticket.body["upload_id"]}
        run.attempt(
            lambda n=name, a=adopt: s.http("PUT", f"/books/{book}/assets/{n}", body=a),
            claim=oracle.revision(book),
        )
    edit = {"metadata": {"cover": "a.png", "authors": ["A. Painter"]}}
    run.attempt(lambda: s.http("PATCH", f"/books/{book}", body=edit), claim=oracle.revision(book))
    export = run.attempt(lambda: s.submit(book, "html"), claim=oracle.export_exists(book))
    if export is not None and export.status == 202:
        run.attempt(lambda: run.build_until_done(book, export.body["id"]))
    run.attempt(lambda: s.http("DELETE", f"/books/{book}/assets/b.gif"))
    s.clock.advance(s.exports.settings.lease_seconds + 1)
    run.attempt(s.gc)


def webhooks(run: Run) -> None:
    """Two endpoints, one answering 500 and then 200, the other deleted with a delivery waiting; an
    export built; its event ingested twice (the bus redelivers); the sender and the sweep run until
    nothing is due; then an ended delivery redelivered by hand."""
    s = run.stack
    h = run.hooks = hooked(s)
    h.receiver.answer(HOOK, 500, 200)
    h.receiver.answer(DOOMED, 500)
    endpoints = []
    for url in (HOOK, DOOMED):
        body = {"url": url, "events": ["bindery.export.ready", "bindery.export.failed"]}
        made = run.attempt(
            lambda b=body: s.http("POST", "/webhooks", body=b), claim=oracle.endpoint_exists(s)
        )
        if made is not None and made.status == 201:
            endpoints.append(made.body["id"])
    book = run.new_book("Hooks", "# H\n\nh\n")
    if book is None or len(endpoints) < 2:
        return
    export = run.attempt(lambda: s.submit(book, "markdown"), claim=oracle.export_exists(book))
    if export is None or export.status != 202:
        return
    run.attempt(lambda: run.build_until_done(book, export.body["id"]))
    for _ in range(2):
        for kind, detail in [e for e in _events(s) if e[1]["book_id"] == book]:
            message = envelope(kind, detail, h.happened.setdefault(detail["id"], s.clock()))
            run.attempt(lambda m=message: h.d.ingest(m))
    run.send_due(h)
    run.attempt(
        lambda: s.http("DELETE", f"/webhooks/{endpoints[1]}"), claim=oracle.endpoint_gone(s, endpoints[1])
    )
    for delay in s.exports.settings.webhook_delays[1:4]:
        s.clock.advance(delay)
        run.attempt(h.d.sweep)
        run.send_due(h)
    # Read as the checker reads, past the faults: the caller knows its delivery's id from the ledger.
    for d in _all_items(s.store, ("DLV#",)):
        if d["pk"] == f"HOOK#{endpoints[0]}" and d["state"] == "acked":
            seq = int(d["sk"].removeprefix("DLV#"))
            run.attempt(lambda q=seq: s.http("POST", f"/webhooks/{endpoints[0]}/deliveries/{q}/redeliver"))
    s.clock.advance(s.exports.settings.webhook_lease_seconds)
    run.attempt(h.d.sweep)
    run.send_due(h)


def batches(run: Run) -> None:
    """A keyed batch of two targets on two books (one fails: partial, and its bundle is built), read; a
    second batch of two, one built, then cancelled: its pending target cancelled, its ready one's link
    ended."""
    s, w = run.stack, run.witness
    book = run.new_book("Catalogue", "# C\n\nc\n")
    empty = run.new_book("Blank", "")
    if book is None or empty is None:
        return
    targets = [{"book_id": book, "format": "markdown"}, {"book_id": empty, "format": "markdown"}]
    first = run.attempt(
        lambda: s.http("POST", "/batches", body={"exports": targets}, headers={"Idempotency-Key": "b-1"}),
        claim=oracle.batch_exists,
    )
    second = run.attempt(
        lambda: s.http("POST", "/batches", body={"exports": targets[:2]}), claim=oracle.batch_exists
    )
    for made in (first, second):
        if made is None or made.status != 202:
            continue
        if made is first:
            w.key_answers["b-1"].add(made.body["id"])
        w.accepted |= {t["export_id"] for t in made.body["targets"]}
        for t in made.body["targets"][: 2 if made is first else 1]:
            run.attempt(lambda t=t: run.build_until_done(t["book_id"], t["export_id"]))
    if first is not None and first.status == 202:
        with recording(s.store.client, s.objects.client) as calls:  # the read writes nothing
            run.attempt(lambda: s.http("GET", f"/batches/{first.body['id']}"))
        w.poll_writes += calls.writes()
    if second is not None and second.status == 202:
        run.attempt(
            lambda: s.http("DELETE", f"/batches/{second.body['id']}"),
            claim=oracle.batch_status(second.body["id"], "cancelled"),
        )


PIECES_MANUSCRIPT = "".join(
    f"# Piece {n}\n\nThe words of chapter {n}.\n\n## Part\n\nMore.\n\n" for n in range(4)
)


def pieces(run: Run) -> None:
    """The cache of built pieces: a book built in html and epub (the cache filled), a chapter edited and both
    built again from the cache, then the html's pack cut short in S3 and the html built again. Each warm
    artifact must equal a cold build of the same revision, made by a worker without the cache on clients
    of its own that no fault reaches (tests/unit/test_piece_cache.py has the faults one at a time)."""
    s = run.stack
    book = run.new_book("Pieces", PIECES_MANUSCRIPT)
    if book is None:
        return

    def built(fmt: str) -> str | None:
        export = run.attempt(lambda: s.submit(book, fmt), claim=oracle.export_exists(book))
        if export is None or export.status != 202:
            return None
        run.attempt(lambda: run.build_until_done(book, export.body["id"]))
        return str(export.body["id"])

    for fmt in ("html", "epub"):
        built(fmt)
    edited = {"manuscript": PIECES_MANUSCRIPT.replace("chapter 2", "chapter two")}
    run.attempt(lambda: s.http("PUT", f"/books/{book}/manuscript", body=edited), claim=oracle.revision(book))
    for fmt in ("html", "epub"):
        _same_as_cold(run, book, fmt, built(fmt))
    bucket = s.exports.settings.bucket
    own = boto3.client("s3")  # a client no fault reaches: the damage is the scenario's, not a call's
    for item in own.list_objects_v2(Bucket=bucket, Prefix=f"books/pieces/{book}/html/").get("Contents", []):
        if not item["Key"].endswith("/head"):  # each pack, cut short
            data = own.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            own.put_object(Bucket=bucket, Key=item["Key"], Body=data[: len(data) // 2])
    _same_as_cold(run, book, "html", built("html"))


def _same_as_cold(run: Run, book: str, fmt: str, export_id: str | None) -> None:
    """A ready export's bytes against a cold build's of the same revision; an untrue answer if they differ."""
    s = run.stack
    settings = s.exports.settings
    off = replace(settings, piece_cache="off")
    cold = Stack(wired(off, Store(settings), Objects(settings), s.clock), s.clock, s.context)
    found = (
        cold.store.exports.read_export_for_owner(book, export_id, "user-alice", s.clock())
        if export_id
        else None
    )
    if found is None or found[0].state != State.READY or found[0].path is None:
        return  # not built (the fault outlasted its retries): quiescence builds it, and promise 1 holds it
    warm = cold.objects.client.get_object(Bucket=settings.bucket, Key=found[0].path)["Body"].read()
    again = cold.submit(book, fmt).body["id"]
    cold.build(book, again)
    done = cold.store.exports.read_export_for_owner(book, again, "user-alice", s.clock())
    if done is None or done[0].path is None:
        run.witness.untrue.append(f"pieces: the cold {fmt} build of book {book} did not finish")
        return
    reference = cold.objects.client.get_object(Bucket=settings.bucket, Key=done[0].path)["Body"].read()
    if done[0].built_revision == found[0].built_revision and reference != warm:
        run.witness.untrue.append(f"pieces: a warm {fmt} build of book {book} differs from a cold one")


# The ten, in the order a full run plays them (and the fault matrix deals its kinds by).
WORKLOADS: dict[str, Callable[[Run], None]] = {
    "exports": exports,
    "replacements": replacements,
    "book_delete": book_delete,
    "stale": stale,
    "released": released,
    "multipart": multipart,
    "assets": assets,
    "webhooks": webhooks,
    "batches": batches,
    "pieces": pieces,
}
SCENARIOS = tuple(WORKLOADS)
