"""The tests' name for the library's 2026-07-28 tasks client (``fusion_nb.mcp.tasks_client``)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from fusion_nb.mcp.task_listen import MAX_TASK_IDS
from fusion_nb.mcp.tasks_client import (
    EXTENSION,
    DetailedTask,
    TaskCreated,
    UpdateParams,
    UpdateTask,
    listen_request,
)
from fusion_nb.mcp.tasks_client import TasksExtension as Tasks

__all__ = [
    "EXTENSION",
    "DetailedTask",
    "TaskCreated",
    "Tasks",
    "UpdateParams",
    "UpdateTask",
    "listen_request",
    "malformed_task_ids_refused",
    "missing_extension_refused",
]


async def malformed_task_ids_refused(session: Any) -> None:
    """Listens with malformed and too many ``taskIds`` each get the server's one sentence (``INVALID_PARAMS``)."""
    too_many = [f"task-{n}" for n in range(MAX_TASK_IDS + 1)]
    for task_ids, sentence in (
        ("abc", "must be a list of task id strings; got 'abc'."),
        ([1, 2], "must be a list of task id strings; got [1, 2]."),
        (
            too_many,
            f"names {MAX_TASK_IDS + 1} tasks; one stream listens to at most {MAX_TASK_IDS} "
            "(open another stream for the rest).",
        ),
    ):
        with pytest.raises(MCPError) as refused, anyio.fail_after(30):
            await session.send_request(listen_request(task_ids), types.SubscriptionsListenResult)  # type: ignore[arg-type]
        assert refused.value.error.code == types.INVALID_PARAMS
        assert refused.value.error.message == f"subscriptions/listen: params.notifications.taskIds {sentence}"


async def missing_extension_refused(session: Any) -> None:
    """A listen with ``taskIds`` from a client without the tasks extension gets ``-32021`` naming it."""
    with pytest.raises(MCPError) as missing, anyio.fail_after(30):
        await session.send_request(listen_request(["any"]), types.SubscriptionsListenResult)
    assert missing.value.error.code == -32021
    assert "needs the io.modelcontextprotocol/tasks extension" in missing.value.error.message
    assert missing.value.error.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
