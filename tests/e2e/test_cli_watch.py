"""`bindery watch FILE.md --format pdf` against the local stack, as `typst watch` is used: two saves, two
files, each put in place whole, the second built from the cache of the first; the export's notes printed a
line each; Ctrl-C stops it with status 0 (issue 47)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bindery.objects import pieces_prefix
from bindery.piece_cache import HEAD
from bindery_local.stack import BUCKET
from tests.e2e.stack import RunningStack
from tests.e2e.test_cli import BINDERY
from tests.validators import pdftotext

MANUSCRIPT = """---
title: The Watched Light
---
# The Quay

The first words of the quay. See [the lamp](#the-lamp), and [the bell](#the-bell).

# The Lamp

The lamp was lit at dusk.

# The Fog

The fog came in over the breakwater.
"""
EDITED = MANUSCRIPT.replace("The lamp was lit at dusk.", "The lamp was lit at noon, for once.")
# A bound for each wait: a build here takes a second or two, a busy CI machine's many more.
WAIT_SECONDS = 120


def _until(done: Callable[[], Any], watch: subprocess.Popen[str], err: Path, what: str) -> Any:
    """`done()`'s first true answer, polled while the watch runs, within WAIT_SECONDS."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not (found := done()):
        assert watch.poll() is None, f"the watch ended ({watch.returncode}) before {what}: {err.read_text()}"
        assert time.monotonic() < deadline, f"no {what} after {WAIT_SECONDS} s: {err.read_text()[-2000:]}"
        time.sleep(0.2)
    return found


def _head(stack: RunningStack, book: str) -> dict[str, Any] | None:
    """The book's cache of pdf pieces as its last build left it: each piece and the pack it is in."""
    s3 = stack.client("s3")
    try:
        found = s3.get_object(Bucket=BUCKET, Key=f"{pieces_prefix(book)}pdf/{HEAD}")
    except s3.exceptions.NoSuchKey:
        return None
    return dict(json.loads(found["Body"].read()))


@pytest.mark.slow(30)
def test_each_save_is_built_again_from_the_cache_and_replaces_the_file_whole(
    stack: RunningStack, tmp_path: Path
) -> None:
    source, pdf = tmp_path / "book.md", tmp_path / "book.pdf"
    source.write_text(MANUSCRIPT)
    out, err = tmp_path / "watch.out", tmp_path / "watch.err"
    env = {**os.environ, "BINDERY_API": stack.api, "BINDERY_TOKEN": stack.token}
    with out.open("w") as stdout, err.open("w") as stderr:
        watch = subprocess.Popen(
            [BINDERY, "watch", "book.md", "--format", "pdf"],
            cwd=tmp_path,
            env=env,
            stdout=stdout,
            stderr=stderr,
            text=True,
        )
    try:
        # Given the first build: the book made from the file, its pdf beside it, the export's notes printed.
        _until(lambda: out.read_text().count("book.pdf  ") == 1, watch, err, "the first file")
        assert "The first words of the quay." in pdftotext(pdf) and "lit at dusk" in pdftotext(pdf)
        made = re.search(r"bindery: made book (\w+) from book.md", err.read_text())
        assert made, err.read_text()
        book = made.group(1)
        unlanded = 'warning: chapter 1 (The Quay), line 3: link_unlanded: #the-bell "the bell"\n'
        assert unlanded in out.read_text()
        first = _until(lambda: _head(stack, book), watch, err, "the first build's cache")
        first_packs = set(first["packs"])
        replaced = pdf.stat().st_ino

        # When one chapter is edited and saved,
        source.write_text(EDITED)

        # then a second file takes the first's place whole (a rename: another file, as a viewer sees it),
        _until(lambda: out.read_text().count("book.pdf  ") == 2, watch, err, "the second file")
        text = pdftotext(pdf)
        assert "lit at noon, for once" in text and "lit at dusk" not in text
        assert "The fog came in over the breakwater." in text
        assert pdf.stat().st_ino != replaced
        assert not list(tmp_path.glob("book.pdf.*part")), list(tmp_path.iterdir())
        # and it was built from the cache: the book's cache keeps pieces in the first build's pack, at least
        # the two chapters not edited, and the second build set again only some pieces, in a pack of its own.
        second = _until(
            lambda: (h := _head(stack, book)) is not None and set(h["packs"]) != first_packs and h,
            watch,
            err,
            "the second build's cache",
        )
        kept = [entry for entry in second["entries"] if entry[3] in first_packs]
        set_again = [entry for entry in second["entries"] if entry[3] not in first_packs]
        assert len(second["packs"]) == 2 and first_packs < set(second["packs"]), second["packs"]
        assert len(kept) >= 2 and 0 < len(set_again) < len(second["entries"]), (len(kept), len(set_again))
    finally:
        watch.send_signal(signal.SIGINT)  # Ctrl-C
        code = watch.wait(timeout=30)
    said = err.read_text()
    assert code == 0 and "Traceback" not in said, said
    assert f"bindery: stopped watching book.md (`--book {book}` goes on with its book)\n" in said
