"""One abort signal through every stage, with deterministic orderings (events, not sleeps)."""

import threading

import anyio
import pytest
from engine_helpers import start_inline

from fusion_nb import progress, respond
from fusion_nb.engine import CANCELLED, TIMEOUT, Aborted

pytestmark = pytest.mark.anyio


def own_call(ctx):
    """The call a handler or middleware runs in, found through the public API."""
    return next(call for call in ctx.app.active_calls if call.id == ctx.call_id)


async def wait_ignoring_cancellation(event):
    """A handler that refuses to stop: on trio a shield holds off the cancelled scope;
    on asyncio the call's task gets a single CancelledError, which this swallows."""
    while not event.is_set():
        try:
            with anyio.CancelScope(shield=True):
                await event.wait()
        except anyio.get_cancelled_exc_class():
            continue


async def test_generator_stuck_before_its_first_yield_is_cancelled_and_cleans_up(app):
    entered, cleaned = anyio.Event(), anyio.Event()

    @app.f.action("stuck").handle
    async def stuck(input, ctx):
        try:
            entered.set()
            await anyio.sleep_forever()
            yield progress(1)
        finally:
            cleaned.set()

    call = app.start("stuck")
    await entered.wait()
    assert call.cancel()
    result = await call.wait()
    assert result.error.code == CANCELLED and call.status == "cancelled"
    with anyio.fail_after(5):
        await cleaned.wait()


async def test_cancelling_the_awaiting_task_aborts_the_call(app, slow):
    entered, cleaned = slow
    async with anyio.create_task_group() as group:
        group.start_soon(app.call, "slow")
        await entered.wait()
        group.cancel_scope.cancel()
    assert app.active_calls == []
    assert await app.wait_background(5) and cleaned == [True]


async def test_abort_settles_at_once_while_cleanup_runs_in_the_background(app):
    """The caller's answer never waits for the handler's cleanup."""
    entered, cleanup_started, finish_cleanup, cleaned = (anyio.Event() for _ in range(4))

    @app.f.action("tidy").handle
    async def tidy(input, ctx):
        try:
            entered.set()
            await anyio.sleep_forever()
            yield progress(1)
        finally:
            cleanup_started.set()
            with anyio.CancelScope(shield=True):  # trio cancels level-triggered: shield cleanup
                await finish_cleanup.wait()
            cleaned.set()

    call = app.start("tidy")
    await entered.wait()
    call.cancel()
    result = await call.wait()  # returns although cleanup is blocked
    assert result.error.code == CANCELLED
    await cleanup_started.wait()
    assert not cleaned.is_set()
    finish_cleanup.set()
    await cleaned.wait()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # trio cancels level-triggered by design: cleanup shields there
async def test_asyncio_cleanup_may_await_without_shielding(app, anyio_backend):
    """On asyncio a call's task gets one CancelledError, so ``finally: await ...`` works."""
    entered, cleaned = anyio.Event(), anyio.Event()

    @app.f.action("closing").handle
    async def closing(input, ctx):
        try:
            entered.set()
            await anyio.sleep_forever()
        finally:
            await anyio.sleep(0)
            await anyio.sleep(0)
            cleaned.set()

    call = app.start("closing")
    await entered.wait()
    call.cancel()
    await cleaned.wait()


async def test_a_handler_that_swallows_cancellation_still_gives_cancelled_at_once(app):
    entered, swallowed, release = anyio.Event(), anyio.Event(), anyio.Event()

    @app.f.action("stubborn").handle
    async def stubborn(input, ctx):
        try:
            entered.set()
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            swallowed.set()
            await wait_ignoring_cancellation(release)
        return "late result"

    call = app.start("stubborn")
    await entered.wait()
    call.cancel()
    result = await call.wait()
    assert result.error.code == CANCELLED and result.value is None
    await swallowed.wait()
    release.set()  # the late result is discarded
    assert await app.wait_background(5)
    assert call.result is result


async def test_grace_reports_an_overdue_cleanup_once_and_never_interrupts_it(app, caplog):
    """One rule on both backends: after grace a warning, the cleanup runs on, the slots stay held."""
    app.grace = 0.05
    entered, release, finished = anyio.Event(), anyio.Event(), []

    @app.f.mutation("hog").concurrency(1).handle
    async def hog(input, ctx):
        entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await release.wait()
            finished.append(True)

    first = app.start("hog")
    await entered.wait()
    first.cancel()
    assert first.result.error.code == CANCELLED  # answered at once
    with anyio.fail_after(5):
        while "still cleaning up" not in caplog.text:
            await anyio.sleep(0.01)
    assert app.stats().slots_active == 2  # concurrency slot and serializer: the body has not stopped
    busy = await app.call("hog")
    assert busy.error.code == "SERVER_BUSY"
    release.set()
    assert await app.wait_background(5)
    assert finished == [True]
    assert caplog.text.count("still cleaning up") == 1
    assert app.stats().idle


async def test_middleware_gate_stops_an_aborted_call_before_the_handler(app):
    ran = []

    async def aborts_then_continues(ctx, call_next):
        own_call(ctx).cancel()  # e.g. the client cancelled while middleware was working
        return await call_next()

    @app.f.action("gated").use(aborts_then_continues).handle
    async def gated(input, ctx):
        ran.append(True)

    result = await app.call("gated")
    assert result.error.code == CANCELLED
    assert ran == []


async def test_gate_between_every_middleware_stage(app):
    order = []

    def mw(name, abort=False):
        async def middleware(ctx, call_next):
            order.append(name)
            if abort:
                own_call(ctx).cancel()
            return await call_next()

        return middleware

    app.use(mw("app"))
    app.f.action("t").use(mw("first", abort=True)).use(mw("second")).handle(lambda input, ctx: order.append("handler"))
    assert (await app.call("t")).error.code == CANCELLED
    assert order == ["app", "first"]


