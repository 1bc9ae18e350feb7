"""HTTP exchanges that end badly end quietly: early disconnects, stalled bodies, aborted calls; and /healthz.

Raw sockets on real loopback play the careless clients. Every test then checks the
server still serves, and what the logs hold: INFO lines only, no traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random

import anyio
import httpx
import pytest
from http_serving import INIT, Records, serve

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # uvicorn and raw asyncio sockets

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


class Logs(Records):
    """Every log record at INFO or above, from the root logger and uvicorn's own (which do not propagate)."""

    def of(self, name: str) -> list[str]:
        return [r.getMessage() for r in self.records if r.name == name]

    def loud(self) -> list[str]:
        return [f"{r.name}: {r.getMessage()}" for r in self.records if r.levelno >= logging.WARNING or r.exc_info]

    async def wait_for(self, name: str, count: int = 1) -> list[str]:
        with anyio.fail_after(10):
            while len(self.of(name)) < count:
                await anyio.sleep(0.01)
        return self.of(name)


@pytest.fixture
def logs():
    handler = Logs()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn.error"), logging.getLogger("uvicorn")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    yield handler
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def request_bytes(served, body: bytes, *, declared: int | None = None, extra: dict[str, str] | None = None) -> bytes:
    port = served.url.split(":")[2].split("/")[0]
    headers = {
        "Host": f"127.0.0.1:{port}",
        "Authorization": f"Bearer {served.token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Content-Length": str(len(body) if declared is None else declared),
        **(extra or {}),
    }
    head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode() + body


async def open_socket(served):
    port = int(served.url.split(":")[2].split("/")[0])
    return await asyncio.open_connection("127.0.0.1", port)


async def still_serves(served) -> None:
    async with served.client("auto") as client:
        assert (await client.call_tool("echo", {"text": "still"})).structured_content == {"result": "still"}


async def test_a_client_leaving_mid_body_is_one_info_line(logs):
    async with serve() as served:
        body = json.dumps(INIT).encode()
        _, writer = await open_socket(served)
        writer.write(request_bytes(served, body[:10], declared=len(body)))
        await writer.drain()
        writer.transport.abort()
        (line,) = await logs.wait_for("fusion_nb.http")
        await still_serves(served)
    assert line == "POST /mcp: client disconnected before sending its whole request"
    assert logs.loud() == []


async def test_a_stalled_body_gets_408_after_the_timeout(logs):
    async with serve(body_timeout=0.5) as served:
        body = json.dumps(INIT).encode()
        reader, writer = await open_socket(served)
        writer.write(request_bytes(served, body[:10], declared=len(body)))
        await writer.drain()
        with anyio.fail_after(10):
            status_line = await reader.readline()
            rest = await reader.read()  # returns: the server closes the connection after a 408
        writer.close()
        await still_serves(served)
    assert status_line.startswith(b"HTTP/1.1 408")
    assert b"connection: close" in rest.lower()
    assert logs.of("fusion_nb.http") == ["POST /mcp: request body not complete after 0.5s; 408"]
    assert logs.loud() == []


def test_the_body_timeout_is_checked():
    from fusion_mcp_testapp import make_app

    from fusion_nb.mcp import http_app

    with pytest.raises(ValueError, match="body_timeout must be a positive number of seconds"):
        http_app(make_app()[0], body_timeout=0)


async def test_aborted_calls_on_both_eras_log_no_traceback(logs):
    """Clients cut off at random points of the body or of the streamed response (~the issue's 3,200 probe)."""
    rng = random.Random(11)
    async with serve() as served:
        async with httpx.AsyncClient() as http:
            opened = await http.post(served.url, json=INIT, headers=served.headers())
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}

        async def aborted(number: int) -> None:
            modern = number % 2 == 1
            tool = rng.choice(["flood", "burst", "noisy", "echo"])
            meta = {"progressToken": number, **(MODERN_META if modern else {})}
            arguments = {"text": "x"} if tool == "echo" else {}
            call = {
                "jsonrpc": "2.0",
                "id": number,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments, "_meta": meta},
            }
            extra = (
                {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool}
                if modern
                else session
            )
            data = request_bytes(served, json.dumps(call).encode(), extra=extra)
            reader, writer = await open_socket(served)
            whole = rng.random() < 0.7
            writer.write(data if whole else data[:-20])
            await writer.drain()
            if whole and rng.random() < 0.6:
                await reader.read(rng.randint(1, 400))  # part of the response arrived
            writer.transport.abort()

        for batch in range(4):
            async with anyio.create_task_group() as group:
                for number in range(batch * 20, batch * 20 + 20):
                    group.start_soon(aborted, number)
        await still_serves(served)
    assert logs.loud() == []
    assert all(
        line.endswith("client disconnected before sending its whole request") for line in logs.of("fusion_nb.http")
    )


async def test_healthz_answers_without_auth_or_details():
    async with serve() as served, httpx.AsyncClient() as http:
        health = await http.get(f"{served.base}/healthz")
        head = await http.head(f"{served.base}/healthz")
        mcp_without_token = await http.post(served.url, json=INIT)
    assert (health.status_code, health.text) == (200, "ok")
    assert head.status_code == 200
    assert mcp_without_token.status_code == 401
