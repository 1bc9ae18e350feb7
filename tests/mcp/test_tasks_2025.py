"""Tasks over MCP, 2025-11-25 utility: the wire itself, every answer and every refusal.

The SDK 2.3 client validates a ``tools/call`` answer as a ``CallToolResult``, so a
``CreateTaskResult`` cannot come back through it: these tests speak the raw wire over
the server's public ``run()`` (``raw_peer``). The TypeScript SDK's own task runtime
drives the same server over HTTP and stdio in ``tests/interop/test_tasks_interop.py``.
"""

from __future__ import annotations

import itertools
import json

import anyio
import httpx
import pytest
from eras import client_for
from http_serving import open_session, serve
from mcp import types
from mcp.shared.exceptions import MCPError
from raw_peer import RawError, RawPeer, raw_peer

from fusion_nb import Fusion, ask, progress, read_input, require_input, respond
from fusion_nb.engine import tasks_of
from fusion_nb.mcp import mcp_server

pytestmark = pytest.mark.anyio


class Job:
    """The tools under test and what they saw."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.entered = anyio.Event()
        self.cleaned: list[str] = []


def task_app(name: str = "tasks-test") -> tuple[Fusion, Job]:
    app, job = Fusion(name, grace=2.0), Job()

    @app.f.action("train").with_integer("epochs").task(ttl=600, poll_interval=0.2).handle
    async def train(input, ctx):
        try:
            yield progress(10, "epoch 1")
            job.entered.set()
            await job.release.wait()
            yield respond(f"trained {input.epochs} epochs")
        finally:
            job.cleaned.append("train")

    @app.f.action("batch").task("required").handle
    async def batch(input, ctx):
        return "batch done"

    @app.f.query("plain").handle
    async def plain(input, ctx):
        return "plain"

    @app.f.action("confirm").task().handle
    async def confirm(input, ctx):
        go = read_input("go")
        return f"go={go}" if go is not None else require_input.elicit("Go ahead?", {"go": ask.boolean("Proceed")})

    return app, job


async def call_as_task(peer: RawPeer, name: str, arguments: dict | None = None, **task) -> dict:
    return (await peer.request("tools/call", {"name": name, "arguments": arguments or {}, "task": task}))["task"]


async def get(peer: RawPeer, task_id: object) -> dict:
    return await peer.request("tasks/get", {"taskId": task_id})


async def result(peer: RawPeer, task_id: str) -> dict:
    return await peer.request("tasks/result", {"taskId": task_id})


async def listed(peer: RawPeer) -> list[dict]:
    return (await peer.request("tasks/list", {}))["tasks"]


async def cancel(peer: RawPeer, task_id: str) -> dict:
    return await peer.request("tasks/cancel", {"taskId": task_id})


async def refused(request) -> str:
    with pytest.raises(RawError) as error:
        await request
    return error.value.message


@pytest.fixture
async def served():
    app, job = task_app()
    yield app, job
    job.release.set()
    await app.aclose()


async def test_the_handshake_and_tools_list_declare_tasks(served):
    app, _ = served
    async with raw_peer(mcp_server(app)) as peer:
        assert peer.initialized["capabilities"]["tasks"] == {
            "list": {},
            "cancel": {},
            "requests": {"tools": {"call": {}}},
        }
    async with client_for(mcp_server(app), "2025-memory") as client:
        tools = (await client.list_tools()).tools
        support = {tool.name: (tool.execution.task_support if tool.execution else None) for tool in tools}
        assert support == {"train": "optional", "batch": "required", "plain": None, "confirm": "optional"}


async def test_a_task_is_created_polled_listed_and_its_result_waited_for(served):
    app, job = served
    async with raw_peer(mcp_server(app)) as peer:
        created = await call_as_task(peer, "train", {"epochs": 3}, ttl=60_000)
        assert (created["status"], created["ttl"], created["pollInterval"]) == ("working", 60_000, 200)
        task_id = created["taskId"]
        await job.entered.wait()
        polled = await get(peer, task_id)
        assert (polled["status"], polled["statusMessage"]) == ("working", "epoch 1")
        assert [task["taskId"] for task in await listed(peer)] == [task_id]
        job.release.set()
        final = await result(peer, task_id)
        assert final["content"] == [{"type": "text", "text": "trained 3 epochs"}] and not final.get("isError")
        assert final["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        assert (await get(peer, task_id))["status"] == "completed"
        while not any(n["params"].get("status") == "completed" for n in peer.notifications):
            await peer.notified.wait()
        statuses = [(n["method"], n["params"]["status"], n["params"].get("statusMessage")) for n in peer.notifications]
        assert statuses[0] == ("notifications/tasks/status", "working", "epoch 1")
        assert statuses[-1][:2] == ("notifications/tasks/status", "completed")


async def test_cancel_aborts_the_call_and_its_cleanup_runs(served):
    app, job = served
    async with raw_peer(mcp_server(app)) as peer:
        task_id = (await call_as_task(peer, "train", {"epochs": 1}))["taskId"]
        await job.entered.wait()
        call = tasks_of(app).get(None, task_id).call
        assert (await cancel(peer, task_id))["status"] == "cancelled"
        with anyio.fail_after(1):
            await call.wait_stopped()
        assert job.cleaned == ["train"] and app.active_calls == []
        again = await refused(cancel(peer, task_id))
        assert again == f'tasks/cancel: task "{task_id}" has already ended (cancelled); it cannot be cancelled.'


async def test_a_task_asks_over_tasks_result_and_resumes(served):
    app, _ = served
    asked = []

    def person(method, params):
        asked.append((method, params["message"], params["_meta"]))
        return {"action": "accept", "content": {"go": True}}

    async with raw_peer(mcp_server(app), person, elicitation={"form": {}}) as peer:
        task_id = (await call_as_task(peer, "confirm"))["taskId"]
        while (polled := await get(peer, task_id))["status"] != "input_required":
            await peer.notified.wait()
        assert polled["statusMessage"] == "Go ahead?"
        final = await result(peer, task_id)
        assert final["content"] == [{"type": "text", "text": "go=True"}]
        related = {"io.modelcontextprotocol/related-task": {"taskId": task_id}}
        assert asked == [("elicitation/create", "Go ahead?", related)]


async def test_bad_task_requests_get_one_sentence_each(served):
    app, _ = served
    async with raw_peer(mcp_server(app)) as peer:
        assert await refused(get(peer, "no-such-task")) == (
            'tasks/get: there is no task "no-such-task" for this client '
            "(it never existed, has expired, or belongs to another token)."
        )
        assert await refused(get(peer, 7)) == "tasks/get needs params.taskId, the id string of a task; got 7."
        assert await refused(get(peer, "a" * 300)) == (  # a string, longer than any task id: no such task
            f'tasks/get: there is no task "{"a" * 37}..." for this client '
            "(it never existed, has expired, or belongs to another token)."
        )
        assert await refused(peer.request("tasks/cancel", {})) == (
            "tasks/cancel needs params.taskId, the id string of a task; got None."
        )
        assert await refused(call_as_task(peer, "train", {"epochs": 1}, ttl=-5)) == (
            'Tool "train": params.task.ttl must be a whole number of milliseconds from 1000 to 604800000; got -5.'
        )
        assert await refused(peer.request("tools/call", {"name": "train", "arguments": {}, "task": "soon"})) == (
            """Tool "train": params.task must be an object such as {"ttl": 60000}; got 'soon'."""
        )
        assert await refused(call_as_task(peer, "plain")) == (
            'Tool "plain" does not run as a task (its taskSupport is "forbidden"); call it without params.task.'
        )
        plain_call = await peer.request("tools/call", {"name": "batch", "arguments": {}})
        assert plain_call["isError"] and plain_call["content"][0]["text"].startswith(
            '[TASK_REQUIRED] Tool "batch" runs only as a task, and this call did not ask for one.'
        )


async def post(http: httpx.AsyncClient, url: str, headers: dict, message: dict) -> dict:
    """One JSON-RPC request over raw HTTP; its response (from JSON or from the SSE stream)."""
    reply = await http.post(url, json=message, headers=headers)
    if not reply.headers["content-type"].startswith("text/event-stream"):
        return reply.json()
    for line in reply.text.splitlines():
        if line.startswith("data: ") and json.loads(line[6:]).get("id") == message["id"]:
            return json.loads(line[6:])
    raise AssertionError(f"no response in {reply.text!r}")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn serves on asyncio
async def test_two_tokens_never_see_each_others_tasks():
    app, job = task_app("tasks-http")
    tokens = {"alice": "a" * 32, "bob": "b" * 32}
    async with serve(app, tokens=tokens) as served, httpx.AsyncClient() as http:
        alice = {**served.headers(), "Authorization": f"Bearer {tokens['alice']}"}
        served.token = tokens["alice"]
        session = await open_session(http, served)
        call = {"name": "train", "arguments": {"epochs": 2}, "task": {}}
        created = await post(
            http, served.url, {**alice, **session}, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
        )
        task_id = created["result"]["task"]["taskId"]
        await job.entered.wait()
        async with served.client("legacy", token=tokens["bob"]) as bob:
            assert (await bob.session.send_request(types.ListTasksRequest(), types.ListTasksResult)).tasks == []
            for request in (
                types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)),
                types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
                types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)),
            ):
                with pytest.raises(MCPError) as refused_for_bob:
                    await bob.session.send_request(request, types.GetTaskResult)
                assert "there is no task" in refused_for_bob.value.error.message
        async with served.client("legacy", token=tokens["alice"]) as own:
            listed = (await own.session.send_request(types.ListTasksRequest(), types.ListTasksResult)).tasks
            assert [task.task_id for task in listed] == [task_id]
        job.release.set()
        await tasks_of(app).get("alice", task_id).wait()
    await app.aclose()


@pytest.mark.parametrize("era", ["2025-memory", "2026-stream"])
async def test_a_task_tool_called_plainly_runs_and_a_silent_one_gets_heartbeats(served, era):
    app, job = served
    server = mcp_server(app)
    server.task_wire.heartbeat = 0.05
    beats = []

    async def on_progress(value, total, message):
        beats.append((value, message))
        if len(beats) == 3:
            job.release.set()  # three heartbeats of a silent call: let it finish

    @app.f.action("silent").task().handle
    async def silent(input, ctx):
        await job.release.wait()
        return "done at last"

    async with client_for(server, era) as client:
        answer = await client.call_tool("silent", {}, progress_callback=on_progress)
    assert answer.content[0].text == "done at last" and not answer.is_error
    assert [message for _, message in beats[:3]] == ["still working"] * 3
    assert all(a < b for (a, _), (b, _) in itertools.pairwise(beats)), beats
