"""``%fusion tasks``: the tasks agents started in this kernel (tool, owner, status, age, last message).

Tasks live in the kernel's memory (the engine's in-memory store): a kernel restart
loses them, and a client polling one afterwards is told there is no such task.
Shown as an HTML table in a notebook, as aligned text anywhere else.
"""

from __future__ import annotations

import html
import time
from typing import Any

from ..engine import App, tasks_of

HEADINGS = ("task", "tool", "owner", "status", "age", "last message")


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds // 60 % 60} min"


def owner_text(owner: object) -> str:
    """Who a task belongs to, as a person reads it.

    A named token is its name; the one token of ``%fusion serve`` (its client id is an
    internal constant, ``fusion-nb-client``) is "the server's token": every agent using
    it shares its tasks. No token (stdio, unauthenticated HTTP) is "anonymous".
    """
    if owner is None:
        return "anonymous"
    from ..mcp.http import SINGLE_TOKEN_CLIENT  # (only when tasks are listed: the HTTP stack is heavy)

    return "the server's token" if owner == SINGLE_TOKEN_CLIENT else str(owner)


class TasksView:
    """A snapshot of an app's tasks, newest last; ``text()`` and ``_repr_html_`` render it."""

    def __init__(self, app: App) -> None:
        now = time.time()
        self.rows = [
            (
                task.id[:8] + "…",
                task.tool_name,
                owner_text(task.owner),
                str(task.status),
                _age(now - task.created),
                (task.status_message or "")[:80],
            )
            for task in tasks_of(app)
        ]

    def text(self) -> str:
        """The table as aligned text (a terminal, a log, a front end without HTML)."""
        if not self.rows:
            return "No tasks: an agent starts one by calling a tool made with .task() as a task."
        table = [HEADINGS, *self.rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(HEADINGS))]
        return "\n".join(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in table
        )

    def _repr_html_(self) -> str:
        if not self.rows:
            return f"<p>{html.escape(self.text())}</p>"
        head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in HEADINGS)
        body = "".join(
            "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(cell)}</td>" for cell in row) + "</tr>"
            for row in self.rows
        )
        return f"<table class='fusion-tasks'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())

    def __repr__(self) -> str:
        return self.text()
