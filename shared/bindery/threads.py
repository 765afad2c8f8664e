"""Work that waits on AWS, done beside other work that does: a build's reads and writes that depend on no
answer of each other's go at once, rather than one round trip after another."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


class Beside:
    """Each of `works` (None: nothing) in a thread of its own, started now. `wait` for them all before using
    what they did: it raises what one of them raised (any BaseException, a crash included: it is the
    caller's). `join` only waits, for a caller already failing of its own."""

    def __init__(self, *works: Callable[[], None] | None):
        self._raised: list[BaseException] = []
        self._threads = [threading.Thread(target=self._run, args=(w,), name="beside") for w in works if w]
        for thread in self._threads:
            thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as exc:  # handed to the caller's thread, raised there
            self._raised.append(exc)

    def join(self) -> None:
        for thread in self._threads:
            thread.join()

    def wait(self) -> None:
        self.join()
        if self._raised:
            raise self._raised.pop(0)


@contextlib.contextmanager
def alongside(*works: Callable[[], None] | None) -> Iterator[None]:
    """Run each of `works` beside the body, and wait for them all before going on: no thread outlives the
    block, and what one raised is raised then, unless the body raised first."""
    beside = Beside(*works)
    try:
        yield
    except BaseException:
        beside.join()
        raise
    beside.wait()
