"""Scale-out behind Debian's nginx with the shipped config: two workers on loopback.

Both eras through nginx (2025 sessions pinned by ``hash $http_mcp_session_id``),
a multi-round 2026 call whose rounds land on different workers, progress streamed
through nginx, and SIGTERM to one worker under load.
"""

from __future__ import annotations

import contextlib
import json
import signal

import anyio
import httpx
import pytest
from mcp import MCPError, types
from nginx import behind_nginx
from served import served

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # nginx: Debian package, installed by make test and .ci/run


TOKEN = "nginx-test-token-0123456789abcdef"


@contextlib.asynccontextmanager
async def topology(tmp_path, *, marks=None, drain="10"):
    env = {"FUSION_NB_TOKEN": TOKEN, "FUSION_NB_TEST_MARKS": str(marks or tmp_path / "marks")}
    key = str(tmp_path / "state.key")
    options = ("--state-key-file", key, "--drain-timeout", drain)
    async with behind_nginx(tmp_path, *options, env=env) as topology:
        yield topology


async def pid_of(client) -> int:
    return (await client.call_tool("echo", {"text": "which"})).structured_content["pid"]


async def worker_pid(worker) -> int:
    async with worker.client() as client:
        return await pid_of(client)


async def test_both_eras_through_nginx_with_session_affinity_for_2025(tmp_path):
    async with topology(tmp_path) as (a, b, url):
        pids = {await worker_pid(a), await worker_pid(b)}
        seen_2025: list[set[int]] = []
        for _ in range(4):  # four sessions: each one stays on its worker for every request
            async with a.client("legacy", url=url) as client:
                seen_2025.append({await pid_of(client) for _ in range(6)})
        assert all(len(session) == 1 for session in seen_2025)
        assert set().union(*seen_2025) <= pids
        async with a.client("auto", url=url) as client:  # 2026: no session, balanced over both
            seen_2026 = {await pid_of(client) for _ in range(12)}
        assert seen_2026 == pids


async def test_2026_rounds_of_one_call_on_different_workers(tmp_path):
    async with topology(tmp_path) as (a, b, url):
        pid_a, pid_b = await worker_pid(a), await worker_pid(b)

        def answer(key, text):
            return {key: types.ElicitResult(action="accept", content={key: text})}

        async def unused(context, params):  # declares elicitation; this test answers the rounds itself
            raise AssertionError("the rounds are driven by hand")

        async with a.client(elicitation_callback=unused) as on_a, b.client(elicitation_callback=unused) as on_b:
            first = await on_a.session.call_tool("two.rounds", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            second = await on_b.session.call_tool(
                "two.rounds",
                {},
                input_responses=answer("first", "one"),
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(second, types.InputRequiredResult)
            final = await on_a.session.call_tool(
                "two.rounds",
                {},
                input_responses=answer("second", "two"),
                request_state=second.request_state,
                allow_input_required=True,
            )
        assert final.structured_content == {
            "answers": ["one", "two"],
            "round1_pid": pid_a,
            "round2_pid": pid_b,
            "round3_pid": pid_a,
        }

        async def elicit(context, params):  # and the SDK driving the rounds through nginx
            key = "first" if params.message == "First?" else "second"
            return types.ElicitResult(action="accept", content={key: key.upper()})

        async with a.client(url=url, elicitation_callback=elicit) as client:
            driven = await client.call_tool("two.rounds", {})
        assert driven.structured_content["answers"] == ["FIRST", "SECOND"]


async def test_a_foreign_key_refuses_the_state(tmp_path):
    async with served("service_app", env={"FUSION_NB_TOKEN": TOKEN}) as other, topology(tmp_path) as (a, _, _url):

        async def unused(context, params):
            raise AssertionError("the rounds are driven by hand")

        async with a.client(elicitation_callback=unused) as on_a, other.client(elicitation_callback=unused) as on_other:
            first = await on_a.session.call_tool("two.rounds", {}, allow_input_required=True)
            with pytest.raises(MCPError) as refused:  # a worker without the shared key cannot open the state
                await on_other.session.call_tool(
                    "two.rounds",
                    {},
                    input_responses={"first": types.ElicitResult(action="accept", content={"first": "x"})},
                    request_state=first.request_state,
                    allow_input_required=True,
                )
    assert refused.value.error.code == types.INVALID_PARAMS and "belongs to another call" in str(refused.value)


async def test_progress_streams_through_nginx(tmp_path):
    async with topology(tmp_path) as (a, _, url):
        done = False
        while_running: list[bool] = []

        async def on_progress(value, total, message):
            while_running.append(not done)

        async with a.client("auto", url=url) as client:
            result = await client.call_tool("steps", {"n": 4, "delay": 0.3}, progress_callback=on_progress)
            done = True
        assert result.structured_content["steps"] == 4
        # unbuffered: the first events arrived while the call was still running, one per step
        assert len(while_running) == 4 and all(while_running)


async def test_sigterm_to_one_worker_under_load(tmp_path):
    marks = tmp_path / "marks"
    async with topology(tmp_path, marks=marks, drain="1") as (a, b, url):
        pid_a = await worker_pid(a)
        outcomes: list[object] = []
        stop_load = anyio.Event()
        slow_started = anyio.Event()
        slow_result: dict[str, object] = {}

        async def load(index: int):
            async with a.client("auto", url=url) as client:
                await client.list_tools()
                while not stop_load.is_set():
                    result = await client.call_tool("steps", {"n": 2, "delay": 0.02})
                    outcomes.append(result.structured_content["pid"])

        async def slow_on_a():
            async def started(value, total, message):
                slow_started.set()

            async with a.client() as client:
                await client.list_tools()
                slow_result["result"] = await client.call_tool("slow", {"tag": "on-a"}, progress_callback=started)

        async with anyio.create_task_group() as group:
            group.start_soon(slow_on_a)
            for index in range(6):
                group.start_soon(load, index)
            with anyio.fail_after(60):
                await slow_started.wait()
                while len(outcomes) < 20:
                    await anyio.sleep(0.05)
            a.signal(signal.SIGTERM)
            assert await a.wait() == 0
            before = len(outcomes)
            with anyio.fail_after(60):
                while len(outcomes) < before + 30:  # the survivor keeps answering every call
                    await anyio.sleep(0.05)
            stop_load.set()
        assert pid_a in outcomes  # the load really was spread over both workers
        assert outcomes[-1] != pid_a
        slow = slow_result["result"]
        assert slow.is_error and slow.content[0].text.startswith("[CANCELLED]")
        lines = marks.read_text().splitlines()
        assert f"{pid_a} started on-a" in lines and f"{pid_a} cleanup on-a" in lines
        assert b.process.returncode is None


LEGACY = "2025-11-25"


def answer_of(response: httpx.Response) -> dict:
    """The JSON-RPC message of a plain JSON or event-stream answer."""
    assert response.status_code == 200, (response.status_code, response.text)
    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])


