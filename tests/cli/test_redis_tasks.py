"""Tasks shared across workers through Redis (SPEC 15): real redis-server, real nginx, real worker processes.

Two ``fusion-nb serve task_app --task-store redis://...`` workers (A and B) behind Debian's nginx
with the shipped config. The 2026-07-28 cases speak the raw wire (one stateless POST per
request, so each request names the worker it reaches: A's port, B's port, or nginx's
round-robin); the 2025-11-25 case opens a session on each worker. What is checked: a task
created on A is polled and collected on B; a cancel on B runs the cleanup on A; an answer given
on B resumes the question asked on A; the job tools reach a job of the other worker; a worker
killed with SIGKILL leaves its running tasks ``failed`` with one sentence, seen from the other,
within a bound of its lease; Redis away at start (exit 1, one sentence naming the URL without
its password) and mid-run (plain calls answer, task operations get one sentence, nothing
hangs); 1,000 tasks across both workers, every one collected.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from nginx import behind_nginx
from redis_server import free_port
from served import REPO, Served, cli_env, run_cli, served

# redis-server and nginx: Debian packages, installed by make test and .ci/run
pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


TOKEN = "redis-tasks-test-token-0123456789abcdef"
LEASE = 1  # seconds (--task-lease): short, so a dead worker's tasks fail within a test's patience
STOPPED = "The worker running this task stopped."
FINAL = ("completed", "failed", "cancelled")
WAIT = 30  # seconds: a generous bound on anything awaited, catching a hang, not a slowdown
EXTENSION = "io.modelcontextprotocol/tasks"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}, "extensions": {EXTENSION: {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "redis-tasks-test", "version": "0"},
}
PLAIN_META = {**META, "io.modelcontextprotocol/clientCapabilities": {}}  # a client without MCP tasks
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
}


class WireError(Exception):
    """A JSON-RPC error answer; ``message`` is what a client shows."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.message = str(error.get("message"))
        self.code = error.get("code")


