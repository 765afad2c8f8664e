"""`make run`'s stack as a subprocess on a free port, for the e2e tier to drive over real HTTP."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.figures import record
from tests.servers import ROOT

LINK_TTL = 8
# The secret every stack of this tier verifies tokens with, given to it as BINDERY_JWT_SECRET, so that a test
# mints its tokens in-process (tokens.mint reads the same variable). A stack started with `secret=None` makes
# one of its own, as `make run` does; a token for it comes from `bindery token` or its banner.
SECRET = os.environ.setdefault("BINDERY_JWT_SECRET", secrets.token_urlsafe(32))


@dataclass
class RunningStack:
    proc: subprocess.Popen[str]
    port: int
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def banner(self) -> str:
        text = "\n".join(self.lines)
        return text[text.index("Bindery is running.") : text.index("Ctrl-C stops everything.")]

    @property
    def aws(self) -> str:
        found = re.search(r"AWS\s+(http://127\.0\.0\.1:\d+)", self.banner())
        assert found, self.banner()
        return found.group(1)

    def client(self, service: str) -> Any:
        """A boto3 client of the stack's embedded AWS."""
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.aws,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )

    @property
    def token(self) -> str:
        found = re.search(r"TOKEN=(\S+)", self.banner())
        assert found, self.banner()
        return found.group(1)

    def stop(self) -> int:
        sent = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGINT)
        code = self.proc.wait(timeout=60)  # a teardown bound, not a timing: CI machines are busy
        record("e2e: seconds from Ctrl-C to the stack's exit", round(time.monotonic() - sent, 2))
        if self.reader is not None:
            self.reader.join(timeout=10)  # its last lines may still be in the pipe when the process is gone
        for line in self.lines:
            if (own := re.search(r"stopped in ([\d.]+)s$", line)) or "cut off after" in line:
                record("e2e: the stack's own stop (stopping to stopped), s", own.group(1) if own else line)
        return code


def spawn(port: int, *, local_http: bool = True, secret: str | None = SECRET, **env: str) -> RunningStack:
    """`make run` on `port`, in a process group of its own, without waiting for it to start. `local_http`
    is `make run`'s own default, webhook URLs on http://127.0.0.1 allowed; False checks them as a
    deployment does (https, public addresses only). `secret` is its BINDERY_JWT_SECRET; None leaves it
    unset, and the stack makes a secret of its own."""
    local = {"BINDERY_WEBHOOK_LOCAL_HTTP": "1" if local_http else "0"}
    given = {k: v for k, v in os.environ.items() if k != "BINDERY_JWT_SECRET"}
    if secret is not None:
        given["BINDERY_JWT_SECRET"] = secret
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=ROOT,
        env={**given, "PORT": str(port), "BINDERY_MOTO_PORT": "0", **local, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    stack = RunningStack(proc, port)
    assert proc.stdout is not None
    stdout = proc.stdout

    def read() -> None:
        for line in stdout:
            stack.lines.append(line.rstrip("\n"))

    stack.reader = threading.Thread(target=read, daemon=True)
    stack.reader.start()
    return stack


def started(stack: RunningStack) -> bool:
    return any("Ctrl-C stops everything." in line for line in stack.lines)


def start(port: int, *, local_http: bool = True, secret: str | None = SECRET, **env: str) -> RunningStack:
    """`make run` on `port`, once it has printed its banner."""
    stack = spawn(port, local_http=local_http, secret=secret, **env)
    deadline = time.monotonic() + 120
    while not started(stack):
        if stack.proc.poll() is not None or time.monotonic() > deadline:
            stack.proc.kill()
            pytest.fail("the stack did not start:\n" + "\n".join(stack.lines[-40:]))
        time.sleep(0.1)
    return stack


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def token(user: str) -> str:
    out = subprocess.run(
        [str(ROOT / ".venv/bin/bindery"), "token", user], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def promises_broken(stack: RunningStack, key_answers: dict[str, set[str]] | None = None) -> list[str]:
    """The promises (tests/invariants.py), read through the stack's own AWS once every build it started
    has ended. The one local worker builds a backlog one export at a time, so this waits while it makes
    progress, and for a build that asked for a retry, until its message can come back (the build queue's
    visibility timeout). Clients of its own, not the process's environment: PynamoDB's session would keep
    the stack's credentials."""
    import types

    import boto3

    from bindery.config import Settings
    from bindery.objects import Objects
    from bindery_local import template
    from bindery_local.stack import BUCKET, TABLE
    from tests.invariants import items_of, violations

    aws = {"endpoint_url": stack.aws, "aws_access_key_id": "local", "aws_secret_access_key": "local"}
    settings = Settings(table=TABLE, bucket=BUCKET)
    store = types.SimpleNamespace(settings=settings, client=boto3.client("dynamodb", **aws))
    objects = Objects(settings)
    objects._client = boto3.client("s3", **aws)
    patience = float(template.queue_attributes("BuildQueue")["VisibilityTimeout"]) + 30
    pending, stalled_since = -1, time.monotonic()
    while pending != 0 and time.monotonic() - stalled_since < patience:
        left = sum(1 for i in items_of(store) if i.get("state") == "pending")
        if left != pending:
            pending, stalled_since = left, time.monotonic()
        time.sleep(0.5)
    return violations(store, objects, key_answers=key_answers, after_gc=False)
