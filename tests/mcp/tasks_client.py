"""The tests' name for the library's 2026-07-28 tasks client (``fusion_nb.mcp.tasks_client``)."""

from __future__ import annotations

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
]
