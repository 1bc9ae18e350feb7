"""Inline calls (``start(..., inline=True)``): the pipeline runs in the waiting task, as MCP requests do."""

import anyio
import pytest

from fusion_nb import progress
from fusion_nb.engine import CANCELLED, SERVER_BUSY, TIMEOUT

pytestmark = pytest.mark.anyio


async def test_inline_call_runs_in_the_waiting_task_with_progress(app):
    events = []

    @app.f.action("gen").handle
    async def gen(input, ctx):
        yield progress(50, "half")
        yield progress(100)

    call = app.start("gen", inline=True, on_progress=events.append)
    assert call.status == "queued" and app.background_tasks == 0
    result = await call.wait()
    assert not result.is_error and [e.percent for e in events] == [50, 100]
    assert app.background_tasks == 0


async def test_cancelling_the_waiting_task_aborts_an_inline_call(app, slow):
    entered, cleaned = slow
    call = app.start("slow", inline=True)
    async with anyio.create_task_group() as group:
        group.start_soon(call.wait)
        await entered.wait()
        group.cancel_scope.cancel()
    assert call.result.error.code == CANCELLED and cleaned == [True]


async def test_abort_from_elsewhere_answers_the_inline_waiter(app, slow):
    entered, cleaned = slow
    call = app.start("slow", inline=True)
    async with anyio.create_task_group() as group:
        results = []
        group.start_soon(lambda: _collect(call, results))
        await entered.wait()
        call.cancel()  # e.g. a widget's Cancel button
    assert results[0].error.code == CANCELLED and cleaned == [True]


async def _collect(call, results):
    results.append(await call.wait())


async def test_inline_calls_queue_and_serialize_like_detached_ones(app):
    started, release = {k: anyio.Event() for k in "abc"}, anyio.Event()

    @app.f.mutation("m").with_string("key").concurrency(1, max_queue=1).handle
    async def m(input, ctx):
        started[input.key].set()
        await release.wait()
        return input.key

    a, b = app.start("m", {"key": "a"}, inline=True), app.start("m", {"key": "b"}, inline=True)
    results = []
    async with anyio.create_task_group() as group:
        group.start_soon(_collect, a, results)  # an inline call takes its place when first awaited
        await started["a"].wait()
        group.start_soon(_collect, b, results)
        await anyio.wait_all_tasks_blocked()
        assert (await app.call("m", {"key": "c"}, inline=True)).error.code == SERVER_BUSY
        assert not started["b"].is_set()
        release.set()
    assert sorted(r.value for r in results) == ["a", "b"]


async def test_tools_with_a_timeout_run_detached_even_when_inline_is_asked(app):
    release = anyio.Event()

    @app.f.action("deaf").timeout(0.05).handle
    async def deaf(input, ctx):
        with anyio.CancelScope(shield=True):
            await release.wait()

    result = await app.call("deaf", inline=True)
    assert result.error.code == TIMEOUT  # at once, although the handler ignores the cancellation
    release.set()


async def test_an_inline_call_aborted_by_its_own_middleware_leaves_the_caller_usable(app):
    async def aborts(ctx, call_next):
        next(c for c in ctx.app.active_calls if c.id == ctx.call_id).cancel()
        return await call_next()

    app.f.action("self").use(aborts).handle(lambda input, ctx: "never")
    result = await app.call("self", inline=True)
    assert result.error.code == CANCELLED
    await anyio.sleep(0)  # no stray cancellation is left pending on this task
    await anyio.sleep(0)


async def test_a_handler_swallowing_an_inline_abort_leaves_the_caller_usable(app):
    entered = anyio.Event()

    @app.f.action("swallow").handle
    async def swallow(input, ctx):
        entered.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            return "swallowed"

    call = app.start("swallow", inline=True)
    results = []
    async with anyio.create_task_group() as group:
        group.start_soon(_collect, call, results)
        await entered.wait()
        call.cancel()
    assert results[0].error.code == CANCELLED
    await anyio.sleep(0)