async def open_session(http: httpx.AsyncClient, worker_url: str) -> str:
    """A 2025 session opened on one worker directly (as nginx does when the hashed worker is down)."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    opened = await http.post(worker_url, json=body, headers=headers)
    answer_of(opened)
    session = opened.headers["mcp-session-id"]
    headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
    done = await http.post(worker_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert done.status_code == 202, done.text
    return session


async def test_a_session_reaches_its_worker_whatever_the_hash_says(tmp_path):
    """Issue 29: a 2025 session opened on the worker the hash does not pick (its own was down, and nginx
    passed the initialize on) went to the hashed worker once that was back, which answered 404. Each
    worker names itself in its session ids (``--worker-name``) and the shipped config routes by it."""
    async with topology(tmp_path) as (a, b, url), httpx.AsyncClient(timeout=30) as http:
        for worker in (a, b):
            expected = await worker_pid(worker)
            session = await open_session(http, worker.url)
            assert session.startswith(("w1.", "w2.")), session
            headers = {
                "Authorization": f"Bearer {TOKEN}",
                "Accept": "application/json, text/event-stream",
                "Mcp-Session-Id": session,
                "MCP-Protocol-Version": LEGACY,
            }
            for number in range(4):  # through nginx, every request of the session lands on its worker
                body = {
                    "jsonrpc": "2.0",
                    "id": 10 + number,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "which"}},
                }
                answer = answer_of(await http.post(url, json=body, headers=headers))
                assert answer["result"]["structuredContent"]["pid"] == expected, answer
        forged = {"Authorization": f"Bearer {TOKEN}", "Mcp-Session-Id": "w3.nothing", "MCP-Protocol-Version": LEGACY}
        unknown = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=forged)
        assert unknown.status_code in (400, 404), "an unknown prefix goes to the pool and is refused as unknown"


async def test_behind_nginx_with_tls_the_oauth_documents_name_the_https_url(tmp_path):
    """The shipped config passes the RFC 9728 document through; every URL in it and in the
    challenge is the public https one (``--public-url``), not the worker's loopback http."""
    from nginx import free_port, self_signed, trusting
    from oauth_issuer import issuing

    port, tls = free_port(), self_signed(tmp_path / "tls")
    public = f"https://localhost:{port}"
    async with issuing() as issuer:
        options = ("--auth-issuer", issuer.url, "--public-url", public, "--auth-scopes", "notes:read")
        async with (
            behind_nginx(tmp_path, *options, env={}, port=port, tls=tls) as (_, _, url),
            httpx.AsyncClient(verify=trusting(tls)) as http,
        ):
            document = await http.get(public + "/.well-known/oauth-protected-resource/mcp")
            challenge = await http.post(url, json={}, headers={"Accept": "application/json, text/event-stream"})
            token = issuer.token(aud=public + "/mcp", scope="notes:read")
            accepted = await http.post(
                url,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"},
                    },
                },
                headers={"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"},
            )
    assert url == public + "/mcp"
    assert document.status_code == 200 and document.json()["resource"] == public + "/mcp"
    assert challenge.status_code == 401
    assert (
        f'resource_metadata="{public}/.well-known/oauth-protected-resource/mcp"'
        in challenge.headers["www-authenticate"]
    )
    assert accepted.status_code == 200, accepted.text