async def test_sync_handler_is_abandoned_and_can_stop_cooperatively(app):
    started, may_finish, stopped = threading.Event(), threading.Event(), threading.Event()

    @app.f.action("blocking").handle
    def blocking(input, ctx):
        started.set()
        may_finish.wait(10)
        try:
            ctx.signal.raise_if_aborted()
            return "too late"
        except Aborted:
            stopped.set()
            raise

    call = app.start("blocking")
    await anyio.to_thread.run_sync(started.wait, 10)
    call.cancel()
    assert (await call.wait()).error.code == CANCELLED  # settled while the thread still runs
    assert not stopped.is_set()
    may_finish.set()
    assert await anyio.to_thread.run_sync(stopped.wait, 10)
    assert call.result.value is None


async def test_sync_generator_aborted_mid_step_is_closed_by_its_own_thread(app):
    in_step, may_continue = threading.Event(), threading.Event()
    closed_in = []

    @app.f.action("sgen").handle
    def sgen(input, ctx):
        try:
            yield progress(10)
            in_step.set()
            may_continue.wait(10)
            yield progress(20)
            yield progress(30)
        finally:
            closed_in.append(threading.current_thread().name)

    call = app.start("sgen")
    await anyio.to_thread.run_sync(in_step.wait, 10)
    call.cancel()
    assert (await call.wait()).error.code == CANCELLED
    assert closed_in == []
    may_continue.set()
    assert await app.wait_background(5)
    with anyio.fail_after(5):
        while not closed_in:
            await anyio.sleep(0.01)
    assert closed_in != [threading.current_thread().name]


async def test_timeout_gives_timeout(app):
    cleaned = anyio.Event()

    @app.f.action("slow").timeout(0.05).handle
    async def slow(input, ctx):
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.set()

    result = await app.call("slow")
    assert result.error.code == TIMEOUT and "0.05 s" in result.error.message
    await cleaned.wait()


async def test_timeout_fires_even_when_the_handler_ignores_cancellation(app):
    release = anyio.Event()

    @app.f.action("deaf").timeout(0.05).handle
    async def deaf(input, ctx):
        await wait_ignoring_cancellation(release)

    result = await app.call("deaf")
    assert result.error.code == TIMEOUT
    release.set()


async def test_signal_is_visible_to_the_handler_and_wait_returns_the_reason(app):
    reasons, entered = [], anyio.Event()

    @app.f.action("watcher").handle
    async def watcher(input, ctx):
        entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            reasons.append(ctx.signal.reason)
            reasons.append(ctx.signal.aborted)

    call = app.start("watcher")
    await entered.wait()
    call.cancel()
    await app.wait_background(5)
    assert reasons == [CANCELLED, True]


async def test_progress_after_abort_is_dropped(app):
    entered, events = anyio.Event(), []

    @app.f.action("late").handle
    async def late(input, ctx):
        yield progress(10)
        entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            calls[0].report(progress(99))  # what a late yield would do

    calls = []
    call = app.start("late", on_progress=events.append)
    calls.append(call)
    await entered.wait()
    call.cancel()
    await call.wait()
    await app.wait_background(5)
    assert [e.percent for e in events] == [10]


async def test_app_aclose_aborts_live_calls(app):
    entered = anyio.Event()

    @app.f.action("forever").handle
    async def forever(input, ctx):
        entered.set()
        await anyio.sleep_forever()

    call = app.start("forever")
    await entered.wait()
    await app.aclose()
    assert call.result.error.code == CANCELLED


async def test_cancel_before_the_worker_starts(app):
    ran = []

    @app.f.action("never").handle
    async def never(input, ctx):
        ran.append(True)

    call = app.start("never")
    call.cancel()
    assert (await call.wait()).error.code == CANCELLED
    assert await app.wait_background(5)
    assert ran == []


async def test_respond_then_cleanup_order(app):
    order = []

    @app.f.action("ordered").handle
    async def ordered(input, ctx):
        try:
            yield respond("value")
        finally:
            order.append("finally")

    result = await app.call("ordered")
    order.append("result")
    assert result.value == "value" and order == ["finally", "result"]


async def test_several_waiters_for_the_background_all_wake(app, slow):
    entered, cleaned = slow
    call = app.start("slow")
    await entered.wait()
    woke = []

    async def waiter(name):
        assert await app.wait_background(5)
        woke.append(name)

    async with anyio.create_task_group() as group:
        group.start_soon(waiter, "first")
        group.start_soon(waiter, "second")
        await anyio.wait_all_tasks_blocked()
        call.cancel()
    assert sorted(woke) == ["first", "second"] and cleaned == [True]


async def test_wait_stopped_tells_when_an_aborted_body_has_really_stopped(app):
    """A call answers at once; ``wait_stopped`` waits for its cleanup (hosts say "its cleanup ran")."""
    entered, release = anyio.Event(), anyio.Event()

    @app.f.action("slow_cleanup").handle
    async def slow_cleanup(input, ctx):
        entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await release.wait()

    for inline in (False, True):
        async with anyio.create_task_group() as group:
            if inline:
                call = await start_inline(group, app, app.request("slow_cleanup"))
            else:
                call = app.start("slow_cleanup")
                group.start_soon(call.wait)
            await entered.wait()
            call.cancel()
            assert call.settled and not call.body_stopped
            release.set()
            with anyio.fail_after(5):
                await call.wait_stopped()
        assert call.body_stopped
        entered, release = anyio.Event(), anyio.Event()
    assert await app.wait_background(5)
    assert app.stats().idle
