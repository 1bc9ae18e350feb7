"""The 2026-07-28 tasks extension with the SDK's real client and a tasks ``ClientExtension`` (``tasks_client``).

A 4 s job through a client whose every request times out after 2 s completes (in
memory and over HTTP); without the extension the same call times out; a task that
asks for input goes ``input_required``, inlines its request in ``tasks/get`` and
resumes when ``tasks/update`` answers; bad ids and wrong answers get one sentence.
"""

from __future__ import annotations

import anyio
import pytest
from eras import client_for
from http_serving import serve
from mcp import types
from mcp.shared.exceptions import MCPError
from tasks_client import EXTENSION, DetailedTask, Tasks, UpdateParams, UpdateTask

from fusion_nb import Fusion, ask, read_input, require_input
from fusion_nb.mcp import mcp_server

pytestmark = pytest.mark.anyio


async def declares_elicitation(context, params):
    """Declares the elicitation capability (the task's questions come through ``Tasks.answer``)."""
    raise AssertionError("a task's question is answered through tasks/update, not elicitation/create")


def job_app() -> Fusion:
    app = Fusion("tasks-2026", grace=2.0)

    @app.f.action("report").with_number("seconds").task(poll_interval=0.2).handle
    async def report(input, ctx):
        await anyio.sleep(input.seconds)  # the job itself: minutes in life, seconds here
        return f"report after {input.seconds} s"

    @app.f.action("batch").task("required").handle
    async def batch(input, ctx):
        return "batch"

    @app.f.action("confirm").task(poll_interval=0.05).handle
    async def confirm(input, ctx):
        go = read_input("go")
        return f"go={go}" if go is not None else require_input.elicit("Go ahead?", {"go": ask.boolean("Proceed")})

    return app


async def test_a_4_s_job_completes_through_a_client_that_times_out_after_2_s_in_memory():
    app, tasks = job_app(), Tasks()
    async with client_for(mcp_server(app), "2026-stream", extensions=[tasks], read_timeout_seconds=2) as client:
        answer = await client.call_tool("report", {"seconds": 4})
    assert answer.content[0].text == "report after 4.0 s"
    assert tasks.seen[-1] == "completed" and "working" in tasks.seen
    await app.aclose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn serves on asyncio
async def test_a_4_s_job_completes_over_http_and_fails_without_the_extension():
    app, tasks = job_app(), Tasks()
    async with serve(app) as served:
        async with served.client("auto", extensions=[tasks], read_timeout_seconds=2) as client:
            answer = await client.call_tool("report", {"seconds": 4})
        assert answer.content[0].text == "report after 4.0 s"
        async with served.client("auto", read_timeout_seconds=2) as plain:
            with pytest.raises(MCPError, match=r"[Tt]imed out"):
                await plain.call_tool("report", {"seconds": 4})
            with pytest.raises(MCPError) as missing:
                await plain.call_tool("batch", {})
        assert missing.value.error.code == -32021  # SEP-2575's MissingRequiredClientCapability
        assert missing.value.error.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
        assert missing.value.error.message == (
            f'Tool "batch" runs only as a task, and this request did not declare the {EXTENSION} '
            "extension in its client capabilities."
        )
    await app.aclose()


async def test_input_during_a_task_is_inlined_and_answered_with_tasks_update():
    app, asked = job_app(), []

    async def person(key, params):
        asked.append((key, params["message"]))
        return {"action": "accept", "content": {"go": True}}

    tasks = Tasks(person)
    async with client_for(
        mcp_server(app), "2026-stream", extensions=[tasks], elicitation_callback=declares_elicitation
    ) as client:
        answer = await client.call_tool("confirm", {})
    assert answer.content[0].text == "go=True"
    assert asked == [("go", "Go ahead?")] and "input_required" in tasks.seen
    await app.aclose()


async def test_bad_task_requests_get_one_sentence_each():
    app = job_app()

    async def never(key, params):
        await anyio.sleep_forever()

    tasks = Tasks(never)
    async with client_for(
        mcp_server(app), "2026-stream", extensions=[tasks], elicitation_callback=declares_elicitation
    ) as client:
        with pytest.raises(MCPError) as unknown:
            await client.session.send_request(
                types.GetTaskRequest(params=types.GetTaskRequestParams(task_id="nope")), DetailedTask
            )
        assert unknown.value.error.message == (
            'tasks/get: there is no task "nope" for this client '
            "(it never existed, has expired, or belongs to another token)."
        )
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "confirm", {})
            while not tasks.created:
                await anyio.sleep(0.01)
            task_id = tasks.created[0]
            # SEP-2663: an answer to a request the task does not wait on is acknowledged, and ignored
            params = UpdateParams(task_id=task_id, input_responses={"other": {"action": "accept", "content": {}}})
            await client.session.send_request(UpdateTask(params=params), types.Result)
            with pytest.raises(MCPError) as wrong:
                params = UpdateParams(task_id=task_id, input_responses={"go": {"action": "maybe"}})
                await client.session.send_request(UpdateTask(params=params), types.Result)
            assert 'tasks/update: inputResponses["go"] must be an elicitation answer' in wrong.value.error.message
            cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
            assert (await client.session.send_request(cancel, types.Result)).model_dump() is not None
    assert tasks.seen[-1] == "cancelled"
    await app.aclose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn serves on asyncio
async def test_another_token_cannot_get_update_or_cancel_a_task_over_http():
    from fusion_nb.engine import tasks_of

    app = job_app()
    tokens = {"alice": "a" * 32, "bob": "b" * 32}
    task = tasks_of(app).create("alice", "report", {"seconds": 30})
    extension = Tasks()  # (bob declares the extension: without it he hears -32021 before any lookup)
    async with (
        serve(app, tokens=tokens) as served,
        served.client("auto", token=tokens["bob"], extensions=[extension]) as bob,
    ):
        for request in (
            types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.id)),
            UpdateTask(params=UpdateParams(task_id=task.id, input_responses={"go": {"action": "accept"}})),
            types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task.id)),
        ):
            with pytest.raises(MCPError) as refused:
                await bob.session.send_request(request, types.Result)
            assert f'there is no task "{task.id}" for this client' in refused.value.error.message
        assert task.status == "working"
    tasks_of(app).cancel("alice", task.id)
    await app.aclose()


async def test_the_library_extension_cancels_a_task_by_id_and_its_cleanup_runs():
    app, tasks, cleaned = Fusion("tasks-cancel"), Tasks(), anyio.Event()

    @app.f.action("forever").task(poll_interval=0.05).handle
    async def forever(input, ctx):
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.set()

    outcome: list[types.CallToolResult] = []
    async with client_for(mcp_server(app), "2026-stream", extensions=[tasks]) as client:
        async with anyio.create_task_group() as group:

            async def run() -> None:
                outcome.append(await client.call_tool("forever", {}))

            group.start_soon(run)
            task_id = await tasks.started()
            await tasks.cancel(client.session, task_id)
        with anyio.fail_after(1):
            await cleaned.wait()
    assert outcome[0].is_error and tasks.seen[-1] == "cancelled"
    await app.aclose()
