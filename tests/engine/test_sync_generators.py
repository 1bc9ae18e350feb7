"""A sync generator handler runs whole in one worker thread, on asyncio and trio.

Its steps never touch the loop thread; progress reaches the loop coalesced, in order,
the last value before the result; an abort stops it at the next step and closes it in
its own thread (its ``finally`` runs exactly once); ``respond()`` ends it early.
"""

import threading
import time

import anyio
import pytest

from fusion_nb import progress, respond
from fusion_nb.engine import INTERNAL_ERROR

pytestmark = pytest.mark.anyio


class Recorder:
    """Thread ids of a generator's steps and of its ``finally``, written from the worker thread."""

    def __init__(self) -> None:
        self.loop_thread = threading.get_ident()
        self.step_threads: set[int] = set()
        self.finally_threads: list[int] = []
        self.steps = 0

    def step(self) -> None:
        self.steps += 1
        self.step_threads.add(threading.get_ident())

    def closed(self) -> None:
        self.finally_threads.append(threading.get_ident())

    def assert_one_thread_closed_once(self) -> None:
        (thread,) = self.step_threads
        assert thread != self.loop_thread
        assert self.finally_threads == [thread], "the generator's finally must run once, in its own thread"


@pytest.fixture
def recorder():
    return Recorder()


@pytest.fixture
def forever(app, recorder):
    """A generator that yields progress until it is stopped; it never looks at the signal."""

    @app.f.action("forever").handle
    def forever(input, ctx):
        try:
            n = 0
            while True:
                recorder.step()
                n += 1
                yield progress(min(99, n / 1000))
        finally:
            recorder.closed()

    return forever


def assert_monotonic(events):
    percents = [event.percent for event in events]
    assert percents == sorted(percents)


async def test_a_flood_runs_in_one_thread_and_delivers_the_final_value_before_the_result(app, recorder):
    n = 20_000

    @app.f.action("flood").handle
    def flood(input, ctx):
        try:
            for i in range(1, n + 1):
                recorder.step()
                yield progress(i * 100 / n, "last" if i == n else None)
            return "flooded"
        finally:
            recorder.closed()

    events, settled_at_delivery = [], []

    def on_progress(event):
        events.append(event)
        settled_at_delivery.append(call.settled)

    started = time.perf_counter()
    call = app.start("flood", on_progress=on_progress)
    result = await call.wait()
    elapsed = time.perf_counter() - started
    assert result.value == "flooded"
    assert recorder.steps == n
    recorder.assert_one_thread_closed_once()
    assert 1 <= len(events) <= n
    assert_monotonic(events)
    assert (events[-1].percent, events[-1].message) == (100.0, "last")
    assert not any(settled_at_delivery), "progress arrived after the result"
    # one thread hop per step cost ~93 us a yield (1.9 s here); one thread for all steps, ~1 us
    assert elapsed < 1.5, f"{n} yields took {elapsed:.2f} s"


@pytest.mark.parametrize("how", ["cancel the call", "cancel the awaiting task"])
async def test_an_abort_mid_flood_closes_the_generator_once_in_its_own_thread(app, forever, recorder, how):
    flowing = anyio.Event()
    events = []

    def on_progress(event):
        events.append(event)
        flowing.set()

    with anyio.CancelScope() as scope:
        call = app.start("forever", on_progress=on_progress)
        await flowing.wait()
        if how == "cancel the call":
            call.cancel()
        else:
            scope.cancel()
        await call.wait()
    assert call.status == "cancelled"
    assert await app.wait_background(10)
    recorder.assert_one_thread_closed_once()
    steps = recorder.steps
    await anyio.sleep(0.01)
    assert recorder.steps == steps, "the generator went on after it was closed"
    assert_monotonic(events)


async def test_an_inline_call_aborted_mid_flood_closes_the_generator_once(app, forever, recorder):
    with anyio.CancelScope() as scope:
        await app.run(app.request("forever", on_progress=lambda event: scope.cancel()))
    assert scope.cancelled_caught
    assert await app.wait_background(10)
    recorder.assert_one_thread_closed_once()


async def test_the_signal_is_checked_between_steps(app, recorder):
    """A generator that never looks at its signal still stops at its next step after an abort."""
    inside, release = threading.Event(), threading.Event()
    after_abort = []

    @app.f.action("blind").handle
    def blind(input, ctx):
        try:
            recorder.step()
            yield progress(10)
            inside.set()
            assert release.wait(10)
            after_abort.append("step that was running when the abort came")
            yield progress(20)
            after_abort.append("a step after the abort")  # must never run
            yield progress(30)
        finally:
            recorder.closed()

    call = app.start("blind")
    assert await anyio.to_thread.run_sync(inside.wait, 10)  # the thread is inside its second step
    assert call.cancel()
    release.set()
    assert (await call.wait()).error.code == "CANCELLED"
    assert await app.wait_background(10)
    assert after_abort == ["step that was running when the abort came"]
    recorder.assert_one_thread_closed_once()


async def test_respond_in_the_middle_stops_the_generator(app, recorder):
    after = []

    @app.f.action("early").handle
    def early(input, ctx):
        try:
            recorder.step()
            yield progress(40)
            yield respond("early answer")
            after.append("ran on after respond()")
            yield progress(80)
        finally:
            recorder.closed()

    events = []
    result = await app.call("early", on_progress=events.append)
    assert result.value == "early answer"
    assert after == []
    assert [event.percent for event in events] == [40]
    recorder.assert_one_thread_closed_once()


async def test_an_exception_in_the_generator_fails_the_call(app, recorder):
    class Broken(Exception):
        pass

    @app.f.action("broken").handle
    def broken(input, ctx):
        try:
            recorder.step()
            yield progress(50)
            raise Broken("disk on fire")
        finally:
            recorder.closed()

    events = []
    result = await app.call("broken", on_progress=events.append)
    assert result.is_error and result.error.code == INTERNAL_ERROR
    assert "Broken" in result.error.message
    assert [event.percent for event in events] == [50]
    recorder.assert_one_thread_closed_once()


async def test_a_generator_aborted_before_its_first_step_never_starts(app, recorder):
    @app.f.action("gate").handle
    def gate(input, ctx):
        recorder.step()
        yield progress(1)

    call = app.start("gate")
    call.cancel()
    assert (await call.wait()).error.code == "CANCELLED"
    assert await app.wait_background(10)
    assert recorder.steps == 0


async def test_a_failing_progress_listener_does_not_stop_the_generator(app):
    @app.f.action("listened").handle
    def listened(input, ctx):
        for i in range(1, 101):
            yield progress(i)
        return "done"

    def broken_listener(event):
        raise RuntimeError("view crashed")

    assert (await app.call("listened", on_progress=broken_listener)).value == "done"
