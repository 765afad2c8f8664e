"""1. AWS round trips per operation, exact, each against its minimum.

Also asserted in tests/unit/test_round_trips.py. In-process moto: a count does not depend on the engine.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tests.bench.aws import child_env
from tests.bench.report import record, say


def measure() -> None:
    say("\n1. AWS round trips per operation (exact; also asserted in tests/unit/test_round_trips.py)")
    os.environ.update(child_env())
    import boto3
    from moto import mock_aws

    from bindery.config import Settings
    from bindery.limits import CallerClass
    from bindery.objects import Objects, artifact_key
    from bindery.states import FailureCode
    from bindery.storage import Claimed, Store
    from bindery_local.template import create_table
    from tests.calls import recording
    from tests.conftest import FakeClock
    from tests.services import wired

    with mock_aws():
        create_table(boto3.client("dynamodb"), "bench")
        boto3.client("s3").create_bucket(Bucket="bench")
        settings = Settings(table="bench", bucket="bench")
        clock = FakeClock()
        ex = wired(settings, Store(settings), Objects(settings), clock)
        clients = (ex.store.client, ex.objects.client)
        book, _, _ = ex.books.create_book("bench-user", "Bench", "# One\n\ntext\n")

        def count(act: Callable[[], Any], service: str | None = None) -> int:
            with recording(*clients) as calls:
                act()
            return sum(calls.count(service).values())

        rows: list[tuple[str, int, int]] = []
        rows.append(
            (
                "submit (TransactWriteItems)",
                count(lambda: ex.exports.submit("bench-user", book.id, "html", "k1")),
                1,
            )
        )
        rows.append(
            (
                "replayed Idempotency-Key",
                count(lambda: ex.exports.submit("bench-user", book.id, "html", "k1")),
                1,
            )
        )
        pending = ex.exports.submit("bench-user", book.id, "html", None)[0]["id"]
        rows.append(("poll", count(lambda: ex.exports.read("bench-user", book.id, pending)), 1))
        claimed: list[Any] = []
        rows.append(
            (
                "claim",
                count(
                    lambda: claimed.append(
                        ex.store.claims.claim_build(
                            book.id, pending, artifact_key(book.id, pending, "t"), clock()
                        )
                    )
                ),
                1,
            )
        )
        assert isinstance(claimed[0], Claimed)
        rows.append(
            (
                "finish",
                count(
                    lambda: ex.store.claims.finish_export(
                        claimed[0].export, path="p", size_bytes=1, built_revision=1, now=clock()
                    )
                ),
                1,
            )
        )
        other = ex.exports.submit("bench-user", book.id, "html", None)[0]["id"]
        c2 = ex.store.claims.claim_build(book.id, other, artifact_key(book.id, other, "t"), clock())
        assert isinstance(c2, Claimed)
        rows.append(
            (
                "fail",
                count(lambda: ex.store.claims.fail_export(c2.export, FailureCode.RENDER_FAILED, clock())),
                1,
            )
        )
        third = ex.exports.submit("bench-user", book.id, "html", None)[0]["id"]
        rows.append(("cancel (pending)", count(lambda: ex.exports.cancel("bench-user", book.id, third)), 1))
        for _ in range(3):
            ex.exports.submit("bench-user", book.id, "html", None)
        clock.advance(settings.queue_grace_seconds + 1)
        with recording(*clients) as calls:
            swept = ex.schedules.fail_stale_exports().done
        # Totals over the rows, not a quotient: a division would hide an extra call. (The key-1 export above
        # is still pending too, so the sweep finds four.)
        rows.append(
            (f"{swept} stale rows swept (TransactWriteItems)", calls.count()["TransactWriteItems"], swept)
        )
        clock.advance(settings.link_ttl_seconds + settings.lease_seconds + 1)
        # Clear the rows above out of the GC's queues, so the figures below are one link's alone.
        ex.schedules.expire_lapsed_links()
        ex.schedules.unlink_ended_artifacts()
        copied = ex.exports.submit("bench-user", book.id, "markdown", None)[0]["id"]
        with recording(ex.objects.client) as s3calls:
            ex.builds.build(book.id, copied)
        rows.append(
            ("S3 calls to build markdown (1 server-side CopyObject)", sum(s3calls.count().values()), 1)
        )
        built = ex.exports.submit("bench-user", book.id, "html", None)[0]["id"]
        with recording(ex.objects.client) as s3calls:
            ex.builds.build(book.id, built)
        rows.append(
            (
                "S3 calls to build a small html book (2 GETs, its chapter list and its text; 1 PUT; "
                "its cache of built pieces, new: its head read, its pack and head written)",
                sum(s3calls.count().values()),
                3 + 3,
            )
        )
        clock.advance(settings.link_ttl_seconds + 1)
        with recording(*clients) as calls:
            assert ex.schedules.expire_lapsed_links().done == 2
            assert ex.schedules.unlink_ended_artifacts().done == 2
        writes = calls.count("dynamodb")
        rows.append(
            (
                "2 lapsed links: expire + forget (DynamoDB writes)",
                writes["UpdateItem"] + writes["TransactWriteItems"],
                4,
            )
        )
        # A forget reads its row first: whose usage the bytes leave, and how many (the index has neither).
        rows.append(("2 lapsed links: reads before the forgets", writes["GetItem"], 2))
        targets = [{"book_id": book.id, "format": "html"}] * 2
        rows.append(
            (
                "a batch of 2 (the books' owners, the cap's shards, one write)",
                count(lambda: ex.batches.create_batch("bench-user", CallerClass.STANDARD, targets, None)),
                3,
            )
        )
        rows.append(("2 lapsed links: S3 deletes", calls.count("s3")["DeleteObject"], 2))
        # The same revision as the html above, again: every chapter from the cache, which reads its head
        # and its one pack and writes nothing (the build changed nothing in it); no chapter's text is read.
        again = ex.exports.submit("bench-user", book.id, "html", None)[0]["id"]
        with recording(ex.objects.client) as s3calls:
            ex.builds.build(book.id, again)
        rows.append(
            (
                "S3 calls to build it again, warm (1 GET, its chapter list, and no text: every chapter found "
                "by its SHA-256; 1 PUT; the cache's head and pack read)",
                sum(s3calls.count().values()),
                2 + 2,
            )
        )
    for name, measured, minimum in rows:
        record("round trips", name, str(measured), f"minimum {minimum}", measured == minimum)
