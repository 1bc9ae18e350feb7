"""A 2026-07-28 tasks runtime for the SDK's ``mcp.Client``: ``TasksExtension``.

The Python SDK 2.3 has the task types but no client runtime, so a Python host
that wants a long tool to outlive its request timeout needs one; this is it,
built only from the SDK's public extension API (``ClientExtension`` +
``ResultClaim``). It advertises ``io.modelcontextprotocol/tasks`` (draft 07bf500
of modelcontextprotocol/experimental-ext-tasks), claims the ``resultType: "task"``
answer to ``tools/call`` and resolves it by polling ``tasks/get`` at the pace the
server suggests, answering input requests through ``answer`` with ``tasks/update``.
``Client.call_tool`` then returns the final result as if the call had been plain,
however long the job ran; ``cancel`` stops one by id (``created`` lists them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from mcp import types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim

__all__ = ["EXTENSION", "DetailedTask", "TaskCreated", "TasksExtension", "UpdateParams", "UpdateTask"]

EXTENSION = "io.modelcontextprotocol/tasks"


class TaskCreated(types.Result):
    """The draft's flat ``CreateTaskResult``."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class DetailedTask(types.Result):
    """``tasks/get``: the task with its result or input requests inlined."""

    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None
    poll_interval_ms: int | None = None


class UpdateParams(types.RequestParams):
    """``tasks/update`` params: the answers to the task's input requests, by key."""

    task_id: str
    input_responses: dict[str, Any]


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    """``tasks/update``: not among the SDK's request types, which predate the draft."""

    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams


class TasksExtension(ClientExtension):
    """Resolve task answers by polling; ``created`` lists the task ids, ``seen`` every polled status.

    ``answer(key, params)`` answers one of the task's input requests (an elicitation
    answer such as ``{"action": "accept", "content": {...}}``); without it a task
    that asks for input waits until it is cancelled or expires.
    """

    identifier = EXTENSION

    def __init__(self, answer: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None) -> None:
        self.answer = answer
        self.seen: list[str] = []
        self.created: list[str] = []
        self._started = anyio.Event()

    def claims(self) -> list[ResultClaim[Any]]:
        """The one claim: a ``tools/call`` answered with ``resultType: "task"``."""
        return [ResultClaim(result_type="task", model=TaskCreated, resolve=self.resolve)]

    async def started(self) -> str:
        """The id of the first task created through this extension, once there is one."""
        await self._started.wait()
        return self.created[0]

    async def resolve(self, created: TaskCreated, ctx: ClaimContext) -> types.CallToolResult:
        """Poll ``created`` to its end; its final ``CallToolResult`` (an error result if it had none)."""
        self.created.append(created.task_id)
        self._started.set()
        pause = (created.poll_interval_ms or 1000) / 1000
        answered: set[str] = set()
        while True:
            await anyio.sleep(pause)
            request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=created.task_id))
            task = await ctx.session.send_request(request, DetailedTask)
            self.seen.append(task.status)
            if task.status in ("completed", "failed", "cancelled"):
                return types.CallToolResult.model_validate(
                    task.result or {"content": [{"type": "text", "text": task.status}], "isError": True}
                )
            fresh = {key: ask for key, ask in (task.input_requests or {}).items() if key not in answered}
            if fresh and self.answer is not None:
                responses = {key: await self.answer(key, ask["params"]) for key, ask in fresh.items()}
                answered.update(responses)
                params = UpdateParams(task_id=task.task_id, input_responses=responses)
                await ctx.session.send_request(UpdateTask(params=params), types.Result)

    @staticmethod
    async def cancel(session: Any, task_id: str) -> None:
        """``tasks/cancel``: abort the task's call on the server (its cleanup runs); its poll ends ``cancelled``."""
        request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
        await session.send_request(request, types.Result)
