"""MCP tasks with clients nobody here wrote: the TypeScript SDKs and the MCP Inspector.

``tasks.mjs`` runs the TypeScript SDK 1.x ``client.experimental.tasks.callToolStream``
(2025-11-25) against ``tasks_app`` over HTTP, stdio and the ``fusion-nb connect`` bridge, with every request timing out
after 1 s: a 3 s job completes through its task (created, polled, result), the task is
listed, a required-task tool is cancelled and its cleanup runs, an unknown task id is
refused, and the same job as a plain call dies of the client's timeout.

``task_listen.mjs`` (the TypeScript SDK 2.x client with ext-tasks 0.2.2's schemas and
helpers, 2026-07-28) listens for its tasks' status on ``subscriptions/listen``.

The Inspector's one-shot ``--cli`` refuses ``--method tasks/*`` ("Unsupported method"); its
connection CLI ``mcpdo`` (the same pinned package) holds a connection in a daemon and
gets, lists and cancels tasks in both eras.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from http_serving import serve_asgi
from node_clients import HERE, server_env
from stdio_serving import REPO, StdioCommand
from tasks_app import app
from test_interop import inspector, run_node

from fusion_nb.mcp import http_app

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # uvicorn, and the kernel harness


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


async def test_typescript_tasks_through_the_stdio_bridge(node, tmp_path):
    """Issue 25: the same 2025-11-25 client on ``fusion-nb connect``'s stdio, which translates its tasks onto
    the upstream's 2026-07-28 extension (created, polled, result, list, cancel with cleanup, an unknown id)."""
    async with serve_asgi(http_app(app), app) as served:
        command = StdioCommand(
            argv=[sys.executable, "-u", "-m", "fusion_nb", "connect", served.url],
            env={"FUSION_NB_TOKEN": served.token},
        )
        mark = str(tmp_path / "mark")
        out = await run_node(node, "tasks.mjs", "stdio", mark, *command.argv, env=server_env(command))
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


MCPDO = HERE / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "mcpdo" / "build" / "mcp-bin.js"


@contextlib.asynccontextmanager
async def mcpdo(node: str, home: Path) -> AsyncIterator[Callable[..., Awaitable[tuple[int, Any]]]]:
    """The Inspector's connection CLI with a private daemon and catalog under ``home``; stopped and removed at the end.

    Yields ``run(*args)``: the exit code and the JSON the command printed.
    """
    env = {**os.environ, "HOME": str(home), "MCP_CATALOG_PATH": str(home / "mcp.json")}
    env["MCP_INSPECTOR_SECRET_STORE"] = "file"  # (no keychain here; the file lives under ``home``)

    async def run(*args: str) -> tuple[int, Any]:
        with anyio.fail_after(60):
            done = await anyio.run_process([node, str(MCPDO), "--format", "json", *args], env=env, check=False)
        printed = done.stdout.decode().strip() or done.stderr.decode().strip().splitlines()[-1]
        return done.returncode, json.loads(printed) if printed.startswith(("{", "[")) else printed

    with anyio.fail_after(60):
        private = await anyio.run_process([node, str(MCPDO), "private"], env=env)
    for line in private.stdout.decode().splitlines():  # export NAME='value'
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = value.strip("'")
    try:
        yield run
    finally:
        await run("daemon", "stop")
        shutil.rmtree(env["MCP_INSPECTOR_DAEMON_DIR"], ignore_errors=True)  # (its socket and log, under /tmp)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_inspector_mcpdo_gets_lists_and_cancels_tasks_in_both_eras(node, era, tmp_path):
    """``mcpdo tasks/get``, ``tasks/list`` and ``tasks/cancel`` against tasks of the connection's token.

    In 2026 there is no ``tasks/list`` on the wire: the Inspector lists the tasks its own
    session started (none here), while 2025 asks the server, which lists the token's tasks.
    """
    from fusion_nb.engine import tasks_of

    secret = "i" * 32
    home, mark = tmp_path / "home", tmp_path / "mark"
    home.mkdir()
    async with serve_asgi(http_app(app, tokens={"inspector": secret}), app) as served, mcpdo(node, home) as run:
        trained = tasks_of(app).create("inspector", "train", {"seconds": 0.2})
        stuck = tasks_of(app).create("inspector", "stuck", {"mark": str(mark)})
        with anyio.fail_after(10):
            await trained.wait()
        target = [served.url, "--transport", "http", "--era", era, "--header", f"Authorization: Bearer {secret}"]
        code, connected = await run("connect", *target, "--connection", "fusion")
        assert code == 0 and connected["protocolEra"] == era, connected
        code, got = await run("@fusion", "tasks/get", stuck.id)
        assert code == 0 and got["task"]["status"] == "working", got
        code, got = await run("@fusion", "tasks/get", trained.id)
        task = got.get("task") or {}  # (a failure prints what the Inspector said: once in CI it had no task)
        assert code == 0 and task.get("status") == "completed" and task.get("statusMessage") == "step 10 of 10", got
        code, listed = await run("@fusion", "tasks/list")
        statuses = {(task["taskId"], task["status"]) for task in listed["tasks"]}
        if era == "legacy":
            assert {(trained.id, "completed"), (stuck.id, "working")} <= statuses, listed
        else:
            assert statuses == set(), listed
        code, cancelled = await run("@fusion", "tasks/cancel", stuck.id)
        assert code == 0 and cancelled == {"cancelled": True, "taskId": stuck.id}, cancelled
        with anyio.fail_after(5):
            await stuck.wait()
        assert mark.read_text() == "cleaned", "the cancelled task's cleanup ran"
        code, got = await run("@fusion", "tasks/get", stuck.id)
        assert got["task"]["status"] == "cancelled", got
        code, unknown = await run("@fusion", "tasks/get", "no-such-task")
        assert code != 0 and 'there is no task "no-such-task" for this client' in unknown["error"]["message"], unknown
