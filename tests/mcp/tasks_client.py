"""A 2026-07-28 tasks client built only from the SDK's public extension API (``ClientExtension`` + ``ResultClaim``).

The SDK 2.3 has no tasks runtime; this is what a host writes to get one: it
advertises ``io.modelcontextprotocol/tasks``, claims the ``resultType: "task"``
answer to ``tools/call`` and resolves it by polling ``tasks/get`` at the pace the
server suggests, answering input requests through ``answer`` with ``tasks/update``.
``Client.call_tool`` then returns the final result as if the call had been plain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from mcp import types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim

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
    task_id: str
    input_responses: dict[str, Any]


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams


class Tasks(ClientExtension):
    """Resolve task answers by polling; ``seen`` records every polled status."""

    identifier = EXTENSION

    def __init__(self, answer: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None) -> None:
        self.answer = answer
        self.seen: list[str] = []
        self.created: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskCreated, resolve=self.resolve)]

    async def resolve(self, created: TaskCreated, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created.task_id)
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
