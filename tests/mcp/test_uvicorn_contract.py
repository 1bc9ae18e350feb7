"""The uvicorn seam (``fusion_nb/mcp/_uvicorn.py``): each hook it overrides still exists, and the limits hold.

The hooks are uvicorn's parser callbacks and protocol methods, not a public API; a
uvicorn release that renames one fails the first test with a sentence naming it.
The others speak raw HTTP/1.1 to a real server on 127.0.0.1 (both parsers) and check
what a client without a token gets: a bounded answer, then a closed connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator

import anyio
import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from fusion_nb import Fusion
from fusion_nb.mcp import http_app
from fusion_nb.mcp._uvicorn import ConnectionLimits, guarded_protocol, quiet_logs
from fusion_nb.mcp.uvicorn_server import InLoopServer, in_loop_server, listening_socket

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # uvicorn and raw asyncio sockets

PARSERS = ["httptools", "h11"]


def test_the_hooks_the_limits_override_exist_in_uvicorn():
    common = ("connection_made", "connection_lost", "data_received", "on_response_complete", "send_400_response")
    for cls, extra in ((HttpToolsProtocol, ("on_url", "on_header", "on_headers_complete")), (H11Protocol, ())):
        for name in common + extra:
            assert callable(getattr(cls, name, None)), f"uvicorn's {cls.__name__} has no {name}() any more"
    probe = H11Protocol.__init__.__code__.co_names
    assert "conn" in probe, "uvicorn's H11Protocol no longer keeps its h11.Connection as .conn"


@pytest.mark.parametrize("http", PARSERS)
def test_every_server_uses_a_guarded_protocol(http):
    server = in_loop_server(http_app(Fusion("limits")), http=http)
    server.config.load()
    base = HttpToolsProtocol if http == "httptools" else H11Protocol
    assert issubclass(server.config.http_protocol_class, base)
    assert server.config.http_protocol_class is not base


def test_the_limits_are_checked():
    with pytest.raises(ValueError, match="header_timeout must be positive"):
        ConnectionLimits(header_timeout=0)
    with pytest.raises(ValueError, match="max_connections must be 1 or more"):
        ConnectionLimits(max_connections=0)
    with pytest.raises(ValueError, match="per_address must be 1 or more"):
        ConnectionLimits(per_address=0)
    assert ConnectionLimits(max_connections=7).address_share(7) == 3
    with pytest.raises(ValueError, match="http must be 'auto', 'httptools' or 'h11'"):
        guarded_protocol("zttp", ConnectionLimits())
    assert ConnectionLimits().connection_cap() >= 16


@contextlib.asynccontextmanager
async def served(http: str, **limits: object) -> AsyncIterator[int]:
    async with serving(http, **limits) as (port, _):
        yield port


@contextlib.asynccontextmanager
async def serving(http: str, **limits: object) -> AsyncIterator[tuple[int, InLoopServer]]:
    sock = listening_socket()
    server = in_loop_server(http_app(Fusion("limits")), http=http, limits=ConnectionLimits(**limits))  # type: ignore[arg-type]
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        with anyio.fail_after(20):
            while not server.started:
                await asyncio.sleep(0.01)
        yield sock.getsockname()[1], server
    finally:
        server.should_exit = True
        await task
        sock.close()


async def exchange(port: int, data: bytes) -> bytes:
    """Send ``data``, then read until the server closes (a deadline bounds it); what came back."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        with anyio.fail_after(10):
            try:
                return await reader.read()
            except ConnectionResetError:  # closed with the client's bytes unread: a reset, still closed
                return b""
    finally:
        writer.close()


async def trickle(port: int, head: bytes) -> bytes:
    """Send ``head``, then one byte per 50 ms until the server answers; its answer (bounded by a deadline)."""
    loop = asyncio.get_running_loop()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setblocking(False)
        await loop.sock_sendall(sock, head)
        with anyio.fail_after(10):
            while True:
                try:
                    return await asyncio.wait_for(loop.sock_recv(sock, 65536), 0.05)
                except TimeoutError:
                    await loop.sock_sendall(sock, b"X")


HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.mark.parametrize("http", PARSERS)
async def test_too_many_header_fields_get_431_and_a_closed_connection(http):
    async with served(http, max_headers=20) as port:
        answer = await exchange(port, HEAD + b"".join(b"X-%d: a\r\n" % i for i in range(40)) + b"\r\n")
        ok = await exchange(port, HEAD + b"Connection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert answer.endswith(b"Request has more than 20 header fields.\n")
    assert ok.startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize("http", PARSERS)
async def test_an_oversized_head_is_refused_before_it_is_buffered(http):
    async with served(http, max_header_bytes=4096) as port:
        small = await exchange(port, HEAD + b"X-A: " + b"a" * 5000 + b"\r\n\r\n")
        for _ in range(3):  # one giant value, sent in many reads: refused after the first, read whole (lingering)
            huge = await exchange(port, HEAD + b"X-A: " + b"a" * 2_000_000)
            assert huge.startswith(b"HTTP/1.1 431 "), huge[:80]
    assert small.startswith(b"HTTP/1.1 431 ")
    assert b"exceed 4096 bytes" in small


@pytest.mark.parametrize("http", PARSERS)
async def test_silent_and_trickling_connections_are_closed_at_the_header_deadline(http):
    async with served(http, header_timeout=0.5) as port:
        start = time.monotonic()
        silent = await exchange(port, b"")
        trickled = await trickle(port, HEAD)
        took = time.monotonic() - start
    assert silent == b""
    assert trickled.startswith(b"HTTP/1.1 408 ")
    assert b"connection: close" in trickled
    assert took < 8, f"the deadline was not enforced ({took:.1f} s)"


@pytest.mark.parametrize("http", PARSERS)
async def test_a_kept_alive_connection_gets_a_fresh_deadline_after_each_response(http):
    async with served(http, header_timeout=1.0) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(3):
            writer.write(HEAD + b"\r\n")
            with anyio.fail_after(10):
                status = await reader.readline()
                while (await reader.readline()) != b"\r\n":
                    pass
                await reader.readexactly(2)
            assert status.startswith(b"HTTP/1.1 200 ")
            await asyncio.sleep(0.4)  # under the deadline each time, well over it in total
        writer.close()


@pytest.mark.parametrize("http", PARSERS)
async def test_connections_beyond_the_cap_get_503_with_retry_after(http):
    async with served(http, max_connections=3) as port:
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        refused = await exchange(port, b"")
        for _, writer in held:
            writer.close()
        await asyncio.sleep(0.1)  # the server sees the closes
        with anyio.fail_after(10):
            while not (await exchange(port, HEAD + b"Connection: close\r\n\r\n")).startswith(b"HTTP/1.1 200 "):
                await asyncio.sleep(0.05)
    assert refused.startswith(b"HTTP/1.1 503 ")
    assert b"retry-after: 1" in refused


@pytest.mark.parametrize("http", PARSERS)
async def test_at_the_cap_another_address_evicts_the_oldest_silent_connection(http):
    """A full server makes room by closing a silent connection of the address holding the most.

    Before, the fourth connection got 503 while three silent ones held every slot for
    their whole header timeout (60 s here: only eviction can close them).
    """
    async with serving(http, max_connections=3, header_timeout=60) as (port, server):
        silent = []

        async def hold(open_then: int) -> None:
            """One more silent connection from 127.0.0.2, once the server holds ``open_then``."""
            silent.append(await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0)))
            with anyio.fail_after(10):  # accepted one by one: the first is the oldest
                while server.connections is None or len(server.connections.open) < open_then:
                    await asyncio.sleep(0.01)

        try:
            for count in (1, 2, 3):
                await hold(count)
            answer = await exchange(port, HEAD + b"Connection: close\r\n\r\n")
            with anyio.fail_after(10):
                assert await silent[0][0].read() == b""  # the oldest was closed, with nothing to answer
                while len(server.connections.open) > 2:  # the answered one is gone too
                    await asyncio.sleep(0.01)
            await hold(3)
            refused = await exchange_from("127.0.0.2", port)  # its address holds more than its share (1 of 3)
        finally:
            for _, writer in silent:
                writer.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert refused.startswith(b"HTTP/1.1 503 "), refused[:200]


async def exchange_from(address: str, port: int) -> bytes:
    """Open a connection from ``address``, send a request, read until closed (bounded)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
    try:
        writer.write(HEAD + b"Connection: close\r\n\r\n")
        with anyio.fail_after(10):
            return await reader.read()
    finally:
        writer.close()


@pytest.mark.parametrize("http", PARSERS)
async def test_a_drain_answers_a_request_on_a_kept_idle_connection_and_closes_the_rest_once_quiet(http):
    """``stop_accepting`` closes the port but not the idle keep-alive connections.

    A balancer may be sending on one already (nginx under load had not yet read the close)
    and does not retry a POST it has sent, so closing them as the drain begins failed such
    calls with a 502 (tests/cli/test_nginx.py, once in a clean-clone CI run). Kept, one
    carries its request, answered, then closes; ``close_idle`` closes the rest. (The idle
    deadline is longer than every wait here: only ``close_idle`` can close that one.)
    """
    async with serving(http, header_timeout=60) as (port, server):
        used_reader, used_writer = await asyncio.open_connection("127.0.0.1", port)
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            with anyio.fail_after(10):
                while not server.connections or len(server.connections.open) < 2:  # both accepted
                    await asyncio.sleep(0.01)
            server.stop_accepting()
            with pytest.raises(ConnectionRefusedError):
                await asyncio.open_connection("127.0.0.1", port)
            used_writer.write(HEAD + b"\r\n")  # a keep-alive request, sent after the drain began
            with anyio.fail_after(10):
                answer = await used_reader.read()  # answered, then closed by the server
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
            board = server.connections
            assert [connection.idle for connection in board.open] == [True]  # the other one is still open
            last = board.last_request
            assert not board.quiet(last + 0.1, 0.5) and board.quiet(last + 0.5, 0.5)
            server.close_idle()
            with anyio.fail_after(10):
                assert await idle_reader.read() == b""  # closed by the server, with nothing to answer
            assert board.quiet(last, 0.5)  # nothing idle left: quiet at once
        finally:  # (a failure above must not leave these to the garbage collector of a later test)
            used_writer.close()
            idle_writer.close()


def test_accept_errors_are_one_line_per_interval_and_other_errors_pass_through(caplog):
    loop = asyncio.new_event_loop()
    seen: list[str] = []
    loop.set_exception_handler(lambda loop, context: seen.append(context["message"]))
    try:
        restore = quiet_logs(loop)
        with caplog.at_level(logging.WARNING, logger="fusion_nb.http"):
            exhausted = OSError(24, "Too many open files")
            for _ in range(500):
                loop.call_exception_handler(
                    {"message": "socket.accept() out of system resource", "exception": exhausted}
                )
            loop.call_exception_handler({"message": "something else"})
        restore()
        assert loop.get_exception_handler() is not None
        loop.call_exception_handler({"message": "after"})
    finally:
        loop.close()
    assert [r.getMessage() for r in caplog.records] == ["cannot accept a connection: [Errno 24] Too many open files"]
    assert seen == ["something else", "after"]
