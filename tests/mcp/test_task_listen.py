"""2026 task status on ``subscriptions/listen`` with the SDK's real client (SEP-2663; as in its draft 07bf500).

A client that lists its task ids in a listen request hears ``notifications/tasks`` (the
detailed task, as ``tasks/get`` answers it) once at once and on every change: a job to
``completed`` with its result inlined, a cancel, a question with its input requests
(answered with ``tasks/update``, the task resumes); tool list changes still arrive on the
same stream; another token's and unknown ids are left out of the ack; malformed
``taskIds`` and a missing extension get one sentence; once the stream closes no task is
watched any more. In memory on the stdio code path (both backends) and over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
import pytest
from eras import client_for
from http_serving import serve
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from tasks_app import listen_app
from tasks_client import (
    Tasks,
    UpdateParams,
    UpdateTask,
    listen_request,
    malformed_task_ids_refused,
    missing_extension_refused,
)

from fusion_nb.engine import tasks_of
from fusion_nb.mcp import mcp_server

pytestmark = pytest.mark.anyio


class Acks:
    """A ``message_handler`` that keeps the listen acks and the tool-list changes it sees."""

    def __init__(self) -> None:
        self.acks: list[types.SubscriptionFilter] = []
        self.tools_changed = 0
        self._more = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.SubscriptionsAcknowledgedNotification):
            self.acks.append(message.params.notifications)
        elif isinstance(message, types.ToolListChangedNotification):
            self.tools_changed += 1
        self._more.set()
        self._more = anyio.Event()

    async def until(self, done: Callable[[], bool]) -> None:
        with anyio.fail_after(10):
            while not done():
                await self._more.wait()


def accepted(ack: types.SubscriptionFilter) -> list[str] | None:
    return (ack.model_extra or {}).get("taskIds")


async def start_task(client: Any, group: Any, tasks: Tasks, name: str, arguments: dict) -> str:
    """Call ``name`` as a task in the background (the extension resolves it); its task id."""
    before = len(tasks.created)

    async def call() -> None:
        await client.call_tool(name, arguments)

    group.start_soon(call)
    with anyio.fail_after(10):
        while len(tasks.created) == before:
            await anyio.sleep(0.01)
    return tasks.created[before]


def listen_in(group: Any, client: Any, request: types.SubscriptionsListenRequest) -> None:
    """Open a listen stream in the background: its answer comes only when the stream ends."""

    async def listen() -> None:
        await client.session.send_request(request, types.SubscriptionsListenResult)

    group.start_soon(listen)


async def watched_by_none(server: Any) -> None:
    """Every task watch is undone once the streams have ended (the server unwinds them at once)."""
    with anyio.fail_after(10):
        while server.task_listen.watching:
            await anyio.sleep(0.01)


async def test_a_listening_client_hears_its_task_work_and_complete_and_tool_changes_still_arrive():
    app, tasks, acks = listen_app(), Tasks(), Acks()
    server = mcp_server(app)
    async with client_for(server, "2026-stream", extensions=[tasks], message_handler=acks) as client:
        async with anyio.create_task_group() as group:
            task_id = await start_task(client, group, tasks, "report", {"seconds": 1})

            listen_in(group, client, listen_request([task_id, task_id], toolsListChanged=True))
            await acks.until(lambda: bool(acks.acks))
            assert accepted(acks.acks[0]) == [task_id] and acks.acks[0].tools_list_changed is True
            assert server.task_listen.watching == 1
            with anyio.fail_after(10):
                first = await tasks.hear(task_id, "working")  # the status at once, before any change
                done = await tasks.hear(task_id, "completed")
            assert first.result is None
            assert done.result is not None and done.result["content"][0]["text"] == "report after 1.0 s"
            assert any(heard.status_message == "half 1 of 2" for heard in tasks.heard), tasks.heard
            assert {heard.task_id for heard in tasks.heard} == {task_id}
            app.f.action("late").handle(lambda input, ctx: "late")
            await acks.until(lambda: acks.tools_changed > 0)  # the SDK's list-changed, unchanged, same stream
            assert tasks.seen == [], "heard on the stream: the client's 30 s poll never came"
            group.cancel_scope.cancel()
        await watched_by_none(server)
    await app.aclose()


async def test_a_cancel_is_heard_on_the_stream_and_the_watch_ends_with_the_stream():
    app, tasks, acks = listen_app(), Tasks(), Acks()
    server = mcp_server(app)
    async with client_for(server, "2026-stream", extensions=[tasks], message_handler=acks) as client:
        async with anyio.create_task_group() as group:
            task_id = await start_task(client, group, tasks, "forever", {})

            listen_in(group, client, listen_request([task_id]))
            await acks.until(lambda: bool(acks.acks))
            await tasks.cancel(client.session, task_id)
            with anyio.fail_after(10):
                cancelled = await tasks.hear(task_id, "cancelled")
            assert cancelled.result is None
            assert server.task_listen.watching == 1  # until the stream ends
            assert tasks.seen == [], "heard on the stream: the client's 30 s poll never came"
            group.cancel_scope.cancel()
        await watched_by_none(server)
    await app.aclose()


async def declares_elicitation(context, params):
    raise AssertionError("a task's question is answered through tasks/update, not elicitation/create")


async def test_a_question_is_heard_with_its_input_requests_and_the_answer_resumes_the_task():
    app, tasks = listen_app(), Tasks()
    server = mcp_server(app)
    client = client_for(server, "2026-stream", extensions=[tasks], elicitation_callback=declares_elicitation)
    async with client:
        async with anyio.create_task_group() as group:
            task_id = await start_task(client, group, tasks, "confirm", {})

            listen_in(group, client, listen_request([task_id]))
            with anyio.fail_after(10):
                asked = await tasks.hear(task_id, "input_required")
            assert asked.input_requests is not None
            assert asked.input_requests["go"]["params"]["message"] == "Go ahead?", asked.input_requests
            answer = {"go": {"action": "accept", "content": {"go": True}}}
            await client.session.send_request(
                UpdateTask(params=UpdateParams(task_id=task_id, input_responses=answer)), types.Result
            )
            with anyio.fail_after(10):
                done = await tasks.hear(task_id, "completed")
            assert done.result is not None and done.result["content"][0]["text"] == "go=True"
            group.cancel_scope.cancel()
        await watched_by_none(server)
    await app.aclose()


async def test_malformed_task_ids_and_a_missing_extension_get_one_sentence_each():
    app = listen_app()
    async with (
        client_for(mcp_server(app), "2026-stream", extensions=[Tasks()]) as client,
        client_for(mcp_server(app), "2026-stream") as plain,
    ):
        await malformed_task_ids_refused(client.session)
        await missing_extension_refused(plain.session)
    await app.aclose()


async def test_the_sdks_own_refusal_reaches_the_client_unchanged_and_nothing_stays_watched():
    app = listen_app()
    server = mcp_server(app)
    server.task_listen.core = ListenHandler(InMemorySubscriptionBus(), max_subscriptions=0)
    task = tasks_of(app).create(None, "forever", {})
    async with client_for(server, "2026-stream", extensions=[Tasks()]) as client:
        with pytest.raises(MCPError) as refused, anyio.fail_after(10):
            await client.session.send_request(listen_request([task.id]), types.SubscriptionsListenResult)
    assert refused.value.error.message == "Subscription limit reached"
    assert server.task_listen.watching == 0
    tasks_of(app).cancel(None, task.id)
    await app.aclose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn serves on asyncio
async def test_over_http_only_the_clients_own_task_ids_are_accepted():
    app = listen_app()
    tokens = {"alice": "a" * 32, "bob": "b" * 32}
    alices = tasks_of(app).create("alice", "forever", {})
    tasks, acks = Tasks(), Acks()
    async with (
        serve(app, tokens=tokens) as served,
        served.client("auto", token=tokens["bob"], extensions=[tasks], message_handler=acks) as bob,
    ):
        async with anyio.create_task_group() as group:
            bobs = await start_task(bob, group, tasks, "report", {"seconds": 1})

            listen_in(group, bob, listen_request([alices.id, "no-such-task", bobs]))
            await acks.until(lambda: bool(acks.acks))
            assert accepted(acks.acks[0]) == [bobs]
            tasks_of(app).cancel("alice", alices.id)  # alice's change first: bob never hears of it
            with anyio.fail_after(10):
                done = await tasks.hear(bobs, "completed")
            assert done.result is not None and done.result["content"][0]["text"] == "report after 1.0 s"
            assert {heard.task_id for heard in tasks.heard} == {bobs}
            assert tasks.seen == [], "heard on the stream: the client's 30 s poll never came"
            group.cancel_scope.cancel()
        await watched_by_none(served.asgi.server)
        async with anyio.create_task_group() as group:  # none accepted: the ack leaves taskIds out
            listen_in(group, bob, listen_request([alices.id]))
            await acks.until(lambda: len(acks.acks) == 2)
            assert accepted(acks.acks[1]) is None and served.asgi.server.task_listen.watching == 0
            group.cancel_scope.cancel()
    await app.aclose()
