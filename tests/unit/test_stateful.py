"""A stateful property test: Hypothesis drives submit, poll, claim, finish, fail, cancel, manuscript
replacement, build, GC, sweep, clock advance and injected faults in any order, and the promises are checked
after every step (the ones that hold at every instant) and at the end, once the system is quiescent (all).

CI runs 300 examples of 40 steps, in four shards of 75 with seeds of their own, so that the two test
workers share them; `make soak` runs ten times that (BINDERY_SOAK=10), unseeded.
"""

from __future__ import annotations

import os
import uuid
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from moto import mock_aws

from bindery.config import Settings
from bindery.objects import artifact_key
from bindery.storage import Claimed
from tests.calls import READ_ONLY, recording
from tests.conftest import FakeClock, FakeContext
from tests.faults.injector import KINDS, Crash, Injector, injector
from tests.faults.workloads import Run
from tests.figures import record
from tests.invariants import violations
from tests.unit.conftest import Stack, _new_stack, drop_table

SOAK = int(os.environ.get("BINDERY_SOAK", "1"))
SHARDS = 4
EXAMPLES = int(os.environ.get("BINDERY_STATEFUL_EXAMPLES", "300")) * SOAK
CALLERS = ("user-alice", "user-bob")
KEYS = ("k1", "k2", None)
CLASSES = (None, "fleet", "restricted")  # None: no bindery_class claim, so standard


