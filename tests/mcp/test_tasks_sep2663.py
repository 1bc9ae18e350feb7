"""The 2026 tasks extension as SEP-2663 reads it now (issue #46), with the SDK's real client.

A request without the extension gets ``-32021`` naming it (a required task tool, and
``tasks/get``, ``update``, ``cancel``); ``tasks/list`` and ``tasks/result`` do not exist
on 2026 (``-32601``); ``Mcp-Name`` must name the task; ``tasks/update`` acknowledges
what the task does not wait on; a crashed handler ends ``failed`` with an inlined
error; a required interactive tool asks its first question before its task exists;
``require_input.all`` parks a task on several input requests answered one by one.
"""

from __future__ import annotations

import json

import anyio
import httpx2
import pytest
from eras import client_for
from http_serving import http_client, serve
from mcp import types
from mcp.shared.exceptions import MCPError
from raw_peer import raw_peer
from tasks_client import EXTENSION, DetailedTask, Tasks, UpdateParams, UpdateTask

from fusion_nb import Fusion, ToolError, ask, read_input, require_input
from fusion_nb.engine import InputResponse, Task, TaskRecord, tasks_of
from fusion_nb.mcp import mcp_server
from fusion_nb.mcp.http import SINGLE_TOKEN_CLIENT

pytestmark = pytest.mark.anyio

NEEDS: dict[str, object] = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


def sep_app() -> Fusion:
    app = Fusion("tasks-sep2663")

    @app.f.action("batch").task("required").handle
    async def batch(input, ctx):
        return "batch"

    @app.f.action("wait").task(poll_interval=0.05).handle
    async def wait(input, ctx):
        await anyio.sleep_forever()

    @app.f.action("crash").task(poll_interval=0.05).handle
    async def crash(input, ctx):
        raise RuntimeError("a bug")

    @app.f.action("refuse").task(poll_interval=0.05).handle
    async def refuse(input, ctx):
        raise ToolError("NOT_TODAY", "Refused on purpose.")

    @app.f.action("confirm").interactive().task(poll_interval=0.05).handle
    async def confirm(input, ctx):
        go = read_input("go")
        return f"go={go}" if go is not None else require_input.elicit("Go ahead?", {"go": ask.boolean("Proceed")})

    @app.f.action("both").interactive().task(poll_interval=0.05).handle
    async def both(input, ctx):
        if read_input("name") is None:
            return require_input.all(
                require_input.elicit("Your name?", {"name": ask.string("Name")}, key="name"),
                require_input.elicit("Go ahead?", {"go": ask.boolean("Proceed")}, key="go"),
            )
        return f"{read_input('name')} go={read_input('go')}"

    @app.f.action("named").interactive().task("required", poll_interval=0.05).handle
    async def named(input, ctx):
        name = read_input("name")
        return f"Hello, {name}!" if name is not None else require_input.elicit("Name?", {"name": ask.string("Name")})

    return app


async def declares_elicitation(context, params):
    """Declares the elicitation capability (a task's questions are answered with ``tasks/update``)."""
    raise AssertionError("a task's question is answered through tasks/update, not elicitation/create")


async def get(session, task_id: str) -> DetailedTask:
    return await session.send_request(
        types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), DetailedTask
    )


class Ack(types.Result):
    """An acknowledgement, with the ``resultType`` the SDK's plain ``Result`` does not keep."""

    result_type: str | None = None


async def update(session, task_id: str, responses: dict) -> Ack:
    return await session.send_request(UpdateTask(params=UpdateParams(task_id=task_id, input_responses=responses)), Ack)


async def until(session, task_id: str, status: str) -> DetailedTask:
    with anyio.fail_after(10):
        while (task := await get(session, task_id)).status != status:
            await anyio.sleep(0.02)
    return task


async def test_requests_without_the_extension_get_32021_naming_it():
    app = sep_app()
    task = tasks_of(app).create(None, "wait", {})
    async with client_for(mcp_server(app), "2026-stream") as plain:
        with pytest.raises(MCPError) as required:
            await plain.call_tool("batch", {})
        assert required.value.error.code == -32021 and required.value.error.data == NEEDS
        assert required.value.error.message == (
            f'Tool "batch" runs only as a task, and this request did not declare the {EXTENSION} '
            "extension in its client capabilities."
        )
        for method, request in (
            ("tasks/get", types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.id))),
            ("tasks/update", UpdateTask(params=UpdateParams(task_id=task.id, input_responses={}))),
            ("tasks/cancel", types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task.id))),
        ):
            with pytest.raises(MCPError) as refused:
                await plain.session.send_request(request, types.Result)
            assert refused.value.error.code == -32021 and refused.value.error.data == NEEDS
            assert (
                refused.value.error.message
                == f"{method} needs the {EXTENSION} extension in this request's client capabilities."
            )
    assert task.status == "working"  # (the refused cancel touched nothing)
    tasks_of(app).cancel(None, task.id)
    await app.aclose()


