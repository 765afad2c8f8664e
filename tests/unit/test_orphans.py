"""Orphan reconciliation: storage is checked against the table in bounded pages, under a cursor that never
walks backwards, and every GC run leaves an audit row an operator can read."""

from __future__ import annotations

import dataclasses
import json
import os

from bindery.objects import artifact_key
from bindery_cli import cli
from tests.services import wired
from tests.unit.conftest import Stack


def _orphan(stack: Stack, name: str) -> str:
    key = artifact_key("0123456789abcdef0123", f"0000000000{name}", "deadbeef")
    stack.objects.put_bytes(key, b"bytes nobody names")
    return key


def _ready(stack: Stack) -> str:
    book = stack.create_book()
    export_id = stack.submit(book, "markdown").body["id"]
    stack.services.builds.build(book, export_id)
    [row] = [e for e in stack.store.exports.all_exports() if e.id == export_id]
    assert row.path is not None
    return row.path


def test_an_object_no_row_names_is_deleted_and_counted(stack: Stack) -> None:
    orphan = _orphan(stack, "a0000000000")
    kept = _ready(stack)

    result = stack.gc()

    assert (result["orphans_deleted"], result["orphans_scanned"]) == (1, 2)
    assert not stack.objects.exists(orphan) and stack.objects.exists(kept)


def test_a_pending_attempts_key_is_not_an_orphan(stack: Stack) -> None:
    book = stack.create_book()
    export_id = stack.submit(book).body["id"]
    key = artifact_key(book, export_id, "inflight")
    stack.store.claims.claim_build(book, export_id, key, stack.clock())
    stack.objects.put_bytes(key, b"an upload in progress")

    assert stack.gc()["orphans_deleted"] == 0
    assert stack.objects.exists(key)


def test_an_object_younger_than_the_longest_lease_is_left_for_a_later_pass(stack: Stack) -> None:
    orphan = _orphan(stack, "b0000000000")
    stack.clock.now = 0  # the object looks as if written after "now": far too young to judge
    assert stack.gc()["orphans_deleted"] == 0
    assert stack.objects.exists(orphan)


def test_the_work_per_run_is_bounded_and_the_cursor_carries_the_rest(stack: Stack) -> None:
    small = dataclasses.replace(stack.exports.settings, reconcile_batch=2)
    stack.services = wired(small, stack.store, stack.objects, stack.clock)
    orphans = [_orphan(stack, f"c000000000{n}") for n in range(5)]

    scanned = [stack.gc()["orphans_scanned"] for _ in range(3)]

    assert scanned == [2, 2, 1]
    assert not any(stack.objects.exists(k) for k in orphans)
    assert stack.store.sweeps.orphan_cursor() == (1, "")  # the pass ended; the next one starts over


def test_the_cursor_never_walks_backwards(stack: Stack) -> None:
    assert stack.store.sweeps.set_orphan_cursor(0, "artifacts/m")
    assert not stack.store.sweeps.set_orphan_cursor(0, "artifacts/c")  # an older read resuming
    assert not stack.store.sweeps.set_orphan_cursor(0, "artifacts/m")  # the same position again
    assert stack.store.sweeps.orphan_cursor() == (0, "artifacts/m")
    assert stack.store.sweeps.set_orphan_cursor(1, "")  # a new pass is ahead of any key of the old one
    assert not stack.store.sweeps.set_orphan_cursor(0, "artifacts/z")
    assert stack.store.sweeps.orphan_cursor() == (1, "")


def test_every_gc_run_records_an_audit_row_that_the_cli_reads(stack: Stack, capsys) -> None:  # type: ignore[no-untyped-def]
    _orphan(stack, "d0000000000")
    first = stack.gc()
    stack.clock.advance(60)
    second = stack.gc()

    rows = stack.store.sweeps.audits(10)
    assert (
        [r["orphans_deleted"] for r in rows]
        == [second["orphans_deleted"], first["orphans_deleted"]]
        == [0, 1]
    )
    assert rows[0]["ran_at"] > rows[1]["ran_at"]

    assert cli.main(["audits", "--limit", "1"], store=stack.store) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(printed) == 1 and printed[0]["orphans_deleted"] == 0


def test_audits_reads_an_env_file_and_without_credentials_says_the_one_thing_to_add(
    tmp_path,
    monkeypatch,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    from botocore.exceptions import NoCredentialsError

    class NoCredentials:
        class sweeps:  # the store's row store the command reads
            @staticmethod
            def audits(limit: int) -> list[dict[str, object]]:
                raise NoCredentialsError()

    env = tmp_path / "env.json"
    env.write_text(json.dumps({"Parameters": {"BINDERY_AUDIT_PROBE": "read"}, "gc": {"BINDERY_X": "gc's"}}))
    # Set through monkeypatch, so that what the command sets is undone after the test.
    monkeypatch.setenv("BINDERY_AUDIT_PROBE", "unset")
    monkeypatch.setenv("BINDERY_X", "unset")

    assert cli.main(["audits", "--env-vars", str(env)], store=NoCredentials()) == 2

    assert (os.environ["BINDERY_AUDIT_PROBE"], os.environ["BINDERY_X"]) == ("read", "gc's")
    assert capsys.readouterr().err == (
        "bindery: no AWS credentials: for the local stack, add --env-vars events/env.json\n"
    )
