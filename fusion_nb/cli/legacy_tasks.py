"""2025-11-25 tasks for a host of ``fusion-nb connect``, served on the upstream's 2026-07-28 tasks extension.

The bridge speaks 2026-07-28 upstream, where a task is the draft's (flat, ``ttlMs``,
``tasks/get`` inlining its result or input requests, ``tasks/update`` for answers, no
``tasks/list``); a VS Code-like host speaks the 2025-11-25 tasks utility. This module
translates one into the other, once, as dicts: ``legacy_task`` maps a draft task to
the 2025 ``Task`` (a failed tool is ``failed``, as fusion-nb's own 2025 wire says, not
the draft's ``completed``), and ``LegacyTasks`` serves ``tasks/get``, ``tasks/result``,
``tasks/list`` and ``tasks/cancel`` over ``upstream``, a callable the bridge gives it
(so this module never reaches into the bridge; the bridge imports it, not the reverse).

It keeps the ids of the tasks it created for its host (a bridge serves one host
connection, its stdio): the draft
has no ``tasks/list``, and an id the host did not get from this bridge is refused in
the server's sentence, as a task of another token is direct.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

from ..engine import CallResult, ToolError
from ..mcp.convert import result_to_wire
from ..mcp.tasks import RELATED_TASK

#: the bridge's upstream request made for a host: ``(ctx, method, params) -> result``
Upstream = Callable[[Any, str, dict[str, Any]], Awaitable[dict[str, Any]]]

FINAL = frozenset({"completed", "failed", "cancelled"})


def legacy_task(task: Mapping[str, Any]) -> dict[str, Any]:
    """The 2025-11-25 ``Task`` of a 2026 draft task (``tasks/get`` answer or ``CreateTaskResult``)."""
    status = task.get("status")
    result = task.get("result")
    if status == "completed" and isinstance(result, dict) and result.get("isError"):
        status = "failed"  # the draft ends a failed tool `completed`; fusion-nb's 2025 wire says `failed`
    wire: dict[str, Any] = {
        "taskId": task.get("taskId"),
        "status": status,
        "createdAt": task.get("createdAt"),
        "lastUpdatedAt": task.get("lastUpdatedAt"),
        "ttl": task.get("ttlMs"),
        "pollInterval": task.get("pollIntervalMs"),
    }
    if task.get("statusMessage"):
        wire["statusMessage"] = task["statusMessage"]
    return wire


def _invalid(message: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message)


def _not_found(method: str, task_id: str) -> MCPError:
    """The server's own sentence for a task this client cannot see."""
    shown = task_id if len(task_id) <= 40 else task_id[:37] + "..."
    return _invalid(
        f'{method}: there is no task "{shown}" for this client '
        "(it never existed, has expired, or belongs to another token)."
    )


def _poll_seconds(task: Mapping[str, Any]) -> float:
    """How long to wait before asking again: the interval the upstream suggests, within sane bounds."""
    interval = task.get("pollIntervalMs")
    if isinstance(interval, bool) or not isinstance(interval, int | float):
        return 1.0
    return min(max(interval / 1000, 0.05), 30.0)


