"""No call runs twice behind the shipped nginx config when a worker dies mid-call (issue 29, 4).

Debian's nginx with ``deploy/nginx/fusion-nb.conf`` in front of two ``fusion-nb serve``
workers. 20 calls of a tool that marks its start and then waits are spread over both
(2026-07-28: round-robin); one worker is killed with SIGKILL while they run. With
``proxy_next_upstream ... non_idempotent`` nginx re-sent the killed worker's POSTs to the
survivor (5 of 20 entered on both); now each of them gets an error, and every call
entered exactly one worker.
"""

from __future__ import annotations

import collections
import contextlib
import sys
from pathlib import Path

import anyio
import pytest
from reliability_support import FIGURES

sys.path.insert(0, str(Path(__file__).parent.parent / "cli"))

from nginx import behind_nginx  # tests/cli/nginx.py: the shipped config in front of two workers

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

TOKEN = "reliability-nginx-token-0123456789ab"
CALLS = 20


def starts(marks: Path) -> collections.Counter[str]:
    """How many times each tag's handler started, over both workers (lines are ``pid started TAG``)."""
    lines = marks.read_text().splitlines() if marks.exists() else []
    return collections.Counter(line.split()[2] for line in lines if line.split()[1] == "started")


@pytest.mark.timeout(300)
async def test_a_worker_killed_mid_call_runs_no_call_twice(tmp_path):
    marks = tmp_path / "marks"
    env = {"FUSION_NB_TOKEN": TOKEN, "FUSION_NB_TEST_MARKS": str(marks)}
    options = ("--state-key-file", str(tmp_path / "state.key"))
    async with behind_nginx(tmp_path, *options, env=env) as (a, _, url):
        answered: list[str] = []

        async def call(tag: str) -> None:
            with contextlib.suppress(Exception):  # the killed worker's calls fail: that is the point
                async with a.client("auto", url=url) as client:
                    await client.call_tool("slow", {"tag": tag})
            answered.append(tag)

        async with anyio.create_task_group() as group:
            for index in range(CALLS):
                group.start_soon(call, f"c{index}")
            with anyio.fail_after(60):
                while sum(starts(marks).values()) < CALLS:
                    await anyio.sleep(0.05)
            on_a = [line.split()[2] for line in marks.read_text().splitlines() if line.startswith(f"{a.process.pid} ")]
            a.process.kill()
            # settled: every call on the killed worker either answered (an error) or entered the survivor
            with anyio.move_on_after(60):
                while len(answered) + sum(n - 1 for n in starts(marks).values()) < len(on_a):
                    await anyio.sleep(0.05)
            twice = sorted(tag for tag, n in starts(marks).items() if n > 1)
            group.cancel_scope.cancel()
    FIGURES.attack(
        "worker killed behind nginx",
        calls=CALLS,
        on_killed_worker=len(on_a),
        answered_with_error=len(answered),
        entered_twice=len(twice),
    )
    assert 0 < len(on_a) < CALLS, "the calls were not spread over both workers"
    assert twice == [], f"calls entered both workers: {twice}"
    assert sorted(answered) == sorted(on_a), "each call on the killed worker gets an answer (an error)"


@pytest.mark.timeout(300)
async def test_a_2025_session_whose_worker_is_down_gets_404_not_502(tmp_path):
    """Issue 44, 9: behind the shipped nginx, the worker holding a 2025 session is killed.

    Before, every later request of that session got 502 (6,960 in one run), which a 2025
    client does not take as "open a new session"; 404 is what the spec gives a lost
    session. A 2026 request (no session) still gets a worker.
    """
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    env = {"FUSION_NB_TOKEN": TOKEN}
    async with (
        behind_nginx(tmp_path, "--state-key-file", str(tmp_path / "state.key"), env=env) as (a, b, url),
        httpx.AsyncClient(timeout=30) as http,
    ):
        opened = await http.post(url, json=init, headers=headers)
        session_id = opened.headers["mcp-session-id"]
        session = {**headers, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
        assert (await http.post(url, json=ping, headers=session)).status_code == 200
        holder = a if session_id.startswith("w1.") else b
        holder.process.kill()
        await holder.process.wait()
        statuses = collections.Counter()
        for _ in range(20):
            answered = await http.post(url, json=ping, headers=session)
            statuses[answered.status_code] += 1
        again = await http.post(url, json=init, headers=headers)  # what a 2025 client does on 404
    FIGURES.attack("2025 session, worker down", requests=20, **{f"http_{code}": n for code, n in statuses.items()})
    assert statuses == {404: 20}, statuses
    assert again.status_code == 200 and again.headers["mcp-session-id"] != session_id
