"""A 2026-07-28 tasks runtime for the SDK's ``mcp.Client``: ``TasksExtension``.

The Python SDK 2.3 has the task types but no client runtime, so a Python host
that wants a long tool to outlive its request timeout needs one; this is it,
built only from the SDK's public extension API (``ClientExtension`` +
``ResultClaim``). It advertises ``io.modelcontextprotocol/tasks`` (SEP-2663, as
``fusion_nb.mcp.tasks.SPEC_PIN`` says), claims the ``resultType: "task"``
answer to ``tools/call`` and resolves it by polling ``tasks/get`` at the pace the
server suggests, answering input requests through ``answer`` with ``tasks/update``.
``Client.call_tool`` then returns the final result as if the call had been plain,
however long the job ran; ``cancel`` stops one by id (``created`` lists them).

A host that would rather hear than poll opens a listen stream for its tasks with
``listen_request(task_ids)`` (the SDK's ``Client.listen`` has no ``taskIds``); the
extension's binding collects the ``notifications/tasks`` that arrive on it in ``heard``,
and ``hear(task_id, status)`` waits for one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from mcp import types
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim

__all__ = [
    "EXTENSION",
    "DetailedTask",
    "TaskCreated",
    "TasksExtension",
    "UpdateParams",
    "UpdateTask",
    "listen_request",
]

EXTENSION = "io.modelcontextprotocol/tasks"


class TaskCreated(types.Result):
    """The draft's flat ``CreateTaskResult``."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class DetailedTask(types.Result):
    """``tasks/get``: the task with its result or input requests inlined (``notifications/tasks`` params too)."""

    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None
    poll_interval_ms: int | None = None


def listen_request(task_ids: list[str], **core: Any) -> types.SubscriptionsListenRequest:
    """A ``subscriptions/listen`` request for the status of ``task_ids`` (``core``: e.g. ``toolsListChanged=True``).

    Send it with ``session.send_request`` from a task of its own: its answer comes only when the
    stream ends, and cancelling that task closes the stream.
    """
    notifications = types.SubscriptionFilter.model_validate({**core, "taskIds": task_ids})
    return types.SubscriptionsListenRequest(params=types.SubscriptionsListenRequestParams(notifications=notifications))


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
        self.heard: list[DetailedTask] = []
        self._started = anyio.Event()
        self._heard_more = anyio.Event()

    def claims(self) -> list[ResultClaim[Any]]:
        """The one claim: a ``tools/call`` answered with ``resultType: "task"``."""
        return [ResultClaim(result_type="task", model=TaskCreated, resolve=self.resolve)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        """The one binding: ``notifications/tasks`` from a listen stream, kept in ``heard``."""
        return [NotificationBinding(method="notifications/tasks", params_type=DetailedTask, handler=self._heard)]

    async def _heard(self, task: DetailedTask) -> None:
        self.heard.append(task)
        self._heard_more.set()
        self._heard_more = anyio.Event()

    async def hear(self, task_id: str, status: str) -> DetailedTask:
        """The first notification heard that says task ``task_id`` is ``status``, once there is one."""
        while True:
            arrived = self._heard_more
            for task in self.heard:
                if task.task_id == task_id and task.status == status:
                    return task
            await arrived.wait()

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
                if task.result is not None:
                    return types.CallToolResult.model_validate(task.result)
                said = (task.error or {}).get("message") or task.status  # (failed: the inlined JSON-RPC error)
                return types.CallToolResult(content=[types.TextContent(text=str(said))], is_error=True)
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