def answer_of(response: httpx.Response, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response to ``request_id`` in a JSON body or an SSE stream."""
    assert response.status_code in (200, 400, 404), (response.status_code, response.text[:300])
    if response.headers.get("content-type", "").startswith("application/json"):
        messages = [response.json()]
    else:
        messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    found = [m for m in messages if m.get("id") == request_id and ("result" in m or "error" in m)]
    assert len(found) == 1, response.text[:500]
    return found[0]


class Modern:
    """The 2026-07-28 wire to one URL: each request a stateless POST carrying its own envelope."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url = http, url
        self.ids = iter(range(1, 10**9))

    async def request(self, method: str, meta: dict[str, Any] = META, tool: str | None = None, **params: Any) -> dict:
        """One request; ``tool`` names a ``tools/call``'s tool in ``Mcp-Name``, as 2026 routing headers do."""
        request_id = next(self.ids)
        headers = {**HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        if tool is not None:
            headers["Mcp-Name"] = tool
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": meta}}
        message = answer_of(await self.http.post(self.url, json=body, headers=headers), request_id)
        if "error" in message:
            raise WireError(message["error"])
        return message["result"]

    async def call(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] = META) -> dict:
        return await self.request("tools/call", meta, tool, name=tool, arguments=arguments)

    async def start(self, tool: str, **arguments: Any) -> str:
        """Call ``tool`` as a task; its id."""
        created = await self.call(tool, arguments)
        assert created["resultType"] == "task", created
        return created["taskId"]

    async def get(self, task_id: str) -> dict:
        return await self.request("tasks/get", taskId=task_id)

    async def until(self, task_id: str, *statuses: str, timeout: float = WAIT) -> dict:
        """Poll ``tasks/get`` until the task's status is one of ``statuses`` (bounded)."""
        with anyio.fail_after(timeout):
            while (task := await self.get(task_id))["status"] not in statuses:
                await anyio.sleep(0.05)
        return task

    async def cancel(self, task_id: str) -> dict:
        return await self.request("tasks/cancel", taskId=task_id)


class Legacy:
    """A 2025-11-25 session on one URL (raw: the SDK client cannot take a ``CreateTaskResult``)."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url = http, url
        self.ids = iter(range(1, 10**9))
        self.headers = dict(HEADERS)

    async def open(self) -> Legacy:
        capabilities: dict[str, Any] = {"tasks": {"requests": {"tools": {"call": {}}}}, "elicitation": {"form": {}}}
        params = {"protocolVersion": LEGACY, "capabilities": capabilities, "clientInfo": {"name": "t", "version": "0"}}
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        opened = await self.http.post(self.url, json=body, headers=self.headers)
        answer_of(opened, 0)
        self.headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self.http.post(self.url, json=initialized, headers=self.headers)).status_code == 202
        return self

    async def request(self, method: str, **params: Any) -> dict:
        request_id = next(self.ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        message = answer_of(await self.http.post(self.url, json=body, headers=self.headers), request_id)
        if "error" in message:
            raise WireError(message["error"])
        return message["result"]

    async def result_answering(self, task_id: str, content: dict[str, Any]) -> tuple[list[dict], dict]:
        """``tasks/result``, accepting with ``content`` each question it asks on its stream; (questions, result)."""
        request_id = next(self.ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tasks/result", "params": {"taskId": task_id}}
        asked: list[dict] = []
        async with self.http.stream("POST", self.url, json=body, headers=self.headers) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            async for line in stream.aiter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("method") == "elicitation/create":
                    asked.append(message["params"])
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"action": "accept", "content": content}}
                    assert (await self.http.post(self.url, json=reply, headers=self.headers)).status_code == 202
                elif message.get("id") == request_id:
                    return asked, message["result"]
        raise AssertionError("the tasks/result stream ended without its answer")


def job_id_of(started: dict) -> str:
    """The job id a task tool answered a host without MCP tasks with (its text names it: no output schema here)."""
    assert not started["isError"], started
    found = re.search(r'job_id "([^"]+)"', started["content"][0]["text"])
    assert found is not None, started
    return found.group(1)


def pid_in(result: dict) -> int:
    return result["structuredContent"]["pid"]


async def pid_of(worker: Served, http: httpx.AsyncClient) -> int:
    return pid_in(await Modern(http, worker.url).call("echo", {"text": "which"}, PLAIN_META))


@contextlib.asynccontextmanager
async def topology(tmp_path, redis, *options: str) -> AsyncIterator[tuple[Served, Served, str, httpx.AsyncClient]]:
    """Workers A and B on ``redis`` behind nginx; yields ``(a, b, nginx_url, http)``."""
    env = {"FUSION_NB_TOKEN": TOKEN}
    shared = ("--state-key-file", str(tmp_path / "state.key"), "--task-store", redis.url, "--task-lease", str(LEASE))
    async with (
        behind_nginx(tmp_path, *shared, *options, env=env, source="task_app") as (a, b, url),
        httpx.AsyncClient(timeout=httpx.Timeout(WAIT)) as http,
    ):
        yield a, b, url, http


async def read_mark(path) -> str:
    """The cleanup's mark once it is there (written aside and renamed, so never half-written)."""
    with anyio.fail_after(WAIT):
        while not path.exists():
            await anyio.sleep(0.05)
    return path.read_text()


async def test_a_task_created_on_a_is_polled_and_collected_on_b_and_round_robin(tmp_path, redis):
    async with topology(tmp_path, redis) as (a, b, url, http):
        pid_a, pid_b = await pid_of(a, http), await pid_of(b, http)
        on_a, on_b = Modern(http, a.url), Modern(http, b.url)
        task_id = await on_a.start("work", n=6, delay=0.25)
        seen = []
        with anyio.fail_after(WAIT):
            while (task := await on_b.get(task_id))["status"] not in FINAL:
                seen.append((task["status"], task.get("statusMessage")))
                await anyio.sleep(0.05)
        assert task["status"] == "completed" and pid_in(task["result"]) == pid_a != pid_b
        assert ("working", "step 3 of 6") in seen  # A's progress, coalesced into the shared status, read on B

        through = Modern(http, url)  # round-robin: create, polls and collection each land on either worker
        ids = [await through.start("work", n=2, delay=0.1) for _ in range(4)]
        finals = [await through.until(task_id, *FINAL) for task_id in ids]
        assert [final["status"] for final in finals] == ["completed"] * 4
        assert {pid_in(final["result"]) for final in finals} == {pid_a, pid_b}
        for final in finals:  # collected again on each worker: the same result
            assert (await on_a.get(final["taskId"]))["result"] == (await on_b.get(final["taskId"]))["result"]


async def test_a_cancel_on_b_runs_the_cleanup_on_a(tmp_path, redis):
    async with topology(tmp_path, redis) as (a, b, _url, http):
        pid_a = await pid_of(a, http)
        on_a, on_b = Modern(http, a.url), Modern(http, b.url)
        mark = tmp_path / "held.mark"
        task_id = await on_a.start("hold", mark=str(mark))
        holding = await on_b.until(task_id, "working")
        with anyio.fail_after(WAIT):
            while holding.get("statusMessage") != f"holding on {pid_a}":
                holding = await on_b.get(task_id)
                await anyio.sleep(0.05)
        assert (await on_b.cancel(task_id))["resultType"] == "complete"
        assert await read_mark(mark) == f"cleaned by {pid_a}"
        assert (await on_a.until(task_id, *FINAL))["status"] == "cancelled"
        assert (await on_b.until(task_id, *FINAL))["status"] == "cancelled"  # (A's writes reach Redis coalesced)


async def test_an_answer_given_on_b_resumes_the_question_asked_on_a(tmp_path, redis):
    async with topology(tmp_path, redis) as (a, b, _url, http):
        pid_a = await pid_of(a, http)
        on_a, on_b = Modern(http, a.url), Modern(http, b.url)
        task_id = await on_a.start("confirm")
        asking = await on_b.until(task_id, "input_required")
        (key,) = asking["inputRequests"]
        assert asking["inputRequests"][key]["params"]["message"] == f"Go ahead on {pid_a}?"
        answer = {key: {"action": "accept", "content": {"go": True}}}
        assert (await on_b.request("tasks/update", taskId=task_id, inputResponses=answer))["resultType"] == "complete"
        final = await on_b.until(task_id, *FINAL)
        assert final["status"] == "completed" and final["result"]["structuredContent"] == {"go": True, "pid": pid_a}


async def test_job_tools_reach_a_job_of_the_other_worker(tmp_path, redis):
    async with topology(tmp_path, redis, "--job-tools") as (a, b, _url, http):
        pid_a = await pid_of(a, http)
        on_a, on_b = Modern(http, a.url), Modern(http, b.url)
        started = await on_a.call("work", {"n": 3, "delay": 0.1}, PLAIN_META)  # a host without MCP tasks
        job_id = job_id_of(started)
        waited = await on_b.call("jobs.wait", {"job_id": job_id}, PLAIN_META)
        assert not waited["isError"] and waited["structuredContent"] == {"steps": 3, "pid": pid_a}
        mark = tmp_path / "job.mark"
        held = job_id_of(await on_a.call("hold", {"mark": str(mark)}, PLAIN_META))
        cancelled = await on_b.call("jobs.cancel", {"job_id": held}, PLAIN_META)
        assert not cancelled["isError"], cancelled
        assert await read_mark(mark) == f"cleaned by {pid_a}"


async def test_a_2025_session_on_b_lists_gets_waits_for_and_answers_tasks_created_on_a(tmp_path, redis):
    async with topology(tmp_path, redis) as (a, b, _url, http):
        pid_a = await pid_of(a, http)
        on_a, on_b = await Legacy(http, a.url).open(), await Legacy(http, b.url).open()
        call = {"name": "work", "arguments": {"n": 4, "delay": 0.2}, "task": {"ttl": 60_000}}
        created = (await on_a.request("tools/call", **call))["task"]
        assert created["status"] == "working"
        listed = [task["taskId"] for task in (await on_b.request("tasks/list"))["tasks"]]
        assert created["taskId"] in listed
        assert (await on_b.request("tasks/get", taskId=created["taskId"]))["status"] in ("working", "completed")
        with anyio.fail_after(WAIT):
            result = await on_b.request("tasks/result", taskId=created["taskId"])  # waits on B for A's end
        assert result["structuredContent"] == {"steps": 4, "pid": pid_a}
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": created["taskId"]}

        asking = (await on_a.request("tools/call", name="confirm", arguments={}, task={}))["task"]
        with anyio.fail_after(WAIT):  # asked on A, answered over B's tasks/result
            asked, answered = await on_b.result_answering(asking["taskId"], {"go": True})
        assert [question["message"] for question in asked] == [f"Go ahead on {pid_a}?"]
        assert answered["structuredContent"] == {"go": True, "pid": pid_a}


async def test_a_2025_cancel_on_b_answers_the_task_cancelled_after_the_cleanup_on_a(tmp_path, redis):
    """2025-11-25: the receiver must turn the task cancelled before it answers tasks/cancel."""
    async with topology(tmp_path, redis) as (a, b, _url, http):
        pid_a = await pid_of(a, http)
        on_a, on_b = await Legacy(http, a.url).open(), await Legacy(http, b.url).open()
        mark = tmp_path / "legacy.mark"
        held = (await on_a.request("tools/call", name="hold", arguments={"mark": str(mark)}, task={}))["task"]
        answered = await on_b.request("tasks/cancel", taskId=held["taskId"])
        assert await read_mark(mark) == f"cleaned by {pid_a}"
        assert answered["status"] == "cancelled"


async def test_a_killed_worker_leaves_its_running_tasks_failed_on_the_other_within_its_lease(tmp_path, redis):
    async with topology(tmp_path, redis) as (a, b, _url, http):
        pid_b = await pid_of(b, http)
        on_a, on_b = Modern(http, a.url), Modern(http, b.url)
        on_a_ids = [await on_a.start("hold", mark=str(tmp_path / f"a{index}.mark")) for index in range(3)]
        done_on_a = await on_a.start("work", n=0)
        on_b_id = await on_b.start("hold", mark=str(tmp_path / "b.mark"))
        for task_id in on_a_ids:
            await on_b.until(task_id, "working")
        assert (await on_b.until(done_on_a, *FINAL))["status"] == "completed"

        a.signal(signal.SIGKILL)
        assert await a.wait() == -signal.SIGKILL
        killed = time.monotonic()
        for task_id in on_a_ids:
            ended = await on_b.until(task_id, *FINAL, timeout=10 * LEASE + 5)
            assert ended.get("statusMessage") == STOPPED, ended
            # 2026 says "failed" only for protocol errors; a tool's failure is "completed" with isError
            assert ended["status"] == "failed" or ended["result"]["isError"], ended
        lapsed = time.monotonic() - killed
        legacy = await Legacy(http, b.url).open()
        for task_id in on_a_ids:
            seen = await legacy.request("tasks/get", taskId=task_id)
            assert (seen["status"], seen.get("statusMessage")) == ("failed", STOPPED), seen
        assert lapsed < 10 * LEASE  # the contract: about 1.5 x the lease; this bound catches a 10x regression
        print(f"\nSIGKILLed worker's tasks failed on the other after {lapsed:.2f} s (lease {LEASE} s)")

        assert (await on_b.get(done_on_a))["status"] == "completed"  # what had ended keeps its result
        assert (await on_b.get(on_b_id))["status"] == "working"  # the survivor's own task is untouched
        await on_b.cancel(on_b_id)
        assert await read_mark(tmp_path / "b.mark") == f"cleaned by {pid_b}"
        assert not any((tmp_path / f"a{index}.mark").exists() for index in range(3))  # no cleanup ran: SIGKILL


async def test_a_2026_client_reads_in_a_dead_workers_task_result_that_its_worker_stopped(tmp_path, redis):
    """2026-07-28 shows a dead worker's task as ``failed`` with an inlined error (SEP-2663: a protocol-level
    failure): that error must say what happened."""
    async with topology(tmp_path, redis) as (a, b, _url, http):
        on_a, on_b = Modern(http, a.url), Modern(http, b.url)
        task_id = await on_a.start("hold", mark=str(tmp_path / "a.mark"))
        await on_b.until(task_id, "working")
        a.signal(signal.SIGKILL)
        await a.wait()
        ended = await on_b.until(task_id, *FINAL, timeout=10 * LEASE + 5)
        assert ended["status"] == "failed" and "result" not in ended, ended
        assert ended["error"]["code"] == -32603 and ended["error"]["message"] == STOPPED, ended


def serve_until_exit(*options: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``fusion-nb serve task_app --transport http ...`` run to its end (a server that starts serving times out)."""
    argv = [sys.executable, "-m", "fusion_nb", "serve", "task_app", "--transport", "http", "--port", "0", *options]
    return subprocess.run(
        argv, capture_output=True, text=True, env=cli_env(FUSION_NB_TOKEN=TOKEN, **(env or {})), cwd=REPO, timeout=60
    )


@pytest.mark.parametrize("given", ["option", "environment"])
def test_redis_unreachable_at_start_is_one_sentence_naming_the_url_without_its_password_and_exit_1(given):
    port = free_port()  # nothing listens there
    url = f"redis://:hunter2-secret@127.0.0.1:{port}/0"
    if given == "option":
        done = serve_until_exit("--task-store", url)
    else:
        done = serve_until_exit(env={"FUSION_NB_TASK_STORE": url})
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1, done.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "hunter2-secret" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


async def test_redis_stopped_mid_run_plain_calls_answer_and_task_operations_get_one_sentence(tmp_path, redis):
    async with topology(tmp_path, redis) as (a, b, url, http):
        on_a, on_b = Modern(http, a.url), Modern(http, b.url)
        task_id = await on_a.start("work", n=100, delay=0.1)
        await on_b.until(task_id, "working")
        await anyio.to_thread.run_sync(redis.stop)
        for worker in (on_a, on_b, Modern(http, url)):
            with anyio.fail_after(10):  # each answer within a few seconds, never a hang
                echoed = await worker.call("echo", {"text": "still here"}, PLAIN_META)
            assert echoed["structuredContent"]["text"] == "still here"
            with anyio.fail_after(10):
                listed = await worker.request("tools/list", PLAIN_META)
            assert "work" in {tool["name"] for tool in listed["tools"]}
        for server in (a, b):
            with anyio.fail_after(10):
                assert (await server.get("/healthz")).status_code == 200
        for operation in (
            lambda: on_b.get(task_id),
            lambda: on_b.cancel(task_id),
            lambda: on_a.call("work", {"n": 1}),
            lambda: on_b.request("tasks/update", taskId=task_id, inputResponses={"go": {"action": "accept"}}),
        ):
            with anyio.fail_after(10):
                sentence = await refusal(operation)
            print(f"\nRedis away: {sentence}")
            assert "\n" not in sentence and sentence.endswith(".") and len(sentence) < 400, sentence
            assert "redis" in sentence.lower() or "task store" in sentence.lower(), sentence
        assert a.process.returncode is None and b.process.returncode is None

        await anyio.to_thread.run_sync(redis.start)  # back (empty: it kept nothing): new tasks work again
        with anyio.fail_after(WAIT):
            while True:
                with contextlib.suppress(WireError):
                    created = await on_a.call("work", {"n": 1})
                    if created.get("resultType") == "task":  # (until then: an error result, the one sentence)
                        break
                await anyio.sleep(0.2)
        assert (await on_b.until(created["taskId"], *FINAL))["status"] == "completed"


async def refusal(operation) -> str:
    """The one sentence a task operation is refused with: a JSON-RPC error, or an error result of a call."""
    try:
        answered = await operation()
    except WireError as error:
        return error.message
    assert answered.get("isError"), answered
    return answered["content"][0]["text"].split("] ", 1)[-1]


@pytest.mark.timeout(240)
async def test_a_thousand_tasks_across_two_workers_are_all_collected(tmp_path, redis):
    count, clients = 1_000, 16
    async with topology(tmp_path, redis) as (a, b, url, http):
        pids = {await pid_of(a, http), await pid_of(b, http)}
        through = Modern(http, url)
        ids: list[str] = []
        results: dict[str, dict] = {}
        started = time.monotonic()

        async def create(share: int) -> None:
            for _ in range(share):
                ids.append(await through.start("work", n=1, delay=0))

        async with anyio.create_task_group() as group:
            for index in range(clients):
                group.start_soon(create, count // clients + (1 if index < count % clients else 0))
        created = time.monotonic() - started

        async def collect(share: list[str]) -> None:
            for task_id in share:
                results[task_id] = await through.until(task_id, *FINAL)

        async with anyio.create_task_group() as group:
            for index in range(clients):
                group.start_soon(collect, ids[index::clients])
        elapsed = time.monotonic() - started
        print(f"\n{count} tasks across 2 workers: created in {created:.1f} s, all collected after {elapsed:.1f} s")

        assert len(set(ids)) == count and set(results) == set(ids)
        assert all(task["status"] == "completed" for task in results.values())
        assert {pid_in(task["result"]) for task in results.values()} == pids  # both workers ran some
        session = await Legacy(http, b.url).open()
        listed: set[str] = set()
        page = await session.request("tasks/list")
        while True:  # (tasks/list is paged: 100 a page by default)
            listed |= {task["taskId"] for task in page["tasks"]}
            if not page.get("nextCursor"):
                break
            page = await session.request("tasks/list", cursor=page["nextCursor"])
        assert set(ids) <= listed  # none lost: every one is in the store, seen from one worker
        assert elapsed < 150  # ~60 s is the aim on a loaded 2-core box; the bound catches a hang


@pytest.mark.timeout(600)
async def test_workers_on_one_socket_share_the_store(tmp_path, redis):
    options = ("--workers", "2", "--task-store", redis.url, "--task-lease", str(LEASE))
    async with served("task_app", *options, env={"FUSION_NB_TOKEN": TOKEN}, startup_timeout=120) as server:
        await server.wait_for(r"worker \d+ ready", count=2, timeout=120)  # both serve: the polls reach either
        async with httpx.AsyncClient(timeout=httpx.Timeout(WAIT)) as http:
            one_socket = Modern(http, server.url)
            ids = [await one_socket.start("work", n=2, delay=0.05) for _ in range(12)]
            finals = [await one_socket.until(task_id, *FINAL) for task_id in ids]
        assert all(final["status"] == "completed" for final in finals)
        server.signal(signal.SIGTERM)  # the supervisor stops its workers (a SIGKILL would leave them to linger)
        assert await server.wait(timeout=120) == 0


PAGE = REPO / "docs" / "tasks-across-workers.md"


def commands_on_the_page(program: str) -> list[list[str]]:
    """The argv of every line of the page's code blocks that runs ``program`` (a trailing ``&`` dropped)."""
    blocks = re.findall(r"```\n(.*?)```", PAGE.read_text(), re.S)
    lines = [line.removesuffix("&").strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line.replace("$key", "/run/fusion-nb/state.key")) for line in lines if line.startswith(program)]


def test_the_pages_commands_are_the_ones_these_tests_run():
    """docs/tasks-across-workers.md: its serve lines parse with the real CLI, its redis-server is the rig's."""
    from redis_server import RedisServer

    from fusion_nb.cli import build_parser

    served_lines = commands_on_the_page("fusion-nb serve")
    assert len(served_lines) == 3
    for argv in served_lines:
        build_parser().parse_args(argv[1:])  # an option the CLI lacks exits 2 here
    assert any("--task-store" in argv and "--workers" in argv for argv in served_lines)
    (redis_line,) = commands_on_the_page("redis-server")
    rig = RedisServer("redis-server", REPO, port=6379).argv()[1:]
    at = rig.index("--dir")
    assert redis_line[1:] == rig[:at] + rig[at + 2 :]  # the rig's flags but its scratch directory
    help_text = run_cli("serve", "--help").stdout
    assert "FUSION_NB_TASK_STORE" in help_text and "FUSION_NB_TASK_LEASE" in help_text
    for page in (REPO / "docs" / "deploy.md", REPO / "README.md"):
        assert "tasks-across-workers.md" in page.read_text(), page