async def test_tasks_list_and_tasks_result_do_not_exist_on_2026():
    app, tasks = sep_app(), Tasks()
    task = tasks_of(app).create(None, "wait", {})
    async with client_for(mcp_server(app), "2026-stream", extensions=[tasks]) as client:
        for request in (
            types.ListTasksRequest(params=types.PaginatedRequestParams()),
            types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task.id)),
        ):
            with pytest.raises(MCPError) as missing:
                await client.session.send_request(request, types.Result)
            assert missing.value.error.code == -32601
            assert f"{request.method} does not exist in 2026-07-28" in missing.value.error.message
    tasks_of(app).cancel(None, task.id)
    await app.aclose()


async def test_tasks_update_acknowledges_empty_and_unknown_answers_and_refuses_a_malformed_one():
    app, tasks = sep_app(), Tasks()
    async with (
        client_for(
            mcp_server(app), "2026-stream", extensions=[tasks], elicitation_callback=declares_elicitation
        ) as client,
        anyio.create_task_group() as group,
    ):
        group.start_soon(client.call_tool, "confirm", {})
        task_id = await tasks.started()
        await until(client.session, task_id, "input_required")
        for responses in ({}, {"unknown-key": {"ignored": True}}):
            acknowledged = (await update(client.session, task_id, responses)).model_dump(by_alias=True)
            assert acknowledged["resultType"] == "complete" and set(acknowledged) <= {"resultType", "_meta"}
            still = await get(client.session, task_id)
            assert still.status == "input_required" and list(still.input_requests or {}) == ["go"]
        with pytest.raises(MCPError) as malformed:
            await update(client.session, task_id, {"go": {"action": "maybe"}})
        assert malformed.value.error.code == types.INVALID_PARAMS
        assert 'tasks/update: inputResponses["go"] must be an elicitation answer' in malformed.value.error.message
        await update(client.session, task_id, {"go": {"action": "accept", "content": {"go": True}}})
        done = await until(client.session, task_id, "completed")
    assert done.result is not None and done.result["content"][0]["text"] == "go=True"
    await app.aclose()


async def test_a_crashed_handler_ends_failed_with_an_inlined_error_and_a_tool_error_completed():
    app, tasks = sep_app(), Tasks()
    async with client_for(mcp_server(app), "2026-stream", extensions=[tasks]) as client:
        crashed = await client.call_tool("crash", {})
        refused = await client.call_tool("refuse", {})
        first, second = tasks.created
        failed, completed = await get(client.session, first), await get(client.session, second)
    assert failed.status == "failed" and failed.result is None and failed.error is not None
    assert failed.error["code"] == types.INTERNAL_ERROR
    assert failed.error["message"].startswith('Tool "crash" failed with RuntimeError (error id ')
    assert "a bug" not in str(failed.error)  # (the traceback and the message stay in the server's log)
    assert crashed.is_error and crashed.content[0].text == failed.error["message"]
    assert completed.status == "completed" and completed.error is None
    assert completed.result is not None and completed.result["isError"] is True
    assert refused.is_error and refused.content[0].text == "[NOT_TODAY] Refused on purpose."
    await app.aclose()