class LegacyTasks:
    """A 2025-11-25 host's ``tasks/*`` on the bridge, each answered from the upstream's draft tasks."""

    #: seconds a ``tasks/cancel`` waits for the upstream task to end cancelled before answering what it is
    CANCEL_WAIT = 5.0

    def __init__(self, upstream: Upstream, output_schemas: Mapping[str, bool]) -> None:
        self.upstream = upstream
        self.output_schemas = output_schemas  # a tool's error result differs when it declares one
        #: the tasks this bridge created for its host, task id -> tool name (one bridge serves one host connection)
        self.created: dict[str, str] = {}

    def started(self, ctx: Any, name: str, answer: dict[str, Any]) -> dict[str, Any]:
        """The upstream's answer to an opted-in call, for the host: ``{"task": ...}``, or the tool's refusal."""
        if answer.get("resultType") != "task":
            return {key: value for key, value in answer.items() if key != "resultType"}  # (bounds, arguments)
        task_id = answer.get("taskId")
        if isinstance(task_id, str):
            self.created[task_id] = name
        return {"task": legacy_task(answer)}

    def _own(self, ctx: Any, method: str, params: Mapping[str, Any]) -> str:
        """The task id of ``params``, one this bridge created for this host, or one sentence."""
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or not task_id or len(task_id) > 200:
            shown = repr(task_id)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise _invalid(f"{method} needs params.taskId, the id string of a task; got {shown}.")
        if task_id not in self.created:
            raise _not_found(method, task_id)
        return task_id

    async def _fetch(self, ctx: Any, task_id: str) -> dict[str, Any]:
        return await self.upstream(ctx, "tasks/get", {"taskId": task_id})

    async def get(self, ctx: Any, params: Mapping[str, Any]) -> dict[str, Any]:
        """``tasks/get``: the upstream's task, as a 2025 ``Task``."""
        return legacy_task(await self._fetch(ctx, self._own(ctx, "tasks/get", params)))

    async def list(self, ctx: Any, params: Mapping[str, Any]) -> dict[str, Any]:
        """``tasks/list``: this host's tasks, each as the upstream has it now (expired ones are forgotten)."""
        mine = self.created
        tasks = []
        for task_id in list(mine):
            try:
                tasks.append(legacy_task(await self._fetch(ctx, task_id)))
            except MCPError as exc:
                if exc.error.code != types.INVALID_PARAMS:
                    raise
                mine.pop(task_id, None)  # expired upstream: gone for the host too
        return {"tasks": tasks}

    async def cancel(self, ctx: Any, params: Mapping[str, Any]) -> dict[str, Any]:
        """``tasks/cancel``: the upstream task aborted (its cleanup runs there); the task once it says cancelled.

        The draft's cancel only acknowledges, so the task is polled for at most
        ``CANCEL_WAIT`` seconds, and the host gets it as it is then. An ended task is
        refused, as fusion-nb's 2025 wire refuses it.
        """
        task_id = self._own(ctx, "tasks/cancel", params)
        task = await self._fetch(ctx, task_id)
        if task.get("status") in FINAL:
            status = legacy_task(task)["status"]
            raise _invalid(f'tasks/cancel: task "{task_id}" has already ended ({status}); it cannot be cancelled.')
        await self.upstream(ctx, "tasks/cancel", {"taskId": task_id})
        with anyio.move_on_after(self.CANCEL_WAIT):
            task = await self._fetch(ctx, task_id)
            while task.get("status") not in FINAL:
                await anyio.sleep(min(_poll_seconds(task), 0.2))
                task = await self._fetch(ctx, task_id)
        return legacy_task(task)

    async def result(self, ctx: Any, params: Mapping[str, Any]) -> dict[str, Any]:
        """``tasks/result``: poll the upstream until the task ends, asking its questions on the host's session.

        Bounded only by the task (and cancelled with the host's request). Each input
        request goes to the host as ``elicitation/create`` tied to the task, and its
        answer upstream with ``tasks/update``; then the call's result, with the
        related-task ``_meta``.
        """
        task_id = self._own(ctx, "tasks/result", params)
        task = await self._fetch(ctx, task_id)
        while task.get("status") not in FINAL:
            requests = task.get("inputRequests")
            if task.get("status") == "input_required" and isinstance(requests, dict) and requests:
                responses = {key: await self._ask(ctx, task_id, request) for key, request in requests.items()}
                try:
                    await self.upstream(ctx, "tasks/update", {"taskId": task_id, "inputResponses": responses})
                except MCPError as exc:
                    if exc.error.code != types.INVALID_PARAMS:
                        raise  # (a refused answer: the task asks again, and so does the host)
            else:
                await anyio.sleep(_poll_seconds(task))
            task = await self._fetch(ctx, task_id)
        result, error = task.get("result"), task.get("error")
        if isinstance(result, dict):
            wire = {key: value for key, value in result.items() if key != "resultType"}
        elif isinstance(error, dict):  # failed (a crash upstream): SEP-2663 inlines the JSON-RPC error
            name = self.created.get(task_id, "")
            failure = CallResult.failure(ToolError("INTERNAL_ERROR", str(error.get("message") or "failed")))
            wire = result_to_wire(failure, has_output_schema=self.output_schemas.get(name, False), modern=False)
        else:  # cancelled: the draft inlines no result; the one fusion-nb's 2025 wire gives
            name = self.created.get(task_id, "")
            failure = CallResult.failure(ToolError("CANCELLED", f'Task "{task_id}" of tool "{name}" has no result.'))
            wire = result_to_wire(failure, has_output_schema=self.output_schemas.get(name, False), modern=False)
        wire["_meta"] = {**(wire.get("_meta") or {}), RELATED_TASK: {"taskId": task_id}}
        return wire

    async def _ask(self, ctx: Any, task_id: str, request: Any) -> dict[str, Any]:
        """One input request put to the host (``elicitation/create`` tied to the task); its answer, for the draft.

        A host that cannot answer (no such mode, its handler failed) declines by
        cancelling, as a direct 2025 client's failure is taken.
        """
        params = dict(request.get("params") or {}) if isinstance(request, dict) else {}
        params["_meta"] = {**(params.get("_meta") or {}), RELATED_TASK: {"taskId": task_id}}
        try:
            if params.get("mode") == "url":
                elicit = types.ElicitRequest(params=types.ElicitRequestURLParams.model_validate(params))
            else:
                elicit = types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate(params))
            answer = await ctx.session.send_request(
                elicit, types.ElicitResult, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
            )
        except (MCPError, ValueError):
            return {"action": "cancel"}
        return answer.model_dump(by_alias=True, mode="json", exclude_none=True)


__all__ = ["LegacyTasks", "legacy_task"]
