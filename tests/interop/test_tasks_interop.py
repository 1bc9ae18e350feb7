"""MCP tasks with a client nobody here wrote: the TypeScript SDK 1.x task runtime (2025-11-25).

``tasks.mjs`` runs ``client.experimental.tasks.callToolStream`` against ``tasks_app``
over HTTP and stdio with every request timing out after 1 s: a 3 s job completes
through its task (created, polled, result), the task is listed, a required-task tool
is cancelled and its cleanup runs, an unknown task id is refused, and the same job
as a plain call dies of the client's timeout.
"""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from http_serving import serve_asgi
from node_clients import server_env
from stdio_serving import REPO, StdioCommand
from tasks_app import app
from test_interop import inspector, run_node

from fusion_nb.mcp import http_app

pytestmark = pytest.mark.anyio


def check(seen: dict) -> None:
    assert seen["capability"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert seen["support"] == {"train": "optional", "stuck": "required"}
    train = seen["train"]
    assert train["messages"][0] == "taskCreated" and train["messages"][-1] == "result", train
    assert "taskStatus" in train["messages"], "the client polled tasks/get"
    assert train["text"] == "trained for 3.0 s" and train["ms"] >= 3000, train
    assert [train["taskId"], "completed"] in seen["listed"] and seen["got"] == "completed"
    stuck = seen["stuck"]
    assert stuck["first"] == "taskCreated" and stuck["cancelled"] == "cancelled", stuck
    assert stuck["cleaned"] == "cleaned" and stuck["cleanupMs"] < 1000 and stuck["after"] == "cancelled", stuck
    assert 'there is no task "no-such-task" for this client' in seen["unknown"], seen["unknown"]
    assert "timed out" in seen["plain"].lower(), seen["plain"]


async def test_typescript_tasks_over_http(node, tmp_path):
    async with serve_asgi(http_app(app), app) as served:
        out = await run_node(node, "tasks.mjs", "http", served.url, served.token, str(tmp_path / "mark"))
    check(json.loads(out))


async def test_typescript_tasks_over_stdio(node, tmp_path):
    command = StdioCommand(
        argv=[sys.executable, "-u", "-m", "fusion_nb.mcp.stdio", "tasks_app:app"],
        env={"PYTHONPATH": f"{REPO / 'tests' / 'mcp'}:{REPO}"},
    )
    out = await run_node(node, "tasks.mjs", "stdio", str(tmp_path / "mark"), *command.argv, env=server_env(command))
    check(json.loads(out))


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_inspector_cli_calls_a_task_tool_in_both_eras(node, era):
    """The modern Inspector advertises the tasks extension and polls the task to its result; the legacy
    one calls an optional task tool plainly. (The pinned CLI refuses ``--method tasks/get``: "Unsupported method".)
    """
    from fusion_nb.engine import tasks_of

    async with serve_asgi(http_app(app), app) as served:
        before = {task.id for task in tasks_of(app)}
        target = [served.url, "--transport", "http", "--protocol-era", era]
        target += ["--header", f"Authorization: Bearer {served.token}"]
        call = ["--method", "tools/call", "--tool-name", "train", "--tool-arg", "seconds=1"]
        called = json.loads(await run_node(*inspector(node, *target, *call)))
        made = [task for task in tasks_of(app) if task.id not in before]
    assert called["content"][0]["text"] == "trained for 1.0 s" and not called.get("isError"), called
    if era == "modern":
        assert [(task.tool_name, task.status) for task in made] == [("train", "completed")]
    else:
        assert made == [], "a 2025 client that did not ask for a task gets a plain call"


def check_listened(seen: dict, other: str) -> None:
    """What the TypeScript client must hear on its listen stream (``task_listen.mjs``)."""
    assert seen["extTasks"] == "0.2.2" and seen["created"] == ["task", "task"], seen
    train, stuck = seen["train"], seen["stuck"]
    assert seen["accepted"] == [train, stuck] and other not in seen["accepted"], seen["honored"]
    assert seen["honored"]["toolsListChanged"] is True, seen["honored"]
    heard = seen["heard"]
    assert all(h["valid"] and h["subscriptionId"] is not None for h in heard), heard
    assert {h["taskId"] for h in heard} == {train, stuck}, "nothing of a task it does not own"
    trained = [h for h in heard if h["taskId"] == train]
    assert trained[0]["status"] == "working" and trained[-1]["status"] == "completed", trained
    assert trained[-1]["text"] == "trained for 2.0 s", trained
    assert any((h["statusMessage"] or "").startswith("step ") for h in trained), trained
    assert [h["status"] for h in heard if h["taskId"] == stuck][-1] == "cancelled", heard
    assert seen["closed"] == "local"


async def test_typescript_client_listens_for_task_status_over_http(node, tmp_path):
    from fusion_nb.engine import tasks_of

    other = tasks_of(app).create("another-client", "stuck", {"mark": str(tmp_path / "other")})
    asgi = http_app(app)
    async with serve_asgi(asgi, app) as served:
        mark = str(tmp_path / "mark")
        out = await run_node(node, "task_listen.mjs", "http", mark, other.id, served.url, served.token)
        with anyio.fail_after(10):
            while asgi.server.task_listen.watching:  # the stream closed: its task watches are undone
                await anyio.sleep(0.01)
        assert other.status == "working", "another client's task is untouched"
        tasks_of(app).cancel("another-client", other.id)
    check_listened(json.loads(out), other.id)


async def test_typescript_client_listens_for_task_status_over_stdio(node, tmp_path):
    command = StdioCommand(
        argv=[sys.executable, "-u", "-m", "fusion_nb.mcp.stdio", "tasks_app:app"],
        env={"PYTHONPATH": f"{REPO / 'tests' / 'mcp'}:{REPO}"},
    )
    mark = str(tmp_path / "mark")
    out = await run_node(node, "task_listen.mjs", "stdio", mark, "no-such-task", *command.argv, env=server_env(command))
    check_listened(json.loads(out), "no-such-task")
