"""A dropped 2025 stream mid-call, resumed by the TypeScript SDK client with ``Last-Event-ID``.

``resume.mjs`` calls a tool that reports progress for a few seconds; ``CuttingProxy``, a
loopback TCP forwarder between it and a real uvicorn, closes the call's connection (both
sides: the server sees the disconnect, the client a network error) after a few
progress events. The client's own reconnection logic then sends ``GET`` with the last
event id it saw; it must get every progress step and the result, nothing twice.
"""

from __future__ import annotations

import contextlib
import json

import anyio
import anyio.abc
import pytest
from http_serving import serve
from loopback_proxy import LoopbackForwarder
from node_clients import HERE
from test_interop import run_node

from fusion_nb import Fusion, progress, respond

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # uvicorn, and the kernel harness

STEPS = 10
CUT_AFTER = 3  # progress events through the proxy before it cuts the call's connection


class CuttingProxy(LoopbackForwarder):
    """Forwards every connection; the one carrying ``tools/call`` is cut after ``CUT_AFTER`` progress events."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.cuts = 0
        self.resumes: list[bytes] = []

    async def forward(self, client: anyio.abc.SocketStream) -> None:
        async with client, await anyio.connect_tcp("127.0.0.1", self.target_port) as server:
            calling = anyio.Event()
            cut = anyio.CancelScope()

            async def upstream() -> None:
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    async for chunk in client:
                        if b'"tools/call"' in chunk and not self.cuts:
                            calling.set()
                        if chunk.startswith(b"GET ") and b"last-event-id" in chunk.lower():
                            self.resumes.append(chunk)
                        await server.send(chunk)

            async def downstream() -> None:
                seen = 0
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    async for chunk in server:
                        await client.send(chunk)
                        if calling.is_set():
                            seen += chunk.count(b"notifications/progress")
                            if seen >= CUT_AFTER:
                                self.cuts += 1
                                cut.cancel()

            with cut:
                async with anyio.create_task_group() as group:
                    group.start_soon(upstream)
                    group.start_soon(downstream)
            # leaving ``async with`` closes both sockets: a real drop for both peers


def ticking_app() -> Fusion:
    app = Fusion("resume-interop")

    @app.f.action("ticks").describe("Report progress ten times over about three seconds.").handle
    async def ticks(input, ctx):
        for step in range(1, STEPS + 1):
            yield progress(step * 10)
            await anyio.sleep(0.3)
        yield respond("ticked")

    return app


async def test_the_typescript_client_resumes_a_cut_call_stream_and_misses_nothing(node):
    observed: dict[str, str] = {}
    async with serve(ticking_app()) as served, anyio.create_task_group() as group:
        proxy = CuttingProxy(int(served.url.rsplit(":", 1)[1].split("/")[0]))
        await group.start(proxy.serve)
        observed["out"] = await run_node(
            node, str(HERE / "resume.mjs"), f"http://127.0.0.1:{proxy.port}/mcp", served.token
        )
        group.cancel_scope.cancel()
    seen = json.loads(observed["out"])
    assert proxy.cuts == 1, "the proxy never cut the call's stream: the test proved nothing"
    assert len(proxy.resumes) >= 1, "the client did not reconnect with Last-Event-ID"
    assert seen["result"] == "ticked", seen
    assert seen["progress"] == [step * 10 for step in range(1, STEPS + 1)], seen
    assert any("disconnected" in error for error in seen["errors"]), seen  # the cut was real to the client
