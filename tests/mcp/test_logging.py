"""A tool's ``ctx.log`` lines reach the SDK's real client as ``notifications/message``, at its level.

2025-11-25: every level until ``logging/setLevel``, then that level and above, per connection.
2026-07-28: only for requests carrying ``_meta["io.modelcontextprotocol/logLevel"]`` (the SDK
client's ``log_level``), and ``logging/setLevel`` is not a method (-32601). In memory on every
era (asyncio and trio) and over HTTP on both eras; the engine's own record is tested at the end.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from eras import ERAS, client_for
from http_serving import serve
from mcp.shared.exceptions import MCPError

from fusion_nb import Fusion
from fusion_nb.engine import LogEvent
from fusion_nb.mcp import mcp_server

pytestmark = pytest.mark.anyio


def chatty_app() -> Fusion:
    app = Fusion("log-test")

    @app.f.action("chatty").describe("Logs at three levels.").handle
    async def chatty(input: Any, ctx: Any) -> Any:
        ctx.log("debug", "looking")
        ctx.log("info", "step", n=1, of="2")
        ctx.log("error", "bad row", row=7)
        return "done"

    @app.f.action("wrong").describe("Logs at a level MCP lacks.").handle
    async def wrong(input: Any, ctx: Any) -> Any:
        try:
            ctx.log("verbose", "x")
        except ValueError as refused:
            return str(refused)
        return "accepted"

    @app.f.action("threaded").describe("A sync handler (run in a worker thread) that logs.").handle
    def threaded(input: Any, ctx: Any) -> Any:
        ctx.log("warning", "from a thread", thread=threading.current_thread() is not threading.main_thread())
        return "done"

    return app


class Heard:
    """The client's logging callback: what arrived, in order."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, Any, str | None]] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.lines.append((params.level, params.data, params.logger))

    @property
    def levels(self) -> list[str]:
        return [level for level, _, _ in self.lines]


ALL = [
    ("debug", "looking", "chatty"),
    ("info", {"message": "step", "n": 1, "of": "2"}, "chatty"),
    ("error", {"message": "bad row", "row": 7}, "chatty"),
]


@contextlib.contextmanager
def deprecated_logging() -> Iterator[None]:
    """The SDK marks logging deprecated (SEP-2577) and the suite turns warnings into errors."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The logging capability is deprecated")
        yield


def result_text(result: Any) -> str:
    return result.content[0].text


@pytest.mark.parametrize("era", ERAS)
async def test_lines_arrive_before_the_result_at_the_requested_level(era: str) -> None:
    heard = Heard()
    server = mcp_server(chatty_app())
    legacy = era == "2025-memory"
    with deprecated_logging():
        async with client_for(server, era, logging_callback=heard, log_level=None if legacy else "info") as client:
            result = await client.call_tool("chatty", {})
            assert result_text(result) == "done"
            assert heard.lines == (ALL if legacy else ALL[1:])  # all of them, in order, before the result
            if legacy:
                assert client.server_capabilities.logging is not None
                await client.set_logging_level("error")
                heard.lines.clear()
                await client.call_tool("chatty", {})
                assert heard.levels == ["error"]
            else:
                with pytest.raises(MCPError) as refused:
                    await client.set_logging_level("error")
                assert refused.value.error.code == -32601  # (the SDK's answer on 2026: it is gone)


@pytest.mark.parametrize("era", ERAS[1:])
async def test_a_2026_request_without_a_log_level_gets_no_lines(era: str) -> None:
    heard = Heard()
    async with client_for(mcp_server(chatty_app()), era, logging_callback=heard) as client:
        assert result_text(await client.call_tool("chatty", {})) == "done"
    assert heard.lines == []


async def test_a_sync_handler_logs_from_its_worker_thread() -> None:
    heard = Heard()
    async with client_for(mcp_server(chatty_app()), "2025-memory", logging_callback=heard) as client:
        assert result_text(await client.call_tool("threaded", {})) == "done"
    assert heard.lines == [("warning", {"message": "from a thread", "thread": True}, "threaded")]


async def test_each_2025_connection_keeps_its_own_level() -> None:
    server = mcp_server(chatty_app())
    quiet, loud = Heard(), Heard()
    with deprecated_logging():
        async with (
            client_for(server, "2025-memory", logging_callback=quiet) as first,
            client_for(server, "2025-memory", logging_callback=loud) as second,
        ):
            await first.set_logging_level("emergency")
            await second.set_logging_level("info")
            await first.call_tool("chatty", {})
            await second.call_tool("chatty", {})
    assert quiet.lines == []
    assert loud.levels == ["info", "error"]


async def test_a_level_mcp_lacks_is_refused_in_one_sentence() -> None:
    app = chatty_app()
    result = await app.start(app.request("wrong", {})).wait()
    assert result.value == (
        "ctx.log: level must be one of debug, info, notice, warning, error, critical, alert, emergency, not 'verbose'."
    )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn, as in test_http.py
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_over_http_on_both_eras(mode: str) -> None:
    heard = Heard()
    async with serve(chatty_app()) as served:
        with deprecated_logging():
            async with served.client(mode, logging_callback=heard, log_level="debug") as client:
                if mode == "legacy":
                    await client.set_logging_level("info")
                assert result_text(await client.call_tool("chatty", {})) == "done"
    assert heard.lines == (ALL[1:] if mode == "legacy" else ALL)


async def test_the_engine_records_lines_of_the_live_call_only() -> None:
    app = chatty_app()
    lines: list[LogEvent] = []
    call = app.start(app.request("chatty", {}, on_log=lines.append))
    result = await call.wait()
    assert not result.is_error
    assert [line.level for line in lines] == ["debug", "info", "error"]
    assert lines[1] == LogEvent("info", "step", {"n": 1, "of": "2"})
    assert call.last_log == lines[-1]
    call.log(LogEvent("info", "late"))  # a settled call hears nothing more
    assert len(lines) == 3
    await anyio.lowlevel.checkpoint()
