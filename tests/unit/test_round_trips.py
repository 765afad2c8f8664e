"""AWS round trips per operation equal the minimum. Exact counts, so they are asserted here."""

from __future__ import annotations

import json

from bindery.objects import artifact_key
from bindery.storage import Claimed
from bindery.writers import PART_BYTES
from tests.calls import recording
from tests.unit.conftest import Stack


def _clients(stack: Stack) -> tuple[object, object]:
    return stack.store.client, stack.objects.client


# Every answer to a caller also reads its live item once, for the RateLimit-* fields.
HOLDINGS = ("dynamodb", "GetItem")


def test_submit_is_one_transact_write(stack: Stack) -> None:
    book = stack.create_book()
    with recording(*_clients(stack)) as calls:
        assert stack.submit(book, key="once").status == 202
    assert calls.made == [("dynamodb", "TransactWriteItems"), HOLDINGS]


def test_a_replayed_idempotency_key_costs_one_call_and_no_second_read(stack: Stack) -> None:
    book = stack.create_book()
    stack.submit(book, key="again")
    with recording(*_clients(stack)) as calls:
        assert stack.submit(book, key="again").status == 202
    assert calls.made == [("dynamodb", "TransactWriteItems"), HOLDINGS]


def test_poll_is_one_read_and_no_write(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    stack.services.builds.build(book, export_id)
    with recording(*_clients(stack)) as calls:
        polled = stack.poll(book, export_id)
    assert polled.body["download_url"]  # presigning is local arithmetic, not a call
    # The caller's live item is read on its own: a transactional read of it would be cancelled by any of the
    # caller's submits or endings at that instant.
    assert calls.made == [("dynamodb", "TransactGetItems"), HOLDINGS]


def test_claim_finish_fail_and_cancel_are_one_call_each(stack: Stack) -> None:
    book = stack.create_book()
    a, b, c = (stack.submit(book).body["id"] for _ in range(3))
    with recording(stack.store.client) as claim:
        claimed = stack.store.claims.claim_build(book, a, artifact_key(book, a, "t"), stack.clock())
    assert isinstance(claimed, Claimed)
    with recording(stack.store.client) as finish:
        stack.store.claims.finish_export(
            claimed.export, path="p", size_bytes=1, built_revision=1, now=stack.clock()
        )
    claimed_b = stack.store.claims.claim_build(book, b, artifact_key(book, b, "t"), stack.clock())
    assert isinstance(claimed_b, Claimed)
    with recording(stack.store.client) as fail:
        from bindery.states import FailureCode

        stack.store.claims.fail_export(claimed_b.export, FailureCode.RENDER_FAILED, stack.clock())
    with recording(stack.store.client) as cancel:
        assert stack.http("DELETE", f"/books/{book}/exports/{c}").status == 204
    assert claim.made == [("dynamodb", "UpdateItem")]
    assert finish.made == [("dynamodb", "TransactWriteItems")]
    assert fail.made == [("dynamodb", "TransactWriteItems")]
    assert cancel.made == [("dynamodb", "TransactWriteItems"), HOLDINGS]


def test_each_stale_row_costs_one_write(stack: Stack) -> None:
    book = stack.create_book()
    for _ in range(3):
        stack.submit(book)
    stack.clock.advance(stack.exports.settings.queue_grace_seconds + 1)
    with recording(*_clients(stack)) as calls:
        assert stack.sweep()["failed"] == 3
    # One index read per queue: the stale exports, and the batches to settle (none here).
    assert calls.count() == {"Query": 2, "TransactWriteItems": 3}


def test_each_lapsed_link_costs_one_expire_one_delete_and_one_forget(stack: Stack) -> None:
    book = stack.create_book()
    for _ in range(2):
        export_id = stack.submit(book).body["id"]
        stack.services.builds.build(book, export_id)
    stack.clock.advance(stack.exports.settings.link_ttl_seconds)
    with recording(*_clients(stack)) as calls:
        result = stack.gc()
    assert (result["expired"], result["unlinked"]) == (2, 2)
    # Per link: one write to expire it, one S3 delete, and one read and one write to forget its path (the
    # read names whose usage its bytes leave, and how many). The rest of the run (an index read per queue,
    # the orphan page, the cursor and the audit row) is per run, whatever the rows.
    assert calls.count("dynamodb")["UpdateItem"] == 2
    assert calls.count("s3")["DeleteObject"] == 2
    assert calls.count() == {
        "Query": 4,  # one index read per queue: expire, purge, unlink, retire
        "UpdateItem": 2,
        "TransactWriteItems": 2,
        "DeleteObject": 2,
        "GetItem": 1 + 2,  # the orphan cursor, and each row's before its forget
        # One page of artifact keys (nothing left to check against the table), and one of the caches of
        # built pieces, from the cache's own cursor (a GET that finds none: the walk starts at the top).
        "ListObjectsV2": 2,
        "GetObject": 1,
        # The two builds' cache (its head and one pack), which is past its age on this test's clock (it
        # runs weeks after the wall clock that stamped the objects).
        "DeleteObjects": 1,
        "PutItem": 2,  # the cursor moved on, and the run's audit row
        "ListMultipartUploads": 1 + 1,  # stale uploads under artifacts/, and under books/pieces/
    }


def test_a_small_build_uploads_with_one_put(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    with recording(stack.store.client, stack.objects.client) as calls:
        stack.services.builds.build(book, export_id)
    # Claim, the book, finish; its chapter list (one GET, not a Query of its chapter items:
    # bindery/chapter_lists.py); one streaming read of the whole manuscript, one upload of the whole
    # artifact. (A small book writes no progress: that is at most one write every few seconds.)
    assert calls.count("dynamodb") == {"UpdateItem": 1, "GetItem": 1, "TransactWriteItems": 1}
    # And the cache of built pieces (tests/unit/test_piece_cache.py): its head, read (none yet), then its
    # one pack and its head, written.
    assert calls.count("s3") == {"GetObject": 1 + 1 + 1, "PutObject": 1 + 2}


def test_a_large_build_is_a_multipart_upload_sized_to_the_artifact(stack: Stack) -> None:
    chapter = "```\n" + ("<>" * 35 + "\n") * 500 + "```\n\n"  # 36 KB of code, 140 KB of html (&lt;&gt;)
    book = stack.create_book("".join(f"# C{n}\n\n{chapter}" for n in range(120)))  # 4.3 MB in, 17 MB out
    export_id = stack.submit(book, "html").body["id"]
    with recording(stack.objects.client) as calls:
        stack.services.builds.build(book, export_id)
    size = stack.poll(book, export_id).body["size_bytes"]
    parts = -(-size // PART_BYTES)
    assert parts >= 2
    # The cache of built pieces: its head read (none yet); then its pack, each piece deflated (17 MB of this
    # html is well under one part), and its head, each one PutObject.
    head = json.loads(stack.objects.read_text(f"books/pieces/{book}/html/head"))
    (pack_size,) = head["packs"].values()
    assert pack_size < PART_BYTES
    assert calls.count() == {
        "GetObject": 1 + 1 + 1,  # the chapter list, the manuscript, the cache's head
        "CreateMultipartUpload": 1,
        "UploadPart": parts,  # 8 MiB each: as many as the artifact needs, no more
        "CompleteMultipartUpload": 1,
        "PutObject": 2,
    }


def test_a_markdown_build_is_one_server_side_copy(stack: Stack) -> None:
    book = stack.create_book("# One\r\n\r\nThe text, with a hard break  \r\nhere.\r\n\r\n\r\n")
    export_id = stack.submit(book, "markdown").body["id"]
    with recording(stack.store.client, stack.objects.client) as calls:
        assert stack.services.builds.build(book, export_id) == "ready"
    # Claim, the book, finish: its chapters are not read, since none of their text is.
    assert calls.count("dynamodb") == {"UpdateItem": 1, "GetItem": 1, "TransactWriteItems": 1}
    assert calls.count("s3") == {"CopyObject": 1}  # the revision is kept normalised: no byte passes through
    [key] = stack.objects.keys("artifacts/")
    assert stack.objects.read_text(key) == "# One\n\nThe text, with a hard break  \nhere.\n"
    head = stack.objects.client.head_object(Bucket=stack.exports.settings.bucket, Key=key)
    assert head["ContentType"] == "text/markdown; charset=utf-8"
    assert head["ContentLength"] == stack.poll(book, export_id).body["size_bytes"]
