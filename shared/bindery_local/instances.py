"""Lambda's instances, locally: each function runs in processes of its own, several side by side.

An instance is a process that holds one function's handler and handles one event at a time, as a Lambda
instance does; its module state (Powertools' resolver, the batch processor, the clients a handler builds
lazily) is its own. A function's pool starts an instance when an event finds none idle, up to the
function's concurrency; past it, the event waits for the next instance to come free, as Lambda throttles
past a function's reserved concurrency. Instances stay warm once started, and an event goes to the one
that came free last, as Lambda keeps its warmest instances busy.

Instances are forked from multiprocessing's fork server, which imported every handler once before it forked
any (`start_instances`): a new instance is up in milliseconds with its handler imported, the way SnapStart
resumes an instance from a snapshot taken after its init, and its module state is its copy from then on.
The fork server is a process of its own with one thread, so a fork never copies a thread of the stack's.
"""

from __future__ import annotations

import collections
import ctypes
import importlib
import itertools
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from typing import Any

from bindery_local.context import LambdaContext

Setup = Callable[[str], None]  # run in each new instance, with its function's name, before its handler
_PR_SET_PDEATHSIG = 1


class InstanceFailed(RuntimeError):
    """The handler raised, or its instance died, while it handled the event: Lambda's invocation error."""


def _die_with_parent() -> None:
    """An instance ends when the fork server that forked it does, which ends when the stack does, even by
    `kill -9` of the stack alone: nothing is left running a build against an AWS that is gone."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _serve(function: str, module: str, conn: Connection, setup: Setup) -> None:
    # Ctrl-C reaches the whole process group; the stack stops its instances itself, after its gateway.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    try:
        setup(function)
        handler = importlib.import_module(module).handler
    except BaseException:
        conn.send(("failed", traceback.format_exc()))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            event = conn.recv()
        except EOFError:  # the stack is gone
            return
        try:
            result = handler(event, LambdaContext(function, timeout_ms=300_000))
        except Exception:
            conn.send(("raised", traceback.format_exc()))
        else:
            conn.send(("returned", result))


class Instance:
    def __init__(
        self, context: ForkServerContext, function: str, module: str, number: int, setup: Setup
    ) -> None:
        self.function, self.number = function, number
        self._conn, theirs = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(function, module, theirs, setup), name=f"{function}#{number}", daemon=True
        )
        self.process.start()
        theirs.close()
        kind, detail = self._conn.recv()
        if kind != "ready":
            self.process.join(timeout=5)
            raise InstanceFailed(f"{function}: its handler did not import:\n{detail}")
        self.pid: int = detail
        self.gone = False  # its process ended (or its pipe broke): it takes no more events

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        try:
            self._conn.send(event)
            kind, detail = self._conn.recv()
        except (EOFError, OSError) as exc:
            self.gone = True
            raise InstanceFailed(f"{self.function}#{self.number} died while it handled an event") from exc
        if kind == "raised":
            raise InstanceFailed(f"{self.function}: the handler raised:\n{detail}")
        result: dict[str, Any] = detail
        return result

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.terminate()


class _Turn:
    """An event waiting for an instance: the instance (or None: a place to start one) is handed over."""

    def __init__(self) -> None:
        self.handed = threading.Lock()
        self.handed.acquire()
        self.instance: Instance | None = None
        self.refused = False


class Pool:
    """One function's instances: at most `concurrency` of them, each handling one event at a time."""

    def __init__(
        self, context: ForkServerContext, function: str, module: str, concurrency: int, setup: Setup
    ):
        if concurrency < 1:
            raise ValueError(f"{function}: a concurrency of {concurrency}; it takes 1 or more")
        self.function, self.module, self.concurrency = function, module, concurrency
        self._context, self._setup = context, setup
        self._idle: list[Instance] = []
        self._started: list[Instance] = []
        self._guard = threading.Lock()
        self._waiting: collections.deque[_Turn] = collections.deque()
        self._stopped = False
        self._busy = 0  # instances handling an event, and places held for instances starting
        self._numbers = itertools.count(1)

    def _start_one(self) -> Instance:
        instance = Instance(self._context, self.function, self.module, next(self._numbers), self._setup)
        with self._guard:
            self._started.append(instance)
        return instance

    def warm(self) -> None:
        """One instance started now: its handler imports, or the stack does not start."""
        instance = self._start_one()
        with self._guard:
            self._idle.append(instance)

    def _take(self) -> Instance | None:
        """An idle instance, or None once there is room to start one. Either way its place is held.

        Events take instances in the order they came: one that finds others waiting waits behind them, and
        an instance that comes free goes to the oldest waiter, handed over with its place. Woken in no order
        (a bare Condition), one caller of 64 waited 3 times the median for a read, behind later ones; woken
        all at once to find whose turn it was, 56 waiters took the gateway's interpreter lock at each
        event's end."""
        with self._guard:
            if self._stopped:
                raise InstanceFailed(f"{self.function}: the stack is stopping")
            if not self._waiting and (self._idle or self._busy < self.concurrency):
                self._busy += 1
                return self._idle.pop() if self._idle else None  # the one that came free last: the warmest
            turn = _Turn()
            self._waiting.append(turn)
        turn.handed.acquire()  # released by the event before us in turn
        if turn.refused:
            raise InstanceFailed(f"{self.function}: the stack is stopping")
        return turn.instance

    def _give_back(self, instance: Instance | None, healthy: bool) -> None:
        with self._guard:
            if instance is not None and not healthy:
                self._started.remove(instance)  # its place goes on, to a new instance
            kept = instance if healthy else None
            if self._waiting:
                turn = self._waiting.popleft()
                turn.instance = kept  # the place goes with it: the count of busy ones stays
                turn.handed.release()
                return
            self._busy -= 1
            if kept is not None:
                self._idle.append(kept)

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        instance, healthy = self._take(), False
        try:
            if instance is None:
                instance = self._start_one()
            result = instance.invoke(event)
            healthy = True
            return result
        except InstanceFailed:
            healthy = instance is not None and not instance.gone
            raise
        finally:
            self._give_back(instance, healthy)

    @property
    def started(self) -> int:
        return len(self._started)

    def stop(self) -> None:
        with self._guard:
            self._stopped = True
            while self._waiting:  # an event still waiting is refused
                turn = self._waiting.popleft()
                turn.refused = True
                turn.handed.release()
            instances = list(self._started)
        for instance in instances:
            instance.stop()

    def join(self, timeout: float) -> None:
        for instance in list(self._started):
            instance.process.join(timeout=timeout)
            if instance.process.is_alive():
                instance.process.kill()


def start_instances(
    functions: dict[str, str], concurrency: dict[str, int], setup: Setup, snapshot: tuple[str, ...] = ()
) -> dict[str, Pool]:
    """A pool per function (name: its handler's module), each with one warm instance, from a fork server
    that imported the `snapshot` modules and then every handler first. Call it from the main thread, with
    the environment the handlers are to see: the fork server takes the process's environment and signal
    mask when it starts."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([*snapshot, *functions.values()])
    pools = {
        name: Pool(context, name, module, concurrency[name], setup) for name, module in functions.items()
    }
    for pool in pools.values():
        pool.warm()
    return pools
