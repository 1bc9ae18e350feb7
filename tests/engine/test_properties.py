"""Property tests: random interleavings of start / abort / finish against one limited tool.

Hypothesis draws the tool's ``concurrency(max_active, max_queue)`` and a sequence of
operations: start a call, abort the k-th call, let the k-th call's body finish. Each
body waits on an event of its own that only "finish" sets, so the run is deterministic:
after every operation the test waits until the engine is quiescent (every task blocked
and every thread the engine started either inside its body or back on the loop).
Async bodies stop when aborted; sync bodies ignore their signal, as careless ones do,
and run on until finished (their slots must stay held meanwhile: issue 10, "limits hold").

Properties, for async and sync bodies, an ``action`` and a (serialized) ``mutation``,
on asyncio and trio:

- bodies enter in the order their calls started (FIFO), whatever was aborted;
- never more than ``max_active`` bodies at once (one for a mutation), counted inside
  the bodies, threads included;
- a call is refused (SERVER_BUSY) exactly when every slot and queue place is taken,
  and a queued call never waits while a slot is free;
- every call settles exactly once (its watch listener sees one final status), as
  CANCELLED if it was aborted first and with its own value otherwise;
- afterwards ``app.stats()`` is all zero.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from engine_helpers import assert_idle
from hypothesis import given, settings
from hypothesis import strategies as st

from fusion_nb import Fusion
from fusion_nb.engine import CANCELLED, SERVER_BUSY, Call

Op = tuple[str, int]

OPERATIONS = st.lists(
    st.one_of(
        st.just(("start", 0)),
        st.tuples(st.just("abort"), st.integers(0, 15)),
        st.tuples(st.just("finish"), st.integers(0, 15)),
    ),
    min_size=1,
    max_size=24,
)


@dataclass
class Bodies:
    """What the bodies report (under a lock: sync bodies run in threads)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    inside: int = 0
    most: int = 0
    entered: list[int] = field(default_factory=list)

    def enter(self, index: int) -> None:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
            self.entered.append(index)

    def leave(self) -> None:
        with self.lock:
            self.inside -= 1


@dataclass
class Scenario:
    """One drawn example: the tool's limits, its calls, and what was observed of them."""

    kind: str
    verb: str
    max_active: int
    max_queue: int
    bodies: Bodies = field(default_factory=Bodies)
    calls: list[Call] = field(default_factory=list)
    releases: list[Any] = field(default_factory=list)
    refused: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)
    finals: dict[int, list[str]] = field(default_factory=dict)

    @property
    def cap(self) -> int:
        """How many bodies may run at once: a mutation is serialized whatever its concurrency."""
        return 1 if self.verb == "mutation" else self.max_active

    def build(self) -> Fusion:
        """An app with the one limited tool; each body waits for its own "finish"."""
        # Abandoned threads are bounded per app (TEAM.md item 7); here only the tool's own limit is tested.
        app = Fusion("properties", grace=5.0, max_abandoned_threads=1000)
        bodies, releases = self.bodies, self.releases
        builder = (app.f.mutation if self.verb == "mutation" else app.f.action)("limited")
        builder = builder.with_integer("i").concurrency(self.max_active, self.max_queue)
        if self.kind == "async":

            async def body(input: Any, ctx: Any) -> int:
                bodies.enter(input.i)
                try:
                    await releases[input.i].wait()
                    return int(input.i)
                finally:
                    bodies.leave()

            builder.handle(body)
        else:

            def sync_body(input: Any, ctx: Any) -> int:  # ignores ctx.signal: only "finish" ends it
                bodies.enter(input.i)
                try:
                    releases[input.i].wait(30)
                    return int(input.i)
                finally:
                    bodies.leave()

            builder.handle(sync_body)
        return app

    async def quiesce(self, app: Fusion) -> None:
        """Wait until every task is blocked and every engine thread is inside its body (or done)."""
        with anyio.fail_after(5):
            while True:
                await anyio.wait_all_tasks_blocked()
                assert self.bodies.most <= self.cap, f"{self.bodies.most} bodies ran at once (limit {self.cap})"
                if self.kind == "async":
                    return
                with self.bodies.lock:
                    inside = self.bodies.inside
                running = app.stats().threads_running  # (the loop is ours: no thread is reported back meanwhile)
                assert running >= inside, (
                    f"{inside} bodies still run but the engine counts {running} threads: "
                    "it stopped waiting for a body that ignores its signal"
                )
                if running == inside:
                    return
                await anyio.sleep(0.001)

    def start(self, app: Fusion) -> None:
        """Start the next call; it is refused exactly when every slot and queue place is taken."""
        index = len(self.calls)
        self.releases.append(anyio.Event() if self.kind == "async" else threading.Event())
        before = app.stats()
        call = app.start("limited", {"i": index})
        self.calls.append(call)
        finals = self.finals[index] = []
        if call.settled:
            finals.append(str(call.status))
        call.watch(lambda c: finals.append(str(c.status)) if c.settled else None)
        busy = call.settled and call.result is not None and call.result.error is not None
        if busy:
            assert call.result is not None and call.result.error is not None
            assert call.result.error.code == SERVER_BUSY, call.result
            self.refused.add(index)
        if self.verb == "action":  # (a mutation's serializer is in the same sums)
            full = before.slots_active + before.slots_queued >= self.max_active + self.max_queue
            assert busy == full, f"refused={busy} with {before.slots_active} active, {before.slots_queued} queued"

    async def run(self, ops: list[Op]) -> None:
        """Apply the operations one at a time, quiescing after each, then drain and check."""
        app = self.build()
        try:
            for op, k in ops:
                if op == "start":
                    self.start(app)
                elif self.calls:
                    index = k % len(self.calls)
                    if op == "abort":
                        if self.calls[index].cancel():
                            self.aborted.add(index)
                    else:
                        self.releases[index].set()
                await self.quiesce(app)
                if self.verb == "action":
                    stats = app.stats()
                    assert stats.slots_queued == 0 or stats.slots_active == self.max_active, stats
        finally:
            for release in self.releases:
                release.set()
        assert await app.wait_background(10), "background tasks did not finish"
        self.check(app)

    def check(self, app: Fusion) -> None:
        """The properties of the module docstring, once everything has drained."""
        entered = self.bodies.entered
        assert entered == sorted(entered) and len(set(entered)) == len(entered), f"not FIFO: {entered}"
        assert self.bodies.most <= self.cap
        assert self.bodies.inside == 0
        for index, call in enumerate(self.calls):
            result = call.result
            assert result is not None, f"call {index} never settled"
            assert len(self.finals[index]) == 1, f"call {index} settled as {self.finals[index]}"
            if index in self.refused:
                continue
            if index in self.aborted:
                assert result.error is not None and result.error.code == CANCELLED, result
                assert self.finals[index] == ["cancelled"]
            else:
                assert result.value == index and self.finals[index] == ["done"], result
                assert index in entered
        assert_idle(app)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("verb", ["action", "mutation"])
@pytest.mark.parametrize("kind", ["async", "sync"])
@settings(max_examples=40)
@given(max_active=st.integers(1, 3), max_queue=st.integers(0, 3), ops=OPERATIONS)
def test_random_interleavings_keep_fifo_limits_and_settle_every_call_once(
    kind: str, verb: str, backend: str, max_active: int, max_queue: int, ops: list[Op]
) -> None:
    """Each example runs in a fresh event loop of its backend (hypothesis drives a sync test)."""
    scenario = Scenario(kind, verb, max_active, max_queue)
    anyio.run(scenario.run, ops, backend=backend)
