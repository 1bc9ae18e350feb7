"""The four handler kinds, the streaming contract and the context."""

import threading

import pytest

from fusion_nb import ToolError, progress, respond
from fusion_nb.engine import INTERNAL_ERROR

pytestmark = pytest.mark.anyio


async def test_async_function_returns_its_value(app):
    @app.f.query("math.add").with_integer("a").with_integer("b", default=2).handle
    async def add(input, ctx):
        return input.a + input.b

    assert await add(a=40) == 42
    result = await app.call("math.add", {"a": 1, "b": 1})
    assert (result.value, result.is_error, result.content) == (2, False, [{"type": "text", "text": "2"}])


async def test_async_generator_streams_progress_and_responds(app):
    events, closed = [], []

    @app.f.action("report").handle
    async def report(input, ctx):
        try:
            yield progress(30, "rows loaded")
            yield "ignored"  # not a progress event: nobody sees it
            yield {"also": "ignored"}
            yield progress(10, "backwards: dropped")
            yield progress(90, "charts rendered")
            yield respond("the report")
            yield progress(95, "never reached")
        finally:
            closed.append(True)

    result = await app.call("report", on_progress=events.append)
    assert result.value == "the report"
    assert [(e.percent, e.message) for e in events] == [(30, "rows loaded"), (90, "charts rendered")]
    assert closed == [True], "the generator is closed after respond()"


async def test_generator_without_response_responds_none(app):
    @app.f.action("quiet").handle
    async def quiet(input, ctx):
        yield progress(50)

    result = await app.call("quiet")
    assert result.value is None and not result.is_error and result.content == []


async def test_sync_function_runs_in_a_worker_thread(app):
    loop_thread = threading.get_ident()

    @app.f.action("where").handle
    def where(input, ctx):
        return threading.get_ident() != loop_thread

    assert await where() is True


async def test_sync_generator_runs_in_one_thread_and_returns_its_value(app):
    loop_thread = threading.get_ident()
    steps = []

    @app.f.action("steps").handle
    def steps_tool(input, ctx):
        for n in (25, 50, 75):
            steps.append(threading.get_ident())
            yield progress(n, f"step {n}")
        return "finished"

    events = []
    result = await app.call("steps", on_progress=events.append)
    assert result.value == "finished"
    percents = [e.percent for e in events]  # coalesced: any increasing run ending with the last value
    assert percents == sorted(set(percents)) and percents[-1] == 75
    assert len(set(steps)) == 1 and steps[0] != loop_thread


async def test_progress_is_clamped_and_equal_values_pass(app):
    @app.f.action("p").handle
    async def p(input, ctx):
        yield progress(-5)
        yield progress(50, "a")
        yield progress(50, "b")
        yield progress(150)

    events = []
    await app.call("p", on_progress=events.append)
    assert [(e.percent, e.message) for e in events] == [(0, None), (50, "a"), (50, "b"), (100, None)]


async def test_a_broken_progress_listener_does_not_break_the_call(app):
    @app.f.action("p").handle
    async def p(input, ctx):
        yield progress(50)
        yield respond("ok")

    def listener(event):
        raise RuntimeError("listener bug")

    assert (await app.call("p", on_progress=listener)).value == "ok"


async def test_context_carries_signal_ids_tool_app_and_factory_state(app):
    app.context_factory = lambda info: {"client": info}
    seen = {}

    @app.f.action("ctx").handle
    async def ctx_tool(input, ctx):
        seen.update(
            aborted=ctx.signal.aborted, tool=ctx.tool.name, app=ctx.app, state=dict(ctx.state), call_id=ctx.call_id
        )

    await app.run(app.request("ctx", request_info="alice"))
    await app.run(app.request("ctx", request_info="bob"))
    assert seen["aborted"] is False and seen["tool"] == "ctx" and seen["app"] is app
    assert seen["state"] == {"client": "bob"}
    assert seen["call_id"]


@pytest.mark.parametrize("kind", ["async", "async_gen", "sync", "sync_gen"])
async def test_tool_error_and_unexpected_exceptions_for_every_kind(app, kind):
    def make(exc):
        async def plain(input, ctx):
            raise exc

        async def async_gen(input, ctx):
            yield progress(1)
            raise exc

        def sync(input, ctx):
            raise exc

        def sync_gen(input, ctx):
            yield progress(1)
            raise exc

        return {"async": plain, "async_gen": async_gen, "sync": sync, "sync_gen": sync_gen}[kind]

    app.f.action("refused").handle(
        make(ToolError("NOT_FOUND", "Invoice 7 does not exist.", recovery="Check the id.", details={"id": 7}))
    )
    crash_tool = app.f.action("crash").handle(make(KeyError("boom")))
    assert app.get("crash").kind == kind

    refused = await app.call("refused")
    assert refused.is_error and refused.error.code == "NOT_FOUND"
    assert refused.content[0]["text"] == "[NOT_FOUND] Invoice 7 does not exist. Recovery: Check the id."
    assert refused.structured_content == {
        "error": {
            "code": "NOT_FOUND",
            "message": "Invoice 7 does not exist.",
            "recovery": "Check the id.",
            "details": {"id": 7},
        }
    }

    crash = await app.call("crash")
    assert crash.is_error and crash.error.code == INTERNAL_ERROR
    assert "KeyError" in crash.content[0]["text"] and "Traceback" not in crash.content[0]["text"]
    with pytest.raises(ToolError):
        await crash_tool()


async def test_handler_detection_is_on_the_users_function(app):
    import functools

    async def gen(input, ctx):
        yield progress(5)
        yield respond("wrapped")

    @functools.wraps(gen)
    def wrapper(*a):
        return gen(*a)

    tool = app.f.action("w").handle(wrapper)
    assert tool.kind == "async_gen"
    assert (await app.call("w")).value == "wrapped"
