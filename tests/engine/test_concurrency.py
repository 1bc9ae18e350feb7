"""The concurrency queue and the mutation serializer, with aborts in every position."""

import anyio
import pytest

from fusion_nb.engine import CANCELLED, SERVER_BUSY, Aborted, AbortSignal
from fusion_nb.engine._slots import Slots

pytestmark = pytest.mark.anyio


class Gatekeeper:
    """Handlers announce they started and wait until the test lets each one finish."""

    def __init__(self):
        self.started: dict[str, anyio.Event] = {}
        self.release: dict[str, anyio.Event] = {}
        self.log: list[str] = []

    def _event(self, table, key):
        return table.setdefault(key, anyio.Event())

    async def run(self, key):
        self.log.append(f"start {key}")
        self._event(self.started, key).set()
        await self._event(self.release, key).wait()
        self.log.append(f"end {key}")
        return key

    async def started_(self, key):
        await self._event(self.started, key).wait()

    def finish(self, key):
        self._event(self.release, key).set()


async def test_queue_full_gives_server_busy_with_counts_and_aborted_waiter_frees_its_place(app):
    gate = Gatekeeper()

    @app.f.action("busy").with_string("key").concurrency(1, max_queue=1).handle
    async def busy(input, ctx):
        return await gate.run(input.key)

    a = app.start("busy", {"key": "a"})
    await gate.started_("a")
    b = app.start("busy", {"key": "b"})
    await anyio.wait_all_tasks_blocked()
    assert (a.status, b.status) == ("running", "queued")

    c = await app.call("busy", {"key": "c"})
    assert c.error.code == SERVER_BUSY
    assert "1 active, 1 queued" in c.error.message and c.error.details == {"active": 1, "queued": 1}

    b.cancel()  # the queued call leaves at once...
    assert (await b.wait()).error.code == CANCELLED
    await anyio.wait_all_tasks_blocked()
    assert app.stats().slots_queued == 0
    d = app.start("busy", {"key": "d"})  # ...so its place is free again
    await anyio.wait_all_tasks_blocked()
    assert d.status == "queued"

    gate.finish("a")
    gate.finish("d")
    assert (await a.wait()).value == "a" and (await d.wait()).value == "d"
    assert gate.log == ["start a", "end a", "start d", "end d"]


async def test_queue_is_fifo(app):
    gate = Gatekeeper()

    @app.f.action("fifo").with_string("key").concurrency(1, max_queue=5).handle
    async def fifo(input, ctx):
        return await gate.run(input.key)

    calls = [app.start("fifo", {"key": k}) for k in "abcd"]
    for key in "abcd":
        await gate.started_(key)
        gate.finish(key)
    for call in calls:
        await call.wait()
    assert [line for line in gate.log if line.startswith("start")] == ["start a", "start b", "start c", "start d"]


async def test_mutation_waiter_abort_never_hands_the_lock_on_early(app):
    """A running, B and C waiting, B aborts: C starts only after A ends."""
    gate = Gatekeeper()

    @app.f.mutation("billing.refund").with_string("key").handle
    async def refund(input, ctx):
        return await gate.run(input.key)

    a = app.start("billing.refund", {"key": "a"})
    await gate.started_("a")
    b = app.start("billing.refund", {"key": "b"})
    c = app.start("billing.refund", {"key": "c"})
    await anyio.wait_all_tasks_blocked()
    assert app.stats().slots_queued == 2

    b.cancel()
    assert (await b.wait()).error.code == CANCELLED
    await anyio.wait_all_tasks_blocked()
    assert "start c" not in gate.log, "C must not overlap A"
    assert app.stats().slots_queued == 1

    gate.finish("a")
    assert (await a.wait()).value == "a"
    await gate.started_("c")
    gate.finish("c")
    assert (await c.wait()).value == "c"
    assert gate.log == ["start a", "end a", "start c", "end c"]


async def test_mutation_running_call_aborted_releases_the_lock_after_its_cleanup(app):
    gate = Gatekeeper()
    cleanup = anyio.Event()

    @app.f.mutation("m").with_string("key").handle
    async def m(input, ctx):
        try:
            return await gate.run(input.key)
        finally:
            if input.key == "a":
                with anyio.CancelScope(shield=True):
                    await cleanup.wait()
                gate.log.append("cleaned a")

    a = app.start("m", {"key": "a"})
    await gate.started_("a")
    b = app.start("m", {"key": "b"})
    a.cancel()
    await anyio.wait_all_tasks_blocked()
    assert "start b" not in gate.log, "B waits for A's cleanup: mutations never overlap"
    cleanup.set()
    await gate.started_("b")
    gate.finish("b")
    assert (await b.wait()).value == "b"
    assert gate.log == ["start a", "cleaned a", "start b", "end b"]


async def test_mutations_of_different_tools_run_in_parallel(app):
    gate = Gatekeeper()
    app.f.mutation("x").handle(lambda input, ctx: None)

    @app.f.mutation("one").handle
    async def one(input, ctx):
        return await gate.run("one")

    @app.f.mutation("two").handle
    async def two(input, ctx):
        return await gate.run("two")

    first, second = app.start("one"), app.start("two")
    await gate.started_("one")
    await gate.started_("two")
    gate.finish("one")
    gate.finish("two")
    assert ((await first.wait()).value, (await second.wait()).value) == ("one", "two")


async def test_a_place_given_up_after_the_slot_reached_it_passes_the_slot_on():
    """The race an abort can hit: the slot is handed to B in the instant B is cancelled."""
    slots = Slots("t", 1, None)
    assert slots.reserve() is None  # A holds the slot
    b, c = slots.reserve(), slots.reserve()
    slots.release()  # A ends: the slot goes to B...
    assert b.is_set() and not c.is_set() and slots.active == 1
    slots.leave(b)  # ...which was aborted meanwhile: C gets it, nothing is lost or doubled
    assert c.is_set() and slots.active == 1 and slots.queued == 0
    slots.release()
    assert slots.idle


async def test_a_place_given_up_before_its_turn_just_leaves_the_queue():
    slots = Slots("t", 1, None)
    slots.reserve()
    b, c = slots.reserve(), slots.reserve()
    slots.leave(b)
    assert not c.is_set() and slots.queued == 1
    slots.release()
    assert c.is_set() and slots.active == 1
    slots.release()
    assert slots.idle


async def test_abort_signal_basics():
    signal = AbortSignal()
    seen = []
    undo = signal.on_abort(seen.append)
    signal.on_abort(lambda reason: seen.append("second " + reason))
    undo()
    signal.raise_if_aborted()
    async with anyio.create_task_group() as group:

        async def waiter():
            seen.append("woke " + await signal.wait())

        group.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert signal.abort("CANCELLED") is True
    assert signal.abort("TIMEOUT") is False and signal.reason == "CANCELLED"
    assert seen == ["second CANCELLED", "woke CANCELLED"]
    with pytest.raises(Aborted):
        signal.raise_if_aborted()
    signal.on_abort(lambda reason: seen.append("late " + reason))
    assert seen[-1] == "late CANCELLED"
