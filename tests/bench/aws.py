"""Where the bench's AWS is: the environment its child processes run in, and the servers and tables the
sections measure against (moto's server for S3, DynamoDB Local for the table where a real engine's costs
matter)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
# valgrind's cachegrind counts every instruction a process runs in user space (not what it waits for): the
# same work counts the same to a few parts in a million, where its wall and CPU time on this machine vary by
# half (a poll handler's import: 307-463 ms of CPU from one run to the next).
VALGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
K = TypeVar("K")


def child_env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    return {
        **base,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        # This tree's code first, whichever tree the venv was installed from (a worktree runs its own).
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "shared")]),
        **extra,
    }


@dataclass(frozen=True)
class Aws:
    """Where a child process finds S3 and DynamoDB."""

    s3: str
    dynamodb: str

    def env(self) -> dict[str, str]:
        return child_env(AWS_ENDPOINT_URL=self.s3, AWS_ENDPOINT_URL_DYNAMODB=self.dynamodb)

    def client(self, service: str) -> Any:
        """A client for this process, with the children's credentials and region."""
        import boto3

        return boto3.session.Session(
            aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
        ).client(service, endpoint_url=self.dynamodb if service == "dynamodb" else self.s3)


@contextlib.contextmanager
def build_servers() -> Iterator[tuple[Aws, str]]:
    """The builds' AWS and the name of their table and bucket (one name for both). S3 is moto's server, in
    a process of its own; the table is DynamoDB Local's, whose transactions cost what a real engine's do
    (moto copies every table to make each transaction undoable)."""
    from bindery_local.template import create_table
    from tests.servers import dynamodb_local, free_port, wait_for_port

    ddb = contextlib.ExitStack()
    port = free_port()
    server = subprocess.Popen(
        [PY, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=child_env(),
    )
    table = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        wait_for_port(port, server)
        aws = Aws(s3=f"http://127.0.0.1:{port}", dynamodb=ddb.enter_context(dynamodb_local()))
        create_table(aws.client("dynamodb"), table)
        aws.client("s3").create_bucket(Bucket=table)
        yield aws, table
    finally:
        ddb.close()
        server.terminate()
        server.wait(timeout=20)


@contextlib.contextmanager
def servers_here() -> Iterator[tuple[str, str]]:
    """DynamoDB Local's endpoint and an S3 endpoint served by moto in this process (a thread), for the
    sections that time calls made from here: a server in this process answers without a second process's
    scheduling in the timing."""
    from moto.server import ThreadedMotoServer

    from tests.servers import dynamodb_local, free_port

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    s3.start()
    try:
        with dynamodb_local() as ddb:
            yield ddb, f"http://127.0.0.1:{port}"
    finally:
        s3.stop()


def local_service(ddb: str, s3: str, **settings_overrides: Any) -> Any:
    """Every handler's services in this process (`tests.services.wired`), on a table and bucket of their
    own at these endpoints."""
    import boto3

    from bindery.config import Settings
    from bindery.objects import Objects
    from bindery.storage import Store
    from bindery_local.template import create_table
    from tests.services import wired

    os.environ.update(child_env(AWS_ENDPOINT_URL_DYNAMODB=ddb, AWS_ENDPOINT_URL_S3=s3))
    name = f"bench-{uuid.uuid4().hex[:8]}"
    create_table(boto3.client("dynamodb"), name)
    boto3.client("s3").create_bucket(Bucket=name)
    settings = Settings(table=name, bucket=name, **settings_overrides)
    return wired(settings, Store(settings), Objects(settings), time.time)


def instructions(commands: dict[K, list[str]], env: dict[str, str]) -> dict[K, int]:
    """The instructions each command's process runs, under cachegrind, all at once (a count does not depend
    on what else runs)."""
    probes = {
        key: subprocess.Popen(
            [*VALGRIND, *command],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for key, command in commands.items()
    }
    counts = {}
    for key, probe in probes.items():
        _, err = probe.communicate()
        found = re.search(r"I\s+refs:\s+([\d,]+)", err)
        if probe.returncode or found is None:
            raise RuntimeError(f"{commands[key]}: {err[-2000:]}")
        counts[key] = int(found.group(1).replace(",", ""))
    return counts
