"""The stdio reader under random input: lines of every kind, cut into chunks at random points.

On asyncio the loop's readiness callback serves what it can at once and hands the rest
(a notification for the server, the first request) to the reader task, which hands
back; on trio the task reads. Whatever the cut points and the turns between chunks,
each request is answered exactly once (at most once when the client cancelled it), each
bad line gets exactly one error line, nothing else is written, and end of input ends the
connection with no call left.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from fusion_mcp_testapp import make_app
from hypothesis import given, settings
from hypothesis import strategies as st
from stdio_serving import INITIALIZE

from fusion_nb.mcp import mcp_server
from fusion_nb.mcp.pipe import PipeConnection

LIMIT = 512  # the connection's line limit here: a "big" line is over it

KINDS = st.sampled_from(
    ["call", "call", "call", "notification", "cancel", "cancel-last", "garbage", "blank", "big", "answer"]
)


def line_of(kind: str, index: int) -> bytes:
    """One input line (newline excluded) of ``kind``; requests carry ``index`` as their id."""
    if kind == "call":
        message: Any = {"jsonrpc": "2.0", "id": index, "method": "tools/call"}
        message["params"] = {"name": "echo", "arguments": {"text": f"t{index}"}}
    elif kind == "notification":
        message = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
    elif kind == "cancel":  # of a request nobody sent: nothing to stop
        message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10_000 + index}}
    elif kind == "cancel-last":  # of the line before's call (if it was one): it may have been answered already
        message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": index - 1}}
    elif kind == "garbage":
        return b"{not json"
    elif kind == "blank":
        return b"   "
    elif kind == "big":
        return json.dumps({"jsonrpc": "2.0", "id": index, "method": "tools/list", "pad": "p" * LIMIT}).encode()
    else:  # an answer to a question the server never asked: dropped
        message = {"jsonrpc": "2.0", "id": f"never-asked-{index}", "result": {}}
    return json.dumps(message).encode()


async def serve_cut(kinds: list[str], cuts: list[int], turns: list[int]) -> None:
    app, _ = make_app()
    server_in, peer_out = os.pipe()
    peer_in, server_out = os.pipe()
    for fd in (server_in, server_out, peer_out, peer_in):
        os.set_blocking(fd, False)
    lines = [json.dumps(INITIALIZE).encode(), b'{"jsonrpc": "2.0", "method": "notifications/initialized"}']
    lines += [line_of(kind, index) for index, kind in enumerate(kinds, start=2)]
    data = b"\n".join(lines) + b"\n"
    points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    received = b""
    try:
        connection = PipeConnection(mcp_server(app), server_in, server_out, max_line_bytes=LIMIT)
        with anyio.fail_after(15):
            async with anyio.create_task_group() as group:
                group.start_soon(connection.run)
                for number, (start, end) in enumerate(itertools.pairwise(points)):
                    os.write(peer_out, data[start:end])  # (all of it fits in the pipe)
                    for _ in range(turns[number % len(turns)] if turns else 0):
                        await anyio.lowlevel.checkpoint()
                os.close(peer_out)
                peer_out = -1
                await connection.finished.wait()  # (the answers of 24 lines fit in the pipe: nobody must read)
        received += drain(peer_in)
    finally:
        for fd in (server_in, server_out, peer_out, peer_in):
            if fd >= 0:
                os.close(fd)
        await app.aclose()
    assert app.active_calls == []
    replies = [json.loads(line) for line in received.splitlines()]
    assert replies[0]["id"] == 1 and "result" in replies[0], replies[0]
    calls = {index for index, kind in enumerate(kinds, start=2) if kind == "call"}
    taken_back = {index - 1 for index, kind in enumerate(kinds, start=2) if kind == "cancel-last"} & calls
    expected_big = {index for index, kind in enumerate(kinds, start=2) if kind == "big"}
    results = [reply["id"] for reply in replies[1:] if "result" in reply]
    assert len(results) == len(set(results)), replies  # never answered twice
    assert calls - taken_back <= set(results) <= calls, replies  # each call answered, unless the client took it back
    for reply in replies[1:]:
        if "result" in reply:
            assert reply["result"]["structuredContent"] == {"result": f"t{reply['id']}"}, reply
    errors = [reply for reply in replies[1:] if "error" in reply]
    assert sorted(reply["id"] for reply in errors if reply["id"] is not None) == sorted(expected_big), errors
    assert sum(reply["id"] is None for reply in errors) == kinds.count("garbage"), errors
    assert len(replies) == 1 + len(results) + len(expected_big) + kinds.count("garbage"), replies


def drain(fd: int) -> bytes:
    """What the server has written so far."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=100)
@given(
    kinds=st.lists(KINDS, max_size=24),
    cuts=st.lists(st.integers(0, 12_000), max_size=12),
    turns=st.lists(st.integers(0, 3), max_size=6),
)
def test_any_lines_cut_anywhere_get_one_answer_each_and_nothing_else(
    backend: str, kinds: list[str], cuts: list[int], turns: list[int]
) -> None:
    """Each example runs in a fresh event loop of its backend, with a fresh app (hypothesis drives a sync test)."""
    anyio.run(serve_cut, kinds, cuts, turns, backend=backend)
