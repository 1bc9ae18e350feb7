"""Job tools: tasks for hosts that have neither tasks nor patience (SPEC 10).

Claude Desktop and claude.ai give up on a call after one to four minutes and speak
no MCP tasks. With job tools on (``enable_job_tools(app)``, off by default), a task
tool called by such a client answers at once with a job id and a sentence telling
the agent what to call next; ``jobs.wait(job_id)`` returns the result, or the status
after at most ``wait`` seconds (under any host's timeout), and ``jobs.cancel(job_id)``
aborts it. A job is a task: same store, same owners, same bounds, same cancel.

The owner of a call is what ``task_owner`` holds (``mcp.tasks`` sets the token's client
id for every ``tools/call``), so one client's job ids mean nothing to another. The
engine knows nothing of jobs: they are this adapter's wording of its tasks for MCP hosts.
"""

from __future__ import annotations

import contextvars
from collections.abc import Hashable
from typing import Any

import anyio

from ..engine import INVALID_INPUT, App, Task, TaskStatus, ToolError, tasks_of

#: the client a call is made for, as the transport knows it (``None``: the one anonymous client)
task_owner: contextvars.ContextVar[Hashable] = contextvars.ContextVar("fusion_nb_task_owner", default=None)

WAIT = "jobs.wait"
CANCEL = "jobs.cancel"


#: the structured content of a job-started answer; a task tool with an output schema also
#: declares this alternative while job tools are on (``job_output_schema``), so the answer it
#: gets before its result still conforms, as MCP requires of a tool with an output schema
JOB_STARTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "job_id": {"type": "string", "description": f"the job to pass to {WAIT} or {CANCEL}"},
        "status": {"const": "working"},
    },
    "required": ["job_id", "status"],
}


def job_output_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or a job-started answer: what a task tool's output schema is while job tools are on.

    Root ``$defs``/``definitions`` stay at the root, so the ``#/$defs/...`` references
    inside ``schema`` still resolve once it is nested under ``anyOf``.
    """
    body = {key: value for key, value in schema.items() if key not in ("$defs", "definitions", "$schema")}
    widened: dict[str, Any] = {"type": "object", "anyOf": [body, JOB_STARTED_SCHEMA]}
    widened.update({key: schema[key] for key in ("$schema", "$defs", "definitions") if key in schema})
    return widened


def started_content(task: Task) -> dict[str, Any]:
    """The structured content of ``task``'s job-started answer (``JOB_STARTED_SCHEMA``)."""
    return {"job_id": task.id, "status": "working"}


def started_sentence(task: Task, wait: float) -> str:
    """What a task tool called without task support answers: the job id and what to call next."""
    return (
        f'Started job {task.id} for tool "{task.tool_name}"; it keeps running after this answer. '
        f'Call {WAIT} with job_id "{task.id}" for its result (it waits up to {wait:.0f} s, then reports the '
        f"status: call it again until the job is done), or {CANCEL} to stop it."
    )


def enable_job_tools(app: App, *, wait: float = 45.0) -> None:
    """Add ``jobs.wait`` and ``jobs.cancel`` to ``app`` and answer task tools called without tasks with a job id.

    ``wait`` is the most seconds one ``jobs.wait`` waits before reporting the status
    (keep it under the shortest host timeout you serve: 60 s for claude.ai).
    """
    tasks = tasks_of(app)
    tasks.job_wait = wait

    async def find(job_id: str) -> Task:
        task = await tasks.find(task_owner.get(), job_id)  # (on any worker, with a shared store)
        if task is None:
            raise ToolError(
                INVALID_INPUT,
                f'There is no job "{job_id[:40]}" for this client (it never existed, has expired, or is another\'s).',
                recovery="Start the tool again to get a new job id.",
            )
        return task

    @app.f.query(WAIT).with_string("job_id", "The job id a task tool answered with").handle
    async def wait_for_job(input: Any, ctx: Any) -> Any:
        """Wait for a job started by a long-running tool: its result, or its status if it is still running."""
        task = await find(input.job_id)
        with anyio.move_on_after(tasks.job_wait):
            await task.wait()
        if not task.final:
            doing = f": {task.status_message}" if task.status_message else ""
            if task.status == TaskStatus.INPUT_REQUIRED:
                return (
                    f'Job {task.id} (tool "{task.tool_name}") is waiting for input{doing}, which this client '
                    f"cannot give; call {CANCEL} and run the tool from a client with tasks or elicitation."
                )
            return f'Job {task.id} (tool "{task.tool_name}") is still {task.status}{doing}. Call {WAIT} again.'
        result = task.result
        if result is None or task.status == TaskStatus.CANCELLED:
            return f'Job {task.id} (tool "{task.tool_name}") was cancelled.'
        if result.error is not None:
            raise result.error
        if result.structured_content is not None:
            return result.structured_content
        return "\n".join(block.get("text", "") for block in result.content if block.get("type") == "text")

    @app.f.mutation(CANCEL).with_string("job_id", "The job to stop").handle
    async def cancel_job(input: Any, ctx: Any) -> str:
        """Stop a job started by a long-running tool (its cleanup runs)."""
        task = await find(input.job_id)
        if task.final:
            return f'Job {task.id} (tool "{task.tool_name}") had already ended ({task.status}).'
        await tasks.stop(task)
        return f'Job {task.id} (tool "{task.tool_name}") is cancelled.'
