"""Latency over real loopback TCP: what ``%fusion serve``'s socket gives a sequential client.

Without ``TCP_NODELAY`` on accepted connections each small response waits for the
client's delayed ACK (~40 ms on Linux), which in-memory tests can never see. The
bound below is generous (a loaded 2-core machine answers in a few ms) and still
fails on that regression.
"""

from __future__ import annotations

import socket
import time

import pytest
from http_serving import serve

from fusion_nb.mcp.uvicorn_server import listening_socket

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # uvicorn runs on asyncio


def test_the_listening_socket_is_tcp_with_nodelay():
    sock = listening_socket()
    try:
        assert sock.proto == socket.IPPROTO_TCP, "asyncio sets TCP_NODELAY only on IPPROTO_TCP sockets"
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        sock.close()


def test_the_server_parses_http_with_httptools():
    from fusion_nb import Fusion
    from fusion_nb.mcp import http_app
    from fusion_nb.mcp.uvicorn_server import in_loop_server

    server = in_loop_server(http_app(Fusion("parser")))
    server.config.load()
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    assert issubclass(server.config.http_protocol_class, HttpToolsProtocol), "h11 costs ~20% of a trivial call"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_twenty_sequential_calls_average_well_under_the_delayed_ack_time(mode):
    async with serve() as served, served.client(mode) as client:
        await client.list_tools()
        await client.call_tool("echo", {"text": "warm"})
        start = time.perf_counter()
        for _ in range(20):
            result = await client.call_tool("echo", {"text": "fast"})
            assert result.structured_content == {"result": "fast"}
        average = (time.perf_counter() - start) / 20
    assert average < 0.015, f"{average * 1000:.1f} ms per call over loopback: is TCP_NODELAY off again?"
