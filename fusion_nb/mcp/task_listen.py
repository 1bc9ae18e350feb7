"""2026 task status on ``subscriptions/listen`` (SEP-2663's "Task Status Notifications", as in its draft ``07bf500``).

A 2026 client that wants to hear about its tasks instead of (or besides) polling
``tasks/get`` lists them in its listen request, next to the core filter::

    {"method": "subscriptions/listen",
     "params": {"notifications": {"toolsListChanged": true, "taskIds": ["..."]}}}

and the server, as the draft says:

* echoes in ``notifications/subscriptions/acknowledged`` the task ids it agreed to
  send status for ("if any": the key is left out when none was accepted). Only the
  listening client's own tasks are accepted; an unknown id and another token's id are
  left out alike, so the echo never tells one caller that another's task exists (the
  draft's "cross-caller correlation" concern);
* answers ``-32003`` (missing required client capability) when the request's client
  capabilities lack the tasks extension;
* sends ``notifications/tasks`` carrying the complete detailed task, "identical to
  what ``tasks/get`` would have returned at that moment", on every change, stamped
  with the stream's subscription id like every frame of the stream.

The draft does not ask for the current status at once, but it lets a client stop
polling ("need not do so"), and a task may end between its ``CreateTaskResult`` and
the ack: so each accepted task's status is sent once right after the ack (a status
push, which the draft allows at any time), then on every change. A task that has
ended is sent that once and no longer watched.

Everything else is the SDK's ``ListenHandler``, unchanged: this handler wraps it,
adds the accepted ids to the ack it sends, and pumps task changes onto the same
stream until the stream ends (the client closes it, the connection drops, or the
server closes it gracefully), when every ``Task.watch`` is undone.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, Literal, cast

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY, ListenHandler
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

from ..engine import Task, Tasks, ToolError
from .tasks import EXTENSION, detailed_task, needs_extension, opted_in, owner_of, store_errors

MAX_TASK_IDS = 100
"""The most task ids one listen request may name (the per-owner task bound is 100 as well)."""


class TaskStatusParams(types.NotificationParams):
    """The detailed task as notification params (its fields, already wire-named, kept as they are)."""

    model_config = ConfigDict(extra="allow")


class TaskStatusNotification(types.Notification[TaskStatusParams, Literal["notifications/tasks"]]):
    """The draft's ``notifications/tasks``: params are the detailed task (and the stream's ``_meta``)."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: TaskStatusParams


def requested_task_ids(notifications: types.SubscriptionFilter, limit: int = MAX_TASK_IDS) -> list[str] | None:
    """The task ids a listen filter names, deduplicated in order (``None``: it names none). Raises one sentence."""
    extra = notifications.model_extra or {}
    if "taskIds" not in extra:
        return None
    ids = extra["taskIds"]
    if not isinstance(ids, list) or not all(isinstance(task_id, str) and task_id for task_id in ids):
        shown = repr(ids)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise MCPError(
            code=types.INVALID_PARAMS,
            message="subscriptions/listen: params.notifications.taskIds must be a list of task id strings; "
            f"got {shown}.",
        )
    unique = list(dict.fromkeys(ids))
    if len(unique) > limit:
        raise MCPError(
            code=types.INVALID_PARAMS,
            message=f"subscriptions/listen: params.notifications.taskIds names {len(unique)} tasks; "
            f"one stream listens to at most {limit} (open another stream for the rest).",
        )
    return unique


class TaskListenHandler:
    """``subscriptions/listen`` with task status: the SDK's ``ListenHandler`` plus ``taskIds``.

    ``watching`` counts the ``Task.watch`` subscriptions open streams hold (zero once
    every stream has ended: nothing outlives its stream).
    """

    def __init__(self, core: ListenHandler, tasks: Tasks, *, max_task_ids: int = MAX_TASK_IDS) -> None:
        self.core = core
        self.tasks = tasks
        self.max_task_ids = max_task_ids
        self.watching = 0

    def close(self) -> None:
        """End every open listen stream gracefully (the SDK's ``ListenHandler.close``)."""
        self.core.close()

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """Serve one listen stream; with ``taskIds``, the accepted tasks' status travels on it too."""
        requested = requested_task_ids(params.notifications, self.max_task_ids)
        if requested is None or ctx.request_id is None:
            return await self.core(ctx, params)  # (no request id: the SDK's handler refuses it)
        if requested and not opted_in(ctx):
            raise needs_extension(
                f"subscriptions/listen: notifications.taskIds needs the {EXTENSION} extension "
                "in this request's client capabilities."
            )
        watched = await self._owned(owner_of(ctx), requested)
        stream = TaskStatusStream(
            ctx.session,
            ctx.request_id,
            [task.id for task in watched],
            lambda task: detailed_task(task, self.tasks),
            before_send=self.tasks.published,
        )
        # watched before the SDK's handler subscribes and acks, so no change between the two is lost
        unwatch = [task.watch(lambda task: stream.changed(task.id, task)) for task in watched if not task.final]
        self.watching += len(unwatch)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(stream.pump, {task.id: task for task in watched})
                for task in watched:
                    if task.remote and not task.final:  # another worker runs it: follow its copy
                        group.start_soon(_follow, task)
                result = await self.core(dataclasses.replace(ctx, session=cast("Any", stream)), params)
                group.cancel_scope.cancel()
        except BaseExceptionGroup as failed:  # the SDK's refusal (e.g. its stream limit) reaches the client as sent
            raise failed.exceptions[0] if len(failed.exceptions) == 1 else failed from None
        finally:
            for undo in unwatch:
                undo()
            self.watching -= len(unwatch)
        return result

    async def _owned(self, owner: Hashable, task_ids: Sequence[str]) -> list[Task]:
        """The tasks among ``task_ids`` that ``owner`` owns, on any worker (the one place tasks are looked up here)."""
        found = []
        with store_errors():
            for task_id in task_ids:
                task = await self.tasks.find(owner, task_id)
                if task is not None:
                    found.append(task)
        return found


