"""`bindery webhooks ...`, `bindery events` and `bindery listen`, through the installed entry point against
the local stack, with receivers that are real HTTP servers on 127.0.0.1 and verify what arrives with the
standardwebhooks library."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.stack import RunningStack
from tests.e2e.test_cli import BINDERY, _bindery, _json
from tests.e2e.test_webhooks import Receiver, receiver, until
from tests.servers import ROOT

__all__ = ["receiver"]  # the fixture, imported for these tests


def _book_with_a_ready_export(stack: RunningStack, tmp_path: Path, name: str, fmt: str = "markdown") -> str:
    source = tmp_path / f"{name}.md"
    source.write_text(f"# {name}\n\ntext\n")
    book = _json(_bindery(stack, "books", "create", str(source), "--json"))
    ready = _json(_bindery(stack, "export", book["id"], "-f", fmt, "--wait", "--json", cwd=tmp_path))
    return str(ready["id"])


class _Streaming:
    """A `bindery` that keeps running (events --follow, listen): its stdout lines, read as they come."""

    def __init__(self, stack: RunningStack, *args: str):
        env = {**os.environ, "BINDERY_API": stack.api, "BINDERY_TOKEN": stack.token}
        self.proc = subprocess.Popen(
            [BINDERY, *args],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # Ctrl-C as at a terminal: a test run started in the background (`make test &`) ignores SIGINT,
            # and a child inherits that, so Python would never raise KeyboardInterrupt in it.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.errors: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        stdout, stderr = self.proc.stdout, self.proc.stderr
        threading.Thread(target=lambda: [self.lines.put(x) for x in stdout], daemon=True).start()
        # stderr read as it comes too: its notes (the API slow to answer, on a busy machine) must never fill
        # the pipe and block the process where a Ctrl-C cannot end it.
        self._reading_errors = threading.Thread(target=lambda: self.errors.extend(stderr), daemon=True)
        self._reading_errors.start()

    def next(self, timeout: float = 60) -> Any:
        try:
            return json.loads(self.lines.get(timeout=timeout))
        except queue.Empty:
            pytest.fail(f"no line within {timeout}s; stderr: {self._stderr()}")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)  # Ctrl-C: how a user stops it
        try:
            return self.proc.wait(timeout=60)  # a bound, not a timing: CI machines are busy
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 60 s after Ctrl-C; stderr: {self._stderr()}")

    def stderr_lines(self) -> list[str]:
        """What it wrote on stderr, once it has ended."""
        self._reading_errors.join(timeout=10)
        return "".join(self.errors).splitlines()

    def _stderr(self) -> str:
        self.proc.kill()
        self.proc.wait(timeout=10)
        return "".join(self.errors)[-2000:]


@pytest.fixture
def streaming() -> Iterator[Callable[..., _Streaming]]:
    started: list[_Streaming] = []

    def start(stack: RunningStack, *args: str) -> _Streaming:
        started.append(_Streaming(stack, *args))
        return started[-1]

    yield start
    for running in started:
        if running.proc.poll() is None:
            running.proc.kill()


def test_webhooks_add_list_show_edit_rotate_deliveries_redeliver_and_rm(
    stack: RunningStack, tmp_path: Path, receiver: Callable[..., Receiver]
) -> None:
    hook = receiver([200])
    made = _json(_bindery(stack, "webhooks", "add", hook.url, "--event", "bindery.export.ready", "--json"))
    assert made["secret"].startswith("whsec_") and made["events"] == ["bindery.export.ready"]
    hook.secrets["first"] = made["secret"]
    shown_once = _bindery(stack, "webhooks", "add", hook.url, "--event", "all")
    assert shown_once.returncode == 0 and "secret whsec_" in shown_once.stdout  # shown, this once
    other = shown_once.stdout.split()[0]

    listed = _json(_bindery(stack, "webhooks", "list", "--json"))
    assert {made["id"], other} <= {h["id"] for h in listed["webhooks"]}
    assert all("secret" not in h for h in listed["webhooks"])
    assert _bindery(stack, "webhooks", "rm", other).returncode == 0

    export_id = _book_with_a_ready_export(stack, tmp_path, "Hooked")
    event_id = f"{export_id}:ready"
    until("the delivery", lambda: [s for s in hook.seen if s.webhook_id == event_id])
    deliveries = until(
        "the acked delivery",
        lambda: [
            d
            for d in _json(_bindery(stack, "webhooks", "deliveries", made["id"], "--json"))["deliveries"]
            if d["event_id"] == event_id and d["state"] == "acked"
        ],
    )
    shown = _json(_bindery(stack, "webhooks", "show", made["id"], "--json"))
    assert shown["deliveries"]["acked"] >= 1 and "secret" not in shown

    again = _bindery(stack, "webhooks", "redeliver", made["id"], deliveries[0]["id"], "--json")
    assert again.returncode == 0, again.stderr
    arrived = until("the redelivery", lambda: len([s for s in hook.seen if s.webhook_id == event_id]) >= 2)
    assert arrived and all(s.verified["first"] for s in hook.seen if s.webhook_id == event_id)

    edited = _json(_bindery(stack, "webhooks", "edit", made["id"], "--description", "the shop", "--json"))
    assert edited["description"] == "the shop"
    rotated = _json(_bindery(stack, "webhooks", "rotate", made["id"], "--json"))
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != made["secret"]
    assert len(rotated["secrets"]) == 2  # the old one signs beside it for a day

    assert _bindery(stack, "webhooks", "rm", made["id"]).returncode == 0
    gone = _bindery(stack, "webhooks", "show", made["id"])
    assert gone.returncode == 1 and gone.stderr.startswith("bindery: not_found: ")
    nothing = _bindery(stack, "webhooks", "edit", made["id"])
    assert nothing.returncode == 2 and "nothing to change" in nothing.stderr


def test_events_pages_the_feed_and_follow_keeps_reading_its_head(
    stack: RunningStack, tmp_path: Path, streaming: Callable[..., _Streaming]
) -> None:
    first = _book_with_a_ready_export(stack, tmp_path, "Fed")

    # The event comes through the stream's pipe after the poll says ready: read until it is in the feed.
    def fed() -> Any:
        page = _json(_bindery(stack, "events", "--json"))
        return page if f"{first}:ready" in {e["id"] for e in page["events"]} else None

    page = until("the event in the feed", fed)
    head = page["head"]
    assert page["next_cursor"] == head  # one page holds the feed: nothing after its head
    text = _bindery(stack, "events", "--after", str(int(head) - 1))
    assert text.returncode == 0 and text.stdout.startswith(f"{head}  ")  # the first event after head - 1
    # Its last line is where to read on (links lapse in this stack, so later events may have come since).
    *_, shown_head, last = text.stdout.splitlines()
    after = re.fullmatch(r"next: --after (\d+)", last)
    assert after and shown_head == f"head {after.group(1)}" and int(after.group(1)) >= int(head), text.stdout

    follower = streaming(stack, "events", "--after", head, "--follow", "--json", "--every", "0.2")
    second = _book_with_a_ready_export(stack, tmp_path, "Followed")
    event = follower.next()
    while event["id"] != f"{second}:ready":
        event = follower.next()
    assert event["type"] == "bindery.export.ready" and int(event["cursor"]) > int(head)
    assert follower.stop() == 0
    resume = re.fullmatch(r"bindery: resume with --after (\d+)", follower.stderr_lines()[-1])
    assert resume and int(resume.group(1)) >= int(event["cursor"]) - 1  # where a rerun picks up


def test_listen_posts_each_new_event_signed_as_a_webhook_is(
    stack: RunningStack,
    tmp_path: Path,
    receiver: Callable[..., Receiver],
    streaming: Callable[..., _Streaming],
) -> None:
    hook = receiver([200])
    listener = streaming(stack, "listen", "--forward-to", hook.url, "--json", "--every", "0.2")
    started = listener.next()
    assert started["forward_to"] == hook.url and started["secret"].startswith("whsec_")
    hook.secrets["printed"] = started["secret"]  # the receiver verifies with the secret listen printed

    export_id = _book_with_a_ready_export(stack, tmp_path, "Listened")
    forwarded = listener.next()
    while forwarded["event"]["id"] != f"{export_id}:ready":
        forwarded = listener.next()
    assert forwarded["status"] == 200 and forwarded["error"] == ""
    [arrived] = [s for s in hook.seen if s.webhook_id == f"{export_id}:ready"]
    assert arrived.verified == {"printed": True} and arrived.signatures == 1
    # The body is the event as a webhook carries it: the feed's, without its place in the feed.
    assert arrived.body == {k: v for k, v in forwarded["event"].items() if k != "cursor"}
    assert arrived.body["data"]["export_id"] == export_id
    assert listener.stop() == 0

    wrong = _bindery(stack, "listen", "--forward-to", hook.url, "--secret", "not-a-secret")
    assert wrong.returncode == 2 and "--secret: not a Standard Webhooks secret" in wrong.stderr