async def test_a_required_interactive_tool_asks_before_its_task_exists_then_creates_it():
    app, asked = sep_app(), []

    async def person(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Alice"})

    tasks = Tasks()
    async with client_for(mcp_server(app), "2026-stream", extensions=[tasks], elicitation_callback=person) as client:
        with anyio.fail_after(20):  # (a task created at once would wait on its question: no answer comes)
            answer = await client.call_tool("named", {})
    assert answer.content[0].text == "Hello, Alice!"
    assert asked == ["Name?"]  # the first round: an InputRequiredResult, answered by the SDK's MRTR driver
    assert len(tasks.created) == 1 and "input_required" not in tasks.seen  # the task ran with the answer
    await app.aclose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn serves on asyncio
async def test_the_round_before_a_task_carries_sealed_request_state_over_http():
    app, asked, tasks = sep_app(), [], Tasks()

    async def person(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Bob"})

    async with serve(app) as served, served.client("auto", extensions=[tasks], elicitation_callback=person) as client:
        with anyio.fail_after(20):
            answer = await client.call_tool("named", {})
    assert answer.content[0].text == "Hello, Bob!" and asked == ["Name?"] and len(tasks.created) == 1
    await app.aclose()


async def test_several_input_requests_park_a_task_together_and_are_answered_one_by_one():
    app, tasks = sep_app(), Tasks()
    async with (
        client_for(
            mcp_server(app), "2026-stream", extensions=[tasks], elicitation_callback=declares_elicitation
        ) as client,
        anyio.create_task_group() as group,
    ):
        group.start_soon(client.call_tool, "both", {})
        task_id = await tasks.started()
        parked = await until(client.session, task_id, "input_required")
        assert list(parked.input_requests or {}) == ["name", "go"]
        # (as the conformance suite does, the answer carries both forms' fields: a key its form lacks is dropped)
        both = {"name": "Ada", "go": False}
        await update(client.session, task_id, {"name": {"action": "accept", "content": both}})
        left = await get(client.session, task_id)
        assert left.status == "input_required" and list(left.input_requests or {}) == ["go"]
        await update(client.session, task_id, {"go": {"action": "accept", "content": {"go": True}}})
        done = await until(client.session, task_id, "completed")
    assert done.result is not None and done.result["content"][0]["text"] == "Ada go=True"
    await app.aclose()


async def test_several_input_requests_are_asked_one_after_the_other_on_2025():
    app, asked = sep_app(), []

    def person(method, params):
        asked.append(params["message"])
        return {"action": "accept", "content": {"name": "Ada"} if "name" in params["message"] else {"go": True}}

    async with raw_peer(mcp_server(app), person, elicitation={"form": {}}) as peer:
        created = await peer.request("tools/call", {"name": "both", "arguments": {}, "task": {"ttl": 60_000}})
        final = await peer.request("tasks/result", {"taskId": created["task"]["taskId"]})
    assert asked == ["Your name?", "Go ahead?"] and final["content"] == [{"type": "text", "text": "Ada go=True"}]
    await app.aclose()


async def test_a_shared_record_keeps_the_parts_and_the_answers_of_a_question():
    app = sep_app()
    task = tasks_of(app).create(None, "both", {})
    with anyio.fail_after(10):
        while task.status != "input_required":
            await task.wait_change()
    answer = InputResponse("accept", {"name": "Ada"})
    assert tasks_of(app).answer(None, task.id, "name", answer) is None  # one part of two answered
    record = TaskRecord.from_json(TaskRecord.of(task, "w1").to_json())
    copy = Task.copy_of(record, lambda task: anyio.sleep(0))  # (another worker's view of it)
    assert [request.key for request in copy.pending] == ["go"] and copy.status == "input_required"
    tasks_of(app).cancel(None, task.id)
    await app.aclose()


def answer(response: httpx2.Response) -> dict:
    """The JSON-RPC message of a POST's answer, a JSON body or an SSE stream's data line."""
    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn serves on asyncio
async def test_mcp_name_must_name_the_task_over_http():
    app = sep_app()
    task = tasks_of(app).create(SINGLE_TOKEN_CLIENT, "wait", {})  # (the owner the served token is)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}},
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"taskId": task.id, "_meta": meta}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tasks/get",
    }
    async with serve(app) as served, http_client(served.token) as http:
        wrong = await http.post(served.url, json=body, headers={**headers, "Mcp-Name": "another-task"})
        right = await http.post(served.url, json=body, headers={**headers, "Mcp-Name": task.id})
        absent = await http.post(served.url, json=body, headers=headers)
    refusal = answer(wrong)["error"]
    assert (wrong.status_code, refusal["code"]) == (400, -32020)
    assert refusal["message"] == "mcp-name header does not match tasks/get's taskId"
    assert answer(right)["result"]["taskId"] == task.id and answer(absent)["result"]["taskId"] == task.id
    tasks_of(app).cancel(SINGLE_TOKEN_CLIENT, task.id)
    await app.aclose()
