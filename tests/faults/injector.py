"""How a fault is placed at one AWS call: the kinds, and the hooks that strike with them.

Four kinds strike before AWS applies the call, through botocore's before-call hook: a ClientError (500), a
throttle, a timeout, and a crash (a BaseException that no `except Exception` in the code can swallow: the
process dies between two calls and the platform retries the event). The fifth strikes after: the request
reaches moto and is applied, then its answer is lost (a before-send hook registered after moto's own
raises ReadTimeoutError), and botocore resends it, as it does in AWS.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError


class Crash(BaseException):
    """The process dies here: nothing after this call runs, and nothing catches it."""


def client_error(op: str) -> BaseException:
    return ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, op)


def throttle(op: str) -> BaseException:
    code = "SlowDown" if op.endswith("Object") else "ThrottlingException"
    return ClientError({"Error": {"Code": code, "Message": "injected"}}, op)


def timeout(op: str) -> BaseException:
    return ReadTimeoutError(endpoint_url=f"https://aws/{op}")


def crash(op: str) -> BaseException:
    return Crash(op)


# Faults that strike before the call is applied.
FAULTS: dict[str, Callable[[str], BaseException]] = {
    "client_error": client_error,
    "throttle": throttle,
    "timeout": timeout,
    "crash": crash,
}
# The fault that strikes after: the call is applied and its answer lost.
LOST_ANSWER = "applied_then_lost"
KINDS = [*sorted(FAULTS), LOST_ANSWER]


@dataclass
class Injector:
    """Strikes at the `at`-th AWS call (counting from 0), once: with `fault` before the call is sent, or
    (`fault` None) by losing the answer to a call that was applied, so that botocore resends it."""

    at: int
    fault: Callable[[str], BaseException] | None
    seen: int = 0
    fired: bool = False
    _armed: bool = False
    # A build writes its cache beside its finish, in a thread (bindery.builds.alongside): calls are counted
    # one at a time, so no two get the same number.
    _counting: threading.Lock = field(default_factory=threading.Lock)

    def before_call(self, model: Any, **_: Any) -> None:
        with self._counting:
            index, self.seen = self.seen, self.seen + 1
        if index == self.at and not self.fired:
            if self.fault is not None:
                self.fired = True
                raise self.fault(model.name)
            self._armed = True

    def before_send(self, request: Any, **_: Any) -> None:
        # Registered after moto's own before-send handler: by now the request has been applied.
        if self._armed:
            self._armed, self.fired = False, True
            raise ReadTimeoutError(endpoint_url=request.url)

    def hooks(self) -> list[tuple[str, Callable[..., None]]]:
        return [("before-call", self.before_call), ("before-send", self.before_send)]

    def arm(self, *clients: Any) -> None:
        for client in clients:
            for event, hook in self.hooks():
                client.meta.events.register(event, hook)

    def disarm(self, *clients: Any) -> None:
        for client in clients:
            for event, hook in self.hooks():
                client.meta.events.unregister(event, hook)


def injector(kind: str, at: int) -> Injector:
    return Injector(at, None if kind == LOST_ANSWER else FAULTS[kind])


@contextlib.contextmanager
def scripted(
    client: Any, op: str, fault: Callable[[str], BaseException], skip: int = 0, under: str = ""
) -> Iterator[None]:
    """A workload's own failure: the (`skip`+1)-th call to `op` on `client` (on a key `under` a prefix, if
    given) fails with `fault`, once."""
    seen = {"calls": 0}

    def strike(model: Any, params: dict[str, Any], **_: Any) -> None:
        # before-call's params are the request's: its key is in its path (/<bucket>/<key>, or /<key>).
        if model.name == op and (not under or f"/{under}" in str(params.get("url_path", ""))):
            seen["calls"] += 1
            if seen["calls"] == skip + 1:
                raise fault(op)

    client.meta.events.register("before-call", strike)
    try:
        yield
    finally:
        client.meta.events.unregister("before-call", strike)
