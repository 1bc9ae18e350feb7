"""An abandoned 2025 elicitation must end and release its mutation's serializer (issue 29, 6).

``refund`` is a mutation (one body at a time) that asks a person before acting. Client A
starts it and gets the question; then A either never answers (its stream stays open) or
drops the POST that carried the question. Client B, another session, calls ``refund``
and queues behind A. Before: A's call never ended, so B waited for ever. Now A's call
ends at the answer deadline (abandoned) or at once (POST gone), and B gets its question.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.streams.text
import httpx
import pytest
from reliability_served import thread_served
from reliability_support import FIGURES, mcp_headers

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def headers(served: Any, **extra: str) -> dict[str, str]:
    return mcp_headers(served.token, **extra)


async def session(http: httpx.AsyncClient, served: Any) -> dict[str, str]:
    opened = await http.post(served.url, json=INIT, headers=headers(served))
    ids = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await http.post(served.url, json=ready, headers=headers(served, **ids))
    return ids


@contextlib.asynccontextmanager
async def refund_asking(http: httpx.AsyncClient, served: Any, ids: dict[str, str], record: str) -> AsyncIterator[Any]:
    """Call ``refund``; yields ``(question, response)`` once its ``elicitation/create`` arrived on the POST's stream."""
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "refund", "arguments": {"id": record}},
    }
    async with http.stream("POST", served.url, json=call, headers=headers(served, **ids)) as response:
        lines = response.aiter_lines()
        async for line in lines:
            if line.startswith("data: ") and '"elicitation/create"' in line:
                yield json.loads(line[6:]), lines
                return
        raise AssertionError("the stream ended without a question")


async def question_for_b(http: httpx.AsyncClient, served: Any) -> float:
    """B's call of ``refund``: seconds until its question arrived (it queues behind A's call until that ends)."""
    ids = await session(http, served)
    start = time.monotonic()
    async with refund_asking(http, served, ids, "inv-b"):
        return time.monotonic() - start


async def test_an_abandoned_or_orphaned_elicitation_releases_the_mutation():
    deadline = 1.0
    with thread_served(request_state_ttl=600, answer_timeout=deadline) as served:
        async with httpx.AsyncClient(timeout=30) as http:
            # abandoned: A keeps its stream open and never answers
            ids = await session(http, served)
            async with refund_asking(http, served, ids, "inv-a") as (question, rest):
                assert isinstance(question["id"], str) and len(question["id"]) >= 16, question["id"]
                with anyio.fail_after(30):
                    abandoned_wait = await question_for_b(http, served)
                    ending = [line async for line in rest if line.startswith("data: ")]
    # orphaned: A drops the POST that carried the question; its call ends at once, long before the deadline
    with thread_served(request_state_ttl=600, answer_timeout=600.0) as served:
        async with httpx.AsyncClient(timeout=30) as http:
            ids = await session(http, served)
            async with refund_asking(http, served, ids, "inv-c"):
                pass  # the POST's stream closes here
            with anyio.fail_after(30):
                orphaned_wait = await question_for_b(http, served)
    FIGURES.attack(
        "abandoned elicitation (mutation)",
        answer_deadline_s=deadline,
        next_caller_waited_s=round(abandoned_wait, 2),
        after_post_gone_waited_s=round(orphaned_wait, 2),
    )
    assert "timed out" in ending[-1], ending[-1]
    # and the client is told to stop asking (a bridge asking its own host ends that question too)
    assert any('"notifications/cancelled"' in line and question["id"] in line for line in ending), ending
    assert abandoned_wait >= deadline * 0.5, "B's call did not queue behind A's: the mutation is not serialized"
    assert orphaned_wait < 30


