"""Inline runs (``await app.run(request)``): the pipeline runs in the awaiting task, as MCP requests do."""

import threading

import anyio
import pytest
from engine_helpers import start_inline

from fusion_nb import progress
from fusion_nb.engine import CANCELLED, INVALID_INPUT, SERVER_BUSY, TIMEOUT, UNKNOWN_TOOL, CallRequest

pytestmark = pytest.mark.anyio


async def test_inline_call_runs_in_the_waiting_task_with_progress(app):
    events = []

    @app.f.action("gen").handle
    async def gen(input, ctx):
        yield progress(50, "half")
        yield progress(100)

    request = app.request("gen", on_progress=events.append)
    assert app.background_tasks == 0 and app.active_calls == []  # a request is only data until it runs
    result = await app.run(request)
    assert not result.is_error and [e.percent for e in events] == [50, 100]
    assert app.background_tasks == 0


async def test_cancelling_the_waiting_task_aborts_an_inline_call(app, slow):
    entered, cleaned = slow
    async with anyio.create_task_group() as group:
        call = await start_inline(group, app, app.request("slow"))
        await entered.wait()
        group.cancel_scope.cancel()
    assert call.result.error.code == CANCELLED and cleaned == [True]
    assert call.status == "cancelled"


async def test_an_inline_run_cancelled_from_outside_settles_once_after_its_handler_unwound(app, slow):
    entered, cleaned = slow
    finals = []
    async with anyio.create_task_group() as group:
        call = await start_inline(group, app, app.request("slow"))
        call.watch(lambda c: finals.append((c.status, list(cleaned))) if c.settled else None)

        async def outside():
            await entered.wait()
            group.cancel_scope.cancel()  # the caller's caller goes away (a client dropping its request)

        group.start_soon(outside)
    assert cleaned == [True] and finals == [("cancelled", [True])]  # settled once, after the handler unwound
    assert call.result.error.code == CANCELLED and call.body_stopped


async def test_abort_from_elsewhere_answers_the_inline_waiter(app, slow):
    entered, cleaned = slow
    results = []
    async with anyio.create_task_group() as group:

        async def run():
            results.append(await app.run(app.request("slow")))

        group.start_soon(run)
        await entered.wait()
        (call,) = app.active_calls
        call.cancel()  # e.g. a widget's Cancel button
    assert results[0].error.code == CANCELLED and cleaned == [True]


async def test_inline_calls_queue_and_serialize_like_detached_ones(app):
    started, release = {k: anyio.Event() for k in "abc"}, anyio.Event()

    @app.f.mutation("m").with_string("key").concurrency(1, max_queue=1).handle
    async def m(input, ctx):
        started[input.key].set()
        await release.wait()
        return input.key

    results = []

    async def run(key):
        results.append(await app.run(app.request("m", {"key": key})))

    async with anyio.create_task_group() as group:
        group.start_soon(run, "a")  # an inline call takes its place when it runs
        await started["a"].wait()
        group.start_soon(run, "b")
        await anyio.wait_all_tasks_blocked()
        assert (await app.run(app.request("m", {"key": "c"}))).error.code == SERVER_BUSY
        assert not started["b"].is_set()
        release.set()
    assert sorted(r.value for r in results) == ["a", "b"]


async def test_tools_with_a_timeout_run_detached_even_when_run_inline(app):
    release = anyio.Event()

    @app.f.action("deaf").timeout(0.05).handle
    async def deaf(input, ctx):
        with anyio.CancelScope(shield=True):
            await release.wait()

    result = await app.run(app.request("deaf"))
    assert result.error.code == TIMEOUT  # at once, although the handler ignores the cancellation
    release.set()


async def test_an_inline_run_of_a_sync_tool_runs_detached_in_a_worker_thread(app):
    loop_thread = threading.get_ident()

    @app.f.query("where").handle
    def where(input, ctx):
        return threading.get_ident()

    tasks = []
    app.on_call(lambda call: tasks.append(app.background_tasks))
    result = await app.run(app.request("where"))
    assert not result.is_error and result.value != loop_thread
    assert tasks == [0]  # announced before its worker started: the worker is what runs it
    assert await app.wait_background(5)


async def test_an_inline_call_aborted_by_its_own_middleware_leaves_the_caller_usable(app):
    async def aborts(ctx, call_next):
        next(c for c in ctx.app.active_calls if c.id == ctx.call_id).cancel()
        return await call_next()

    app.f.action("self").use(aborts).handle(lambda input, ctx: "never")
    result = await app.run(app.request("self"))
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

    async with anyio.create_task_group() as group:
        call = await start_inline(group, app, app.request("swallow"))
        await entered.wait()
        call.cancel()
    assert call.result.error.code == CANCELLED
    await anyio.sleep(0)


# -- the request object --------------------------------------------------------------------


async def test_a_request_is_immutable_data_that_runs_the_same_started_or_inline(app):
    @app.f.action("echo").with_string("text").handle
    async def echo(input, ctx):
        return input.text

    request = app.request("echo", {"text": "hi"})
    assert isinstance(request, CallRequest) and request.tool == "echo"
    with pytest.raises(AttributeError):
        request.tool = "other"  # type: ignore[misc]
    assert not hasattr(request, "__dict__")
    assert (await app.start(request).wait()).value == "hi"
    assert (await app.run(request)).value == "hi"  # a request may be sent again
    assert (await app.call("echo", {"text": "hi"})).value == "hi"


async def test_bad_input_in_a_request_still_answers_one_sentence(app):
    @app.f.action("echo").with_string("text").handle
    async def echo(input, ctx):
        return input.text

    for request, code in (
        (app.request("echo", {"text": 5}), INVALID_INPUT),
        (app.request("echo", ["not", "an", "object"]), INVALID_INPUT),  # type: ignore[arg-type]
        (app.request("nope"), UNKNOWN_TOOL),
    ):
        for result in (await app.run(request), await app.start(request).wait()):
            message = result.error.message
            assert result.error.code == code and "\n" not in message and message.count(". ") == 0, message
            assert len(message) < 300


async def test_a_request_that_cannot_be_built_raises_one_sentence(app):
    cases = [
        (lambda: app.request(5), "the tool name must be a string, got int."),  # type: ignore[arg-type]
        (lambda: app.request("t", answers={}, channel=object()), "give one of them."),  # type: ignore[arg-type]
        (lambda: app.request("t", response={"ok": True}), "but no resume"),
        (lambda: app.start(app.request("t"), {"x": 1}), "its options belong in the request."),
    ]
    for build, says in cases:
        with pytest.raises(TypeError) as raised:
            build()
        message = str(raised.value)
        assert message.startswith(("app.request(): ", "app.start(): ")) and message.endswith(".") and says in message, (
            message
        )
        assert "\n" not in message
