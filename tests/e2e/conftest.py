from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.stack import LINK_TTL, RunningStack, start
from tests.servers import free_port


@pytest.fixture(scope="module")
def stack() -> Iterator[RunningStack]:
    running = start(free_port(), BINDERY_LINK_TTL_SECONDS=str(LINK_TTL), BINDERY_LOCAL_SWEEP_SECONDS="1")
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            running.stop()
