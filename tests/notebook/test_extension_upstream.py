"""The Jupyter extension's upstream client (``Upstream``) against a real uvicorn on loopback.

It replaced httpx2 for speed (``benchmarks/http.py --through-jupyter``); these pin what it must
keep doing: reuse one kept-alive connection, survive the kernel's side closing it (a restart on
the same kept port, uvicorn's keep-alive timeout), relay SSE chunk by chunk as each arrives, and
end the kernel's request when the caller goes away. The end-to-end route is test_through_jupyter.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fusion_nb.jupyter_server_extension import Upstream, UpstreamError
from fusion_nb.mcp.uvicorn_server import in_loop_server, listening_socket

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # jupyter_client's async API is asyncio-only


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    kept = Upstream()
    yield kept
    kept.close()
    await asyncio.sleep(0)  # the transports finish closing in this loop


class App:
    """``/who``: the caller's port (which connection it came on); ``/sse``: two events, the second
    once ``go`` is set; ``/hang``: one event, then waits for the caller to go away."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.gone = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await receive()  # the (empty) request body
        if scope["path"] == "/who":
            body = str(scope["client"][1]).encode()
            length = [(b"content-length", b"%d" % len(body))]
            await send({"type": "http.response.start", "status": 200, "headers": length})
            await send({"type": "http.response.body", "body": body})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        if scope["path"] == "/sse":
            await self.go.wait()
            await send({"type": "http.response.body", "body": b"data: 2\n\n", "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        elif (await receive())["type"] == "http.disconnect":
            self.gone.set()


@contextlib.asynccontextmanager
async def serving(app: App, port: int = 0) -> AsyncIterator[int]:
    sock = listening_socket(port=port)
    server = in_loop_server(app, lifespan="off")
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task


def head(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".encode()


async def who(upstream: Upstream, port: int) -> bytes:
    async with upstream.exchange(port, head("/who"), b"") as (status, _, chunks):
        assert status == 200
        return b"".join([chunk async for chunk in chunks])


async def test_calls_share_one_kept_connection_and_outlive_its_closing(upstream):
    app = App()
    async with serving(app) as port:
        first = await who(upstream, port)
        assert await who(upstream, port) == first  # the same client port: one connection, kept alive
    # the kernel restarts on its kept port: the kept connection is dead, the next call opens one
    async with serving(app, port):
        again = await who(upstream, port)
        assert again != first
    with pytest.raises(UpstreamError):  # nothing listens: the handler's "not serving" sentence
        await who(upstream, port)


async def test_events_are_relayed_as_each_arrives_and_a_caller_gone_ends_the_request(upstream):
    app = App()
    async with serving(app) as port:
        async with upstream.exchange(port, head("/sse"), b"") as (status, headers, chunks):
            assert status == 200 and ("content-type", "text/event-stream") in headers
            events = aiter(chunks)
            assert await anext(events) == b"data: 1\n\n"  # before the second exists
            app.go.set()
            assert [chunk async for chunk in events] == [b"data: 2\n\n"]
        assert await who(upstream, port)  # the stream ended cleanly: its connection serves again

        async def caller() -> None:
            async with upstream.exchange(port, head("/hang"), b"") as (_, _, chunks):
                async for _chunk in chunks:
                    started.set()

        started = asyncio.Event()
        task = asyncio.create_task(caller())
        await started.wait()
        task.cancel()  # what on_connection_close does when the agent goes away
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.wait_for(app.gone.wait(), 30)  # the kernel saw the disconnect (its cleanup runs)
