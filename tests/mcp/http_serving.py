"""One way for tests to serve the test app over real loopback HTTP and reach it with public client APIs.

uvicorn runs in this (asyncio) loop on the same kind of socket ``%fusion serve``
makes (``listening_socket``), so what these tests measure is what a kernel serves.
The SDK client gets a plain ``httpx2.AsyncClient`` (the HTTP library the SDK is built
on) carrying the bearer token: no private SDK helper is needed for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx
import httpx2
from fusion_mcp_testapp import Probe, make_app
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from fusion_nb import Fusion
from fusion_nb.mcp import http_app
from fusion_nb.mcp.http import HttpApp
from fusion_nb.mcp.uvicorn_server import in_loop_server, listening_socket

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


def http_client(token: str | None = None, **options: Any) -> httpx2.AsyncClient:
    """An HTTP client with the SDK's own defaults (30 s, 300 s reads for long SSE streams)."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), **options)


class Served:
    """A running server: its URL, token, app and probe, and SDK clients connected to it."""

    def __init__(self, url: str, token: str | None, app: Fusion, probe: Probe, asgi: Any) -> None:
        self.url, self.token, self.app, self.probe, self.asgi = url, token, app, probe, asgi
        self.base = url.rsplit("/", 1)[0]
        self.stop: Callable[[], Awaitable[None]]

    def headers(self, **extra: str) -> dict[str, str]:
        return {**JSON_HEADERS, "Authorization": f"Bearer {self.token}", **extra}

    @contextlib.asynccontextmanager
    async def client(self, mode: str = "auto", token: str | None = None, **options: Any) -> AsyncIterator[Client]:
        async with (
            http_client(token or self.token) as http,
            Client(streamable_http_client(self.url, http_client=http), mode=mode, **options) as client,
        ):
            yield client


@contextlib.asynccontextmanager
async def serve(app: Fusion | None = None, probe: Probe | None = None, **options: Any) -> AsyncIterator[Served]:
    """Serve ``app`` (the test app by default) on a free loopback port until the block ends."""
    if app is None:
        app, probe = make_app("mcp-http-test")
    async with serve_asgi(http_app(app, **options), app, probe) as served:
        yield served


@contextlib.asynccontextmanager
async def serve_asgi(asgi: Any, app: Fusion, probe: Probe | None = None) -> AsyncIterator[Served]:
    """Serve any ASGI app for ``app`` (``http_app``'s, or the SDK's own) on a free loopback port."""
    sock = listening_socket()
    port = sock.getsockname()[1]
    server = in_loop_server(asgi)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    token = asgi.token if isinstance(asgi, HttpApp) else None  # the SDK's own app has no token
    served = Served(f"http://127.0.0.1:{port}/mcp", token, app, probe or Probe(), asgi)

    async def stop() -> None:
        server.should_exit = True
        await task

    served.stop = stop  # stop serving before the block ends (the test then watches what stopping does)
    try:
        yield served
    finally:
        await stop()
        sock.close()
        await app.aclose()


async def open_session(http: httpx.AsyncClient, served: Served, **capabilities: Any) -> dict[str, str]:
    """Open a 2025-11-25 session (declaring ``capabilities``) and send ``initialized``; the session's headers."""
    init = {**INIT, "params": {**INIT["params"], "capabilities": capabilities}}  # type: ignore[dict-item]
    opened = await http.post(served.url, json=init, headers=served.headers())
    assert opened.status_code == 200, opened.text
    session = {"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(served.url, json=ready, headers=served.headers(**session))).status_code == 202
    return session


class Records(logging.Handler):
    """Every log record at ``level`` or above that reaches the loggers it is attached to."""

    def __init__(self, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def server_errors() -> Iterator[list[logging.LogRecord]]:
    """ERROR records of uvicorn ("Exception in ASGI application") and fusion-nb while the block runs.

    Enter it once the server runs: uvicorn's logging config replaces the handlers of its loggers,
    and its loggers do not propagate to the root (pytest's ``caplog`` never sees them).
    """
    collect = Records(logging.ERROR)
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "fusion_nb")]
    for logger in loggers:
        logger.addHandler(collect)
    try:
        yield collect.records
    finally:
        for logger in loggers:
            logger.removeHandler(collect)
