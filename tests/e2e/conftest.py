from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.stack import LINK_TTL, RunningStack, start
from tests.servers import free_port


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest) -> Iterator[RunningStack]:
    """One stack per test module. A module that sets `WEBHOOK_LOCAL_HTTP = False` gets one that checks
    webhook URLs as a deployment does (https, public addresses only); otherwise `make run`'s own default,
    http to 127.0.0.1 allowed, for receivers on this machine."""
    local_http = bool(getattr(request.module, "WEBHOOK_LOCAL_HTTP", True))
    running = start(
        free_port(),
        local_http=local_http,
        BINDERY_LINK_TTL_SECONDS=str(LINK_TTL),
        BINDERY_LOCAL_SWEEP_SECONDS="1",
    )
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            running.stop()
