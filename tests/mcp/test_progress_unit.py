"""The progress pump on its own, and when the adapter decides to allocate one."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from eras import ERAS, client_for

from fusion_nb import progress
from fusion_nb.mcp import mcp_server
from fusion_nb.mcp.elicitation import is_modern
from fusion_nb.mcp.progress import ProgressPump, wants_progress

pytestmark = pytest.mark.anyio


async def test_equal_and_lower_values_are_dropped():
    sent: list[float] = []
    first = anyio.Event()

    async def report(value, total, message):
        sent.append(value)
        first.set()

    pump = ProgressPump(report, interval=0)
    async with anyio.create_task_group() as group:
        group.start_soon(pump.run)
        pump.offer(progress(10))
        await first.wait()
        pump.offer(progress(5))  # lower: dropped
        pump.offer(progress(10))  # equal: dropped
        pump.close()
    assert sent == [10]


async def test_pending_value_is_flushed_on_close_despite_the_interval():
    sent: list[tuple[float, str | None]] = []
    first = anyio.Event()

    async def report(value, total, message):
        sent.append((value, message))
        first.set()

    pump = ProgressPump(report, interval=3600)
    async with anyio.create_task_group() as group:
        group.start_soon(pump.run)
        pump.offer(progress(10, "a"))
        await first.wait()
        pump.offer(progress(40, "b"))  # coalesced away by the next one
        pump.offer(progress(70, "c"))
        pump.close()
    assert sent == [(10, "a"), (70, "c")]


@pytest.mark.parametrize("era", ERAS)
async def test_a_pump_is_wanted_only_when_the_request_asks_for_progress(app_probe, era):
    app, _ = app_probe
    decisions: list[bool] = []

    async def record(ctx, call_next):  # an SDK server middleware sees the handler's own context
        if ctx.method == "tools/call":
            decisions.append(wants_progress(ctx, is_modern(ctx)))
        return await call_next(ctx)

    server = mcp_server(app)
    server.middleware.append(record)

    async def on_progress(value, total, message):
        pass

    async with client_for(server, era) as client:
        await client.call_tool("noisy", {})
        await client.call_tool("noisy", {}, progress_callback=on_progress)
    assert decisions == [False, True]


async def test_telemetry_middleware_is_off_unless_asked_for(app_probe):
    app, _ = app_probe
    # params refusals in one sentence (issue 27) outermost of fusion-nb's; MCP Apps before tasks see a
    # call (issue 49); then tasks (issue 25); the cached list pages (issue 51) innermost
    state = ["ParamsInOneSentence", "FusionRequestStateBoundary", "AppsMiddleware", "TaskWire", "PageMiddleware"]
    assert [type(m).__name__ for m in mcp_server(app).middleware] == state
    assert [type(m).__name__ for m in mcp_server(app, telemetry=True).middleware] == ["OpenTelemetryMiddleware", *state]


def test_wire_results_are_valid_sdk_results():
    """What call_tool returns is exactly what the SDK's own CallToolResult model accepts and dumps."""
    from fusion_mcp_testapp import PNG

    from fusion_nb import CallResult, ToolError
    from fusion_nb.engine import present
    from fusion_nb.mcp.convert import result_to_wire

    error = CallResult.failure(ToolError("X", "It failed."))
    results = [
        CallResult(content=c, structured_content=s)
        for c, s in (present("hi"), present({"a": 1}), present(PNG), present(b"\x00raw"))
    ]
    for result in [*results, error]:
        for schema in (False, True):
            wire = result_to_wire(result, has_output_schema=schema)
            typed = types.CallToolResult.model_validate(wire).model_dump(by_alias=True, mode="json", exclude_none=True)
            assert wire == typed
    assert "structuredContent" in result_to_wire(error, has_output_schema=False)
    assert "structuredContent" not in result_to_wire(error, has_output_schema=True)
