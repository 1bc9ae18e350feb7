"""Tasks seen from other processes: the record a shared store keeps, and the store's interface (SPEC 15).

Behind a load balancer the worker that runs a task is rarely the one a client's
next ``tasks/get`` reaches. A shared store (``fusion_nb.redis_tasks``) makes every
worker's tasks visible to every other: the running worker writes each task's
``TaskRecord`` (status, last message, times, and the result or the question once
there is one); any worker reads it back as a *copy* (``Task.copy_of``) that the
wire serves exactly as a local task; a cancel or an answer given to a copy is
relayed to the worker that runs it, whose call is aborted or resumed as for any
local task.

A record is plain JSON (``to_json`` / ``from_json``): no live objects cross a
process. The result keeps what a client is sent (content, structured content, the
error's fields); the question keeps the request's kind, message, key, URL and form
schema, which is all a transport needs to ask it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ._ask import fields_from_schema
from ._errors import ToolError
from ._interactive import InputQuestion, InputRequest, InputResponse
from ._result import CallResult
from ._signal import AbortSignal

if TYPE_CHECKING:
    from ._tasks import Task, TaskStatus


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task as a shared store keeps it; ``worker`` names the process that runs it."""

    id: str
    owner: Hashable
    tool_name: str
    status: TaskStatus
    status_message: str | None
    created: float
    updated: float
    ttl: float
    poll_interval: float
    worker: str
    result: CallResult | None = None
    question: InputQuestion | None = None
    answered: tuple[str, ...] = ()  # the keys of the question's parts answered so far

    @classmethod
    def of(cls, task: Task, worker: str) -> TaskRecord:
        """The record of a task this process runs."""
        return cls(
            task.id,
            task.owner,
            task.tool_name,
            task.status,
            task.status_message,
            task.created,
            task.updated,
            task.ttl,
            task.poll_interval,
            worker,
            task.result,
            task.question,
            tuple(task.answered),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON form (the owner must be a string or ``None``: a client id)."""
        return {
            "id": self.id,
            "owner": self.owner,
            "tool": self.tool_name,
            "status": str(self.status),
            "message": self.status_message,
            "created": self.created,
            "updated": self.updated,
            "ttl": self.ttl,
            "poll": self.poll_interval,
            "worker": self.worker,
            "result": _result_json(self.result) if self.result is not None else None,
            "question": _question_json(self.question) if self.question is not None else None,
            "answered": list(self.answered),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskRecord:
        """The record written by ``to_json`` (raises ``ValueError`` naming what is malformed)."""
        from ._tasks import TaskStatus

        try:
            tool = str(data["tool"])
            result = data.get("result")
            question = data.get("question")
            return cls(
                str(data["id"]),
                data["owner"],
                tool,
                TaskStatus(data["status"]),
                data.get("message"),
                float(data["created"]),
                float(data["updated"]),
                float(data["ttl"]),
                float(data["poll"]),
                str(data["worker"]),
                _result_from(result) if result is not None else None,
                _question_from(question, tool) if question is not None else None,
                tuple(str(key) for key in data.get("answered") or ()),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"a malformed task record ({type(error).__name__}: {error})") from None


def _result_json(result: CallResult) -> dict[str, Any]:
    return {
        "content": result.content,
        "structured": result.structured_content,
        "is_error": result.is_error,
        "error": result.error.to_dict() if result.error is not None else None,
        "error_id": result.error_id,
    }


def _result_from(data: dict[str, Any]) -> CallResult:
    error = data.get("error")
    return CallResult(
        content=list(data["content"]),
        structured_content=data.get("structured"),
        is_error=bool(data.get("is_error")),
        error=ToolError(
            str(error["code"]),
            str(error["message"]),
            recovery=error.get("recovery"),
            details=error.get("details"),
            retry_after=error.get("retry_after"),
        )
        if error is not None
        else None,
        error_id=data.get("error_id"),
    )


def _question_json(question: InputQuestion) -> dict[str, Any]:
    return {**_request_json(question.request), "problems": list(question.problems)}


def _request_json(request: InputRequest) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "kind": request.kind,
        "key": request.key,
        "message": request.message,
        "url": request.url,
        "schema": request.schema,
    }
    if request.parts:  # (``require_input.all``: each part is asked, and answered, on its own)
        wire["parts"] = [_request_json(part) for part in request.parts]
    return wire


def _request_from(data: dict[str, Any]) -> InputRequest:
    schema = data.get("schema")
    return InputRequest(
        str(data["kind"]),
        str(data["message"]),
        fields=fields_from_schema(schema) if schema is not None else None,
        url=data.get("url"),
        key=str(data["key"]),
        parts=tuple(_request_from(part) for part in data.get("parts") or ()),
    )


def _question_from(data: dict[str, Any], tool: str) -> InputQuestion:
    request = _request_from(data)
    # a copy's question is never aborted here: the worker that runs the call owns its signal
    return InputQuestion(request, tool, "", AbortSignal(), tuple(data.get("problems") or ()))


class SharedTasks(Protocol):
    """Where every worker's tasks meet (``Tasks.share``); ``fusion_nb.redis_tasks`` is the one shipped.

    Its methods fail with a ``ToolError`` (``TASK_STORE_UNAVAILABLE``) in one sentence
    when the store cannot be reached, and never hang longer than the store's timeout.
    """

    async def add(self, task: Task) -> None:
        """Make a new task of this process visible to all (awaited before its id is handed out)."""

    async def fetch(self, task_id: str) -> Task | None:
        """A copy of a task another process runs (``Task.copy_of``), or ``None``."""

    async def owned(self, owner: Hashable) -> list[Task]:
        """Copies of ``owner``'s tasks, wherever they run, oldest first."""

    async def count(self, owner: Hashable | None = None) -> int:
        """How many tasks ``owner`` holds across all workers (everybody's when ``None``)."""

    async def written(self, task: Task) -> None:
        """Return once the latest change of this process's ``task`` is visible to every worker."""

    async def remove(self, task: Task) -> None:
        """Forget this process's ``task`` everywhere: its ttl passed and its call has stopped."""

    async def cancel(self, task: Task) -> None:
        """Have the worker running the copied ``task`` abort its call."""

    async def answer(self, task: Task, key: str, response: InputResponse) -> None:
        """Hand ``response`` to the worker running the copied ``task``, for its question ``key``."""
