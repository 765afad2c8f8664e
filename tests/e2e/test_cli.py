"""The `bindery` command against the running local stack, over real HTTP, as a user would run it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from tests.e2e.stack import RunningStack
from tests.servers import ROOT

MANUSCRIPT = "".join(
    f"# Chapter {n}\n\nThe keeper wrote the hour of each trimming, {n}.\n\n" for n in range(1, 31)
)


# The installed entry point (bindery-cli's console script), as a user runs it.
BINDERY = str(Path(sys.executable).parent / "bindery")


def _bindery(
    stack: RunningStack, *args: str, token: str | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BINDERY_API": stack.api, "BINDERY_TOKEN": token or stack.token}
    return subprocess.run(
        [BINDERY, *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def _json(run: subprocess.CompletedProcess[str]) -> Any:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_create_export_wait_and_download_with_progress(stack: RunningStack, tmp_path: Path) -> None:
    source = tmp_path / "keeper.md"
    source.write_text(MANUSCRIPT)
    book = _json(_bindery(stack, "books", "create", str(source), "--title", "The Keeper", "--json"))
    assert (book["title"], len(book["chapters"])) == ("The Keeper", 30)

    out = tmp_path / "keeper.epub"
    run = _bindery(stack, "export", book["id"], "--format", "epub", "--wait", "--out", str(out))

    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"{out}  ") and "epub, revision 1" in run.stdout
    assert "building epub" in run.stderr and "downloading keeper.epub" in run.stderr  # the two bars
    with zipfile.ZipFile(out) as epub:
        assert epub.read("mimetype") == b"application/epub+zip"
    assert not list(tmp_path.glob("*.part"))
    # The file is checked against the SHA-256 the worker computed as it built it, and the user is told.
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert f"sha256 {digest}: checked" in run.stdout

    shown = _bindery(stack, "books", "show", book["id"])
    assert shown.returncode == 0 and "   30. Chapter 30" in shown.stdout
    listed = _json(_bindery(stack, "exports", "list", book["id"], "--json"))
    assert [e["state"] for e in listed["exports"]] == ["ready"]


def test_show_and_cancel_an_export_and_errors_are_one_line_with_what_to_do(
    stack: RunningStack, tmp_path: Path
) -> None:
    source = tmp_path / "short.md"
    source.write_text("# Short\n\ntext\n")
    book = _json(_bindery(stack, "books", "create", str(source), "--json"))
    export = _json(_bindery(stack, "export", book["id"], "-f", "html", "--json"))
    cancelled = _bindery(stack, "exports", "cancel", book["id"], export["id"])
    shown = _json(_bindery(stack, "exports", "show", book["id"], export["id"], "--json"))
    # The cancel says what it did: the build may have finished first, and then it ended the link.
    said = {"cancelled": f"cancelled {export['id']}", "expired": f"ended the link of {export['id']}"}
    assert cancelled.returncode == 0 and cancelled.stdout.strip() == said[shown["state"]]

    missing = _bindery(stack, "books", "show", "0" * 20)
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.strip().splitlines() == [
        "bindery: not_found: no such book or export (check the book's id: `bindery books list` shows yours)"
    ]
    forged = _bindery(stack, "books", "show", book["id"], token="not-a-token")
    assert forged.returncode == 1 and forged.stderr.startswith("bindery: unauthorized: ")
    as_json = _bindery(stack, "books", "show", "0" * 20, "--json")
    assert json.loads(as_json.stdout)["error"] == {
        "code": "not_found",
        "message": "no such book or export (check the book's id: `bindery books list` shows yours)",
    }


def test_each_terminal_transition_shows_as_one_event_in_the_stacks_log(
    stack: RunningStack, tmp_path: Path
) -> None:
    source = tmp_path / "events.md"
    source.write_text("# Events\n\ntext\n")
    book = _json(_bindery(stack, "books", "create", str(source), "--json"))
    export = _json(_bindery(stack, "export", book["id"], "-f", "markdown", "--json"))
    deadline = time.monotonic() + 90  # the stack's one worker may still be busy with an earlier build
    while not any(export["id"] in line and "event bindery.export.ready" in line for line in stack.lines):
        assert time.monotonic() < deadline, "\n".join(stack.lines[-80:])
        time.sleep(0.2)
    time.sleep(1)  # any duplicate would arrive with the next pipe poll
    [line] = [x for x in stack.lines if export["id"] in x and "event bindery.export.ready" in x]
    detail = json.loads(line.split("event bindery.export.ready ", 1)[1])
    assert detail["id"] == f"{export['id']}:ready" and detail["owner"] == "demo-user"


def test_a_cut_off_download_resumes_with_a_range_request_and_is_checked(
    stack: RunningStack, tmp_path: Path
) -> None:
    """A large download that breaks halfway picks up where it stopped (HTTP Range; S3 answers 206), and the
    whole file is checked against the SHA-256 the poll shows."""
    import urllib3

    from bindery_cli.client import ApiError, Client, part_path

    client = Client(stack.api, stack.token)
    book = client.create_book("Long", MANUSCRIPT * 40)
    ready = client.wait(book["id"], client.export(book["id"], "pdf")["id"], every=0.2)
    url, digest = ready["download_url"], ready["sha256"]
    whole = urllib3.request("GET", url).data
    assert hashlib.sha256(whole).hexdigest() == digest and len(whole) > 100_000
    half = urllib3.request("GET", url, headers={"Range": f"bytes=0-{len(whole) // 2 - 1}"})
    assert half.status == 206 and half.data == whole[: len(whole) // 2]

    out = tmp_path / "long.pdf"
    part = part_path(out, digest)  # this very file's: another build's .part is never resumed
    # A first half that is not the file's: the client resumes after it (it does not fetch it again), so
    # the whole is wrong, the checksum says so, and nothing is kept.
    part.write_bytes(b"\0" * (len(whole) // 2))
    try:
        client.download(url, out, sha256=digest)
        raise AssertionError("a damaged download was kept")
    except ApiError as exc:
        assert exc.code == "checksum_mismatch"
    assert not out.exists() and not part.exists()
    # The true first half, cut off: the resume fetches the rest, and the file checks out.
    part.write_bytes(half.data)
    fetched: list[int] = []
    size = client.download(url, out, sha256=digest, on_bytes=lambda done, total: fetched.append(done))
    assert size == len(whole) and out.read_bytes() == whole
    assert fetched[0] > len(whole) // 2 and fetched[-1] == len(whole)  # counting from where it stopped


def test_a_batch_waits_with_a_bar_per_target_and_downloads_one_zip_that_unzip_accepts(
    stack: RunningStack, tmp_path: Path
) -> None:
    minted = _bindery(stack, "token", "user-publisher", "--class", "fleet")
    assert minted.returncode == 0, minted.stderr
    fleet = minted.stdout.strip()
    books = []
    for n in range(2):
        source = tmp_path / f"volume-{n}.md"
        source.write_text(MANUSCRIPT)
        books.append(_json(_bindery(stack, "books", "create", str(source), "--json", token=fleet))["id"])
    me = _json(_bindery(stack, "me", "--json", token=fleet))
    assert me["class"] == "fleet" and me["limits"]["batch_targets"] >= 3

    out = tmp_path / "catalogue.zip"
    targets = [f"{books[0]}:markdown", f"{books[0]}:html", f"{books[1]}:epub"]
    run = _bindery(stack, "batch", "create", *targets, "--wait", "--out", str(out), token=fleet)

    assert run.returncode == 0, run.stderr
    assert "done  3/3 ended: 3 ready" in run.stdout and f"{out}  " in run.stdout
    for target in targets:  # one bar per target, each named by its book and format
        assert f"{target.split(':')[0][:8]}:{target.split(':')[1]}" in run.stderr
    tested = subprocess.run(["unzip", "-t", str(out)], capture_output=True, text=True, check=False)
    assert tested.returncode == 0 and "No errors detected" in tested.stdout, tested.stdout
    with zipfile.ZipFile(out) as archive:
        manifest = json.loads(archive.read("manifest.json"))["files"]
        assert [(f["book_id"], f["format"]) for f in manifest] == [tuple(t.split(":")) for t in targets]
        for entry in manifest:
            assert hashlib.sha256(archive.read(entry["name"])).hexdigest() == entry["sha256"]
    # The caller's usage now holds the three files and the bundle, as `bindery me` says.
    after = _bindery(stack, "me", token=fleet)
    assert after.returncode == 0 and "class fleet" in after.stdout
    assert (
        f"storage        {_json(_bindery(stack, 'me', '--json', token=fleet))['storage']['usage_bytes']:,}"
        in (after.stdout)
    )