async def _follow(task: Task) -> None:
    """Keep a copy of another worker's task current (each refresh reaches its ``watch`` listeners)."""
    with contextlib.suppress(ToolError):  # the store went away: the stream keeps what it last sent
        while not task.final:
            await task.wait_change()


class TaskStatusStream:
    """One listen stream's session as the SDK's ``ListenHandler`` sees it, and the pump of its task statuses.

    The SDK's handler sends the ack through ``send_notification``; the ``accepted``
    task ids are added to it there (set them any time before the ack: the bridge
    learns them from its upstream's ack), and the pump starts only once it is out
    (the ack is the stream's first frame). ``changed(task_id, state)`` queues a status
    and ``detailed(state)`` renders it when it is sent, so a burst sends its latest
    state once. Every other attribute is the real session's. Shared by the server's
    handler (``state``: an engine ``Task``) and ``fusion-nb connect`` (``state``: the
    upstream's ``notifications/tasks`` params), so both send the same frames.
    ``before_send(state)``, awaited before each frame, lets the server push a status only
    once every worker would answer it (``Tasks.published``).
    """

    def __init__(
        self,
        session: Any,
        subscription_id: types.RequestId,
        accepted: list[str],
        detailed: Callable[[Any], Mapping[str, Any]],
        *,
        before_send: Callable[[Any], Awaitable[None]] | None = None,
    ) -> None:
        self.session = session
        self.before_send = before_send
        self.subscription_id = subscription_id
        self.accepted = accepted
        self.detailed = detailed
        self.acked = anyio.Event()
        self._dirty: dict[str, Any] = {}
        self._wake = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    async def send_notification(self, notification: Any, related_request_id: types.RequestId | None = None) -> None:
        """The real session's, with the accepted ``taskIds`` in the ack."""
        if isinstance(notification, types.SubscriptionsAcknowledgedNotification):
            if self.accepted:
                honored = notification.params.notifications.model_dump(by_alias=True, exclude_none=True)
                widened = types.SubscriptionFilter.model_validate({**honored, "taskIds": self.accepted})
                notification = types.SubscriptionsAcknowledgedNotification(
                    params=notification.params.model_copy(update={"notifications": widened})
                )
            await self.session.send_notification(notification, related_request_id)
            self.acked.set()
            return
        await self.session.send_notification(notification, related_request_id)

    def changed(self, task_id: str, state: Any) -> None:
        """Note the task's new state and wake the pump (never blocks: a ``Task.watch`` listener calls it)."""
        self._dirty[task_id] = state
        self._wake.set()

    async def pump(self, initial: Mapping[str, Any] | None = None) -> None:
        """After the ack: ``initial`` (task id to state) once, then every change, until the stream ends."""
        await self.acked.wait()
        pending: dict[str, Any] = dict(initial or {})
        while True:
            pending.update(self._dirty)
            self._dirty.clear()
            for state in pending.values():
                if not await self._send(state):
                    return  # the client went away; the SDK's handler ends the stream
            pending.clear()
            if not self._dirty:
                await self._wake.wait()
                self._wake = anyio.Event()

    async def _send(self, state: Any) -> bool:
        if self.before_send is not None:
            await self.before_send(state)  # (the server's: the state is in the shared store first)
        try:
            await self.session.send_notification(
                cast("types.ServerNotification", task_status(self.detailed(state), self.subscription_id)),
                related_request_id=self.subscription_id,
            )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, MCPError):
            return False
        return True


def task_status(detailed: Mapping[str, Any], subscription_id: types.RequestId) -> TaskStatusNotification:
    """``notifications/tasks`` for one stream: ``detailed`` (wire-named), its ``_meta`` naming ``subscription_id``."""
    meta = detailed.get("_meta")
    stamped = {**(meta if isinstance(meta, Mapping) else {}), SUBSCRIPTION_ID_META_KEY: subscription_id}
    return TaskStatusNotification(params=TaskStatusParams.model_validate({**detailed, "_meta": stamped}))