async def test_an_unanswered_stdio_question_ends_at_its_deadline():
    """Issue 44, 6: a 2025 client on stdio that never answers a question; the call must end at ``--answer-timeout``.

    Before, a stdio question had no deadline: the call (and a mutation's every later call)
    waited for ever. Now it fails in one sentence at the deadline and the client is told
    to stop asking (``notifications/cancelled``).
    """
    import os
    import sys
    from pathlib import Path

    data = Path(__file__).parent.parent / "cli" / "data"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(data), str(Path(__file__).parent.parent.parent)])}
    command = [sys.executable, "-m", "fusion_nb", "serve", "task_app", "--transport", "stdio", "--answer-timeout", "1"]
    async with await anyio.open_process(command, env=env) as process:
        assert process.stdin is not None and process.stdout is not None
        lines = anyio.streams.text.TextReceiveStream(process.stdout)
        buffer = ""

        async def message() -> dict[str, Any]:
            nonlocal buffer
            while "\n" not in buffer:
                buffer += await lines.receive()
            line, buffer = buffer.split("\n", 1)
            return json.loads(line)

        async def send(body: dict[str, Any]) -> None:
            await process.stdin.send((json.dumps(body) + "\n").encode())

        with anyio.fail_after(60):
            await send(INIT)
            while (await message()).get("id") != 1:
                pass
            await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await send(
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "confirm", "arguments": {}}}
            )
            while (await message()).get("method") != "elicitation/create":
                pass
            asked = time.monotonic()
            seen = []
            while "result" not in (answer := await message()) or answer.get("id") != 2:
                seen.append(answer.get("method"))
            ended_after = time.monotonic() - asked
            await process.stdin.aclose()
            await process.wait()
    text = answer["result"]["content"][0]["text"]
    FIGURES.attack("stdio question unanswered", deadline_s=1, ended_after_s=round(ended_after, 2), told=len(seen))
    assert answer["result"]["isError"] and "timed out after 1 s" in text, text
    assert "notifications/cancelled" in seen


async def test_an_unanswered_question_through_fusion_nb_connect_ends_at_its_deadline():
    """Issue 44, 6: a 2025 host behind ``fusion-nb connect`` never answers the question the upstream asks.

    The bridge reaches the upstream on 2026-07-28, where the question comes back in an
    input-required result and nothing upstream ends it: before, the host's question (and
    the call) waited for ever (20 s, no answer, in the issue). Now ``--answer-timeout``
    (default 600 s) ends it: the host is told and the call fails in one sentence.
    """
    import os
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "cli"))
    from served import cli_env, served

    token = "reliability-bridge-token-0123456789ab"
    async with served("task_app", "--answer-timeout", "600", env={"FUSION_NB_TOKEN": token}) as upstream:
        command = [sys.executable, "-m", "fusion_nb", "connect", upstream.url, "--answer-timeout", "1"]
        env = {**os.environ, **cli_env(FUSION_NB_TOKEN=token)}
        async with await anyio.open_process(command, env=env) as process:
            assert process.stdin is not None and process.stdout is not None
            lines = anyio.streams.text.TextReceiveStream(process.stdout)
            buffer = ""

            async def message() -> dict[str, Any]:
                nonlocal buffer
                while "\n" not in buffer:
                    buffer += await lines.receive()
                line, buffer = buffer.split("\n", 1)
                return json.loads(line)

            async def send(body: dict[str, Any]) -> None:
                await process.stdin.send((json.dumps(body) + "\n").encode())

            with anyio.fail_after(60):
                await send(INIT)
                while (await message()).get("id") != 1:
                    pass
                await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                call = {"name": "confirm", "arguments": {}}
                await send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
                while (await message()).get("method") != "elicitation/create":
                    pass
                asked = time.monotonic()
                seen = []
                while "result" not in (answer := await message()) or answer.get("id") != 2:
                    seen.append(answer.get("method"))
                ended_after = time.monotonic() - asked
                await process.stdin.aclose()
                await process.wait()
    text = answer["result"]["content"][0]["text"]
    FIGURES.attack("bridged question unanswered", deadline_s=1, ended_after_s=round(ended_after, 2), told=len(seen))
    assert answer["result"]["isError"] and "timed out after 1 s" in text, text
    assert "notifications/cancelled" in seen
