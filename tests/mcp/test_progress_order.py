"""The last progress notification of a call is on the wire before its result: every transport, both eras.

Checked on the raw wire (not through a client that might reorder or drop): many
concurrent calls of two floods, ``flood`` (1,000 yields, each followed by a pause)
and ``burst`` (10,000 yields in one go, which coalesce to a single final
notification), over stdio and over HTTP (one SSE stream per POST).
"""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from http_serving import INIT, serve
from stdio_serving import INITIALIZE, open_raw

# uvicorn runs on asyncio; the stdio tests above use the same backend
pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

CALLS = 30
TOOLS = ["flood", "burst"]
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


def call(request_id: int, tool: str, modern: bool) -> dict:
    meta = {"progressToken": f"token-{request_id}", **(MODERN_META if modern else {})}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": meta},
    }


def check_order(messages: list[dict], ids: set[int]) -> None:
    """Every call: progress values increase to 100, all of them before its result, none after."""
    answered: set[int] = set()
    values: dict[int, list[float]] = {i: [] for i in ids}
    for message in messages:
        if message.get("method") == "notifications/progress":
            owner = int(message["params"]["progressToken"].removeprefix("token-"))
            assert owner not in answered, f"call {owner}: progress {message['params']['progress']} after its result"
            values[owner].append(message["params"]["progress"])
        elif message.get("id") in ids:
            assert "result" in message, message
            answered.add(message["id"])
    assert answered == ids
    for owner, seen in values.items():
        assert seen and seen[-1] == 100, f"call {owner}: the final progress never arrived before the result: {seen}"


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("modern", [False, True], ids=["2025", "2026"])
async def test_over_stdio(stdio_command, tool, modern):
    async with open_raw(stdio_command) as server:
        if not modern:
            await server.send(INITIALIZE)
            await server.receive()
            await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        ids = set(range(10, 10 + CALLS))
        for request_id in sorted(ids):
            await server.send(call(request_id, tool, modern))
        messages = []
        with anyio.fail_after(60):
            while not ids <= {m.get("id") for m in messages}:
                messages.append(await server.receive())
        check_order(messages, ids)
        await server.process.stdin.aclose()
        assert (await server.exit())[0] == 0


async def post_and_read(http: httpx.AsyncClient, url: str, body: dict, headers: dict) -> list[dict]:
    """One POST's response as JSON-RPC messages, in wire order (SSE events or one JSON body)."""
    async with http.stream("POST", url, json=body, headers=headers) as response:
        assert response.status_code == 200, response.status_code
        if response.headers["content-type"].startswith("application/json"):
            return [json.loads(await response.aread())]
        return [json.loads(line[5:]) async for line in response.aiter_lines() if line.startswith("data:")]


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("modern", [False, True], ids=["2025", "2026"])
async def test_over_http(tool, modern):
    async with serve() as served, httpx.AsyncClient(timeout=60) as http:
        headers = served.headers()
        if modern:
            headers |= {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool}
        else:
            opened = await http.post(served.url, json=INIT, headers=headers)
            headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
            await http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        streams: dict[int, list[dict]] = {}

        async def one(request_id: int) -> None:
            streams[request_id] = await post_and_read(http, served.url, call(request_id, tool, modern), headers)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for request_id in range(10, 10 + CALLS):
                    group.start_soon(one, request_id)
    for request_id, messages in streams.items():
        check_order(messages, {request_id})