class Lifecycle(RuleBasedStateMachine):
    examples = 0
    steps = 0
    unchanged = 0  # steps after which nothing had been written, so the promises stood as last checked

    def __init__(self) -> None:
        super().__init__()
        Lifecycle.examples += 1
        name = f"bindery-{uuid.uuid4().hex[:10]}"
        self.stack: Stack = _new_stack(Settings(table=name, bucket=name), FakeClock(), FakeContext())
        self.run = Run(self.stack)
        self.books: dict[str, str] = {}  # book -> owner
        self.exports: list[tuple[str, str, str]] = []  # (owner, book, export)
        self.batches: list[tuple[str, str]] = []  # (owner, batch)
        self.held: list[Any] = []  # claimed attempts: (Claimed, path)
        self.key_answers: dict[str, set[str]] = defaultdict(set)
        self.key_first_seen: dict[str, float] = {}  # a key is a new key once its 24 h window has passed
        self.poll_writes: list[str] = []
        self.injector: Injector | None = None
        # Whether anything may have been written since the promises were last checked: a step that wrote
        # nothing (a poll, a clock advance, a refused call) cannot have broken one, so it is not re-read.
        self.dirty = True
        for client in self._clients():
            client.meta.events.register("before-call", self._maybe_wrote)

    def _window(self, owner: str, key: str) -> str:
        """The key's identity for invariant 4: the same key in a later 24 h window is a new key."""
        name, now = f"{owner}:{key}", self.stack.clock()
        first = self.key_first_seen.get(name)
        if first is None or now - first >= self.stack.exports.settings.idempotency_ttl_seconds:
            self.key_first_seen[name] = first = now
        return f"{name}@{first}"

    def _clients(self) -> tuple[Any, Any]:
        return self.stack.store.client, self.stack.objects.client

    def _maybe_wrote(self, model: Any, **_: Any) -> None:
        if model.name not in READ_ONLY:
            self.dirty = True

    def _disarm(self) -> None:
        if self.injector is not None:
            self.injector.disarm(*self._clients())
            self.injector = None

    def _call(self, act: Any) -> Any:
        try:
            return act()
        except (Exception, Crash):
            return None
        finally:
            if self.injector is not None and self.injector.fired:
                self._disarm()

    @initialize()
    def a_book_each(self) -> None:
        for owner in CALLERS:
            reply = self.stack.http(
                "POST", "/books", caller=owner, body={"title": owner, "manuscript": "# A\n\na\n"}
            )
            self.books[reply.body["id"]] = owner

    @rule(
        data=st.data(),
        fmt=st.sampled_from(["markdown", "html"]),
        key=st.sampled_from(KEYS),
        caller_class=st.sampled_from(CLASSES),
    )
    def submit(self, data: st.DataObject, fmt: str, key: str | None, caller_class: str | None) -> None:
        book = data.draw(st.sampled_from(sorted(self.books)))
        owner = self.books[book]
        reply = self._call(
            lambda: self.stack.submit(book, fmt, caller=owner, key=key, caller_class=caller_class)
        )
        if reply is not None and reply.status == 202:
            self.exports.append((owner, book, reply.body["id"]))
            if key:
                self.key_answers[self._window(owner, key)].add(reply.body["id"])

    @rule(
        data=st.data(),
        formats=st.lists(st.sampled_from(["markdown", "html"]), min_size=1, max_size=2),
        key=st.sampled_from(KEYS),
        caller_class=st.sampled_from(CLASSES),
    )
    def submit_batch(
        self, data: st.DataObject, formats: list[str], key: str | None, caller_class: str | None
    ) -> None:
        book = data.draw(st.sampled_from(sorted(self.books)))
        owner = self.books[book]
        body = {"exports": [{"book_id": book, "format": f} for f in formats]}
        headers = {"Idempotency-Key": f"batch-{key}"} if key else None
        reply = self._call(
            lambda: self.stack.http(
                "POST", "/batches", caller=owner, body=body, headers=headers, caller_class=caller_class
            )
        )
        if reply is not None and reply.status == 202:
            self.batches.append((owner, reply.body["id"]))
            self.exports += [(owner, book, t["export_id"]) for t in reply.body["targets"]]

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def cancel_batch(self, data: st.DataObject) -> None:
        owner, batch_id = data.draw(st.sampled_from(self.batches))
        self._call(lambda: self.stack.http("DELETE", f"/batches/{batch_id}", caller=owner))

    @precondition(lambda self: self.exports)
    @rule(data=st.data())
    def poll(self, data: st.DataObject) -> None:
        owner, book, export_id = data.draw(st.sampled_from(self.exports))
        with recording(*self._clients()) as calls:
            self._call(lambda: self.stack.poll(book, export_id, caller=owner))
        self.poll_writes += calls.writes()

    @precondition(lambda self: self.exports)
    @rule(data=st.data())
    def claim(self, data: st.DataObject) -> None:
        _, book, export_id = data.draw(st.sampled_from(self.exports))
        path = artifact_key(book, export_id, uuid.uuid4().hex[:8])
        outcome = self._call(
            lambda: self.stack.store.claims.claim_build(book, export_id, path, self.stack.clock())
        )
        if isinstance(outcome, Claimed):
            # The attempt uploads right after its claim named the key (and may die any time after).
            self._call(lambda: self.stack.objects.put_bytes(path, b"an artifact"))
            self.held.append((outcome, path))

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        claimed, path = data.draw(st.sampled_from(self.held))
        self.held.remove((claimed, path))
        if not self._call(lambda: self.stack.objects.exists(path)):
            return  # its upload never happened (or cannot be seen): a real worker would not finish
        done = self._call(
            lambda: self.stack.store.claims.finish_export(
                claimed.export, path=path, size_bytes=11, built_revision=1, now=self.stack.clock()
            )
        )
        if done in ("refused", "book_deleted"):
            self._call(lambda: self.stack.objects.delete([path]))  # what the worker does when refused

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        claimed, path = data.draw(st.sampled_from(self.held))
        self.held.remove((claimed, path))
        from bindery.states import FailureCode

        self._call(
            lambda: self.stack.store.claims.fail_export(
                claimed.export, FailureCode.RENDER_FAILED, self.stack.clock()
            )
        )

    @precondition(lambda self: self.exports)
    @rule(data=st.data())
    def build(self, data: st.DataObject) -> None:
        _, book, export_id = data.draw(st.sampled_from(self.exports))
        self._call(lambda: self.stack.build(book, export_id))

    @precondition(lambda self: self.exports)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        owner, book, export_id = data.draw(st.sampled_from(self.exports))
        self._call(lambda: self.stack.http("DELETE", f"/books/{book}/exports/{export_id}", caller=owner))

    @rule(data=st.data(), text=st.sampled_from(["", "# New\n\nnew\n", "intro\n\n# X\n\nx\n# Y\n"]))
    def replace_manuscript(self, data: st.DataObject, text: str) -> None:
        book = data.draw(st.sampled_from(sorted(self.books)))
        self._call(
            lambda: self.stack.http(
                "PUT", f"/books/{book}/manuscript", caller=self.books[book], body={"manuscript": text}
            )
        )

    @rule()
    def gc(self) -> None:
        self._call(self.stack.gc)

    @rule()
    def sweep(self) -> None:
        self._call(self.stack.sweep)

    @rule(seconds=st.sampled_from([1, 60, 331, 451, 1801, 86_401]))
    def advance_clock(self, seconds: int) -> None:
        self.stack.clock.advance(seconds)

    @rule(kind=st.sampled_from(KINDS), at=st.integers(0, 6))
    def inject_fault(self, kind: str, at: int) -> None:
        self._disarm()
        self.injector = injector(kind, at)
        self.injector.arm(*self._clients())

    @invariant()
    def promises_that_hold_at_every_instant(self) -> None:
        Lifecycle.steps += 1
        if not self.dirty:
            Lifecycle.unchanged += 1
            return
        # The checks read through the same clients: an armed fault waits until they are done.
        armed = self.injector
        if armed is not None:
            armed.disarm(*self._clients())
        try:
            found = violations(
                self.stack.store,
                self.stack.objects,
                key_answers=self.key_answers,
                poll_writes=self.poll_writes,
                accepted={export_id for _, _, export_id in self.exports},
                after_gc=False,
            )
        finally:
            if armed is not None:
                armed.arm(*self._clients())
        self.dirty = False  # set again by the next call that may write
        # A pending export is fine mid-run (it has not had its chance yet); everything else must hold now.
        assert [v for v in found if "is still pending" not in v] == []

    def teardown(self) -> None:
        """At the end of every run: quiescence, then every promise, the eventual ones included."""
        self._disarm()
        self.run.quiesce()
        found = violations(
            self.stack.store,
            self.stack.objects,
            key_answers=self.key_answers,
            poll_writes=self.poll_writes,
            accepted={export_id for _, _, export_id in self.exports},
        )
        drop_table(self.stack.exports.settings.table)
        assert found == []


@pytest.mark.slow(110)
@pytest.mark.parametrize("shard", range(SHARDS))
def test_any_sequence_of_operations_and_faults_keeps_every_promise(shard: int) -> None:
    machine = type(f"Lifecycle{shard}", (Lifecycle,), {})
    if SOAK == 1:
        # CI replays the same examples every run, so a red CI is always the code's doing; `make soak`
        # explores.
        machine = seed(shard)(machine)
    Lifecycle.examples = Lifecycle.steps = Lifecycle.unchanged = 0
    with mock_aws():
        run_state_machine_as_test(
            machine,
            settings=settings(
                database=None,
                max_examples=EXAMPLES // SHARDS,
                stateful_step_count=40,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    record(f"stateful property test, shard {shard + 1} of {SHARDS}: examples run", Lifecycle.examples)
    record(
        f"stateful property test, shard {shard + 1} of {SHARDS}: steps checked (every promise after each)",
        Lifecycle.steps,
    )
    record(
        f"stateful property test, shard {shard + 1} of {SHARDS}: of them, steps that wrote nothing",
        Lifecycle.unchanged,
    )
