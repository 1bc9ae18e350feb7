"""Tasks over MCP, both eras (SPEC 10): the engine's ``Tasks`` on the wire.

* **2025-11-25** (the spec's experimental tasks utility): the handshake declares
  ``capabilities.tasks``; a ``tools/call`` carrying ``task: {ttl}`` for a task tool
  answers ``CreateTaskResult`` at once; ``tasks/get``, ``tasks/result`` (waits for the
  end; the result carries the related-task ``_meta``), ``tasks/list`` and
  ``tasks/cancel``; ``notifications/tasks/status`` on every change. A question the
  call asks goes to the client as ``elicitation/create`` over the ``tasks/result``
  request the client makes when it sees ``input_required`` (as SEP-1686 clients do).
* **2026-07-28** (extension ``io.modelcontextprotocol/tasks``, SEP-2663 as ``SPEC_PIN``
  says): advertised in ``server/discover``; a task only when the request's own client
  capabilities carry the extension (``tasks/*`` without it: ``-32021``; ``tasks/list``
  and ``tasks/result`` do not exist); a flat ``CreateTaskResult`` (``resultType:
  "task"``), after an ``InputRequiredResult`` round for a required interactive tool;
  ``tasks/get`` inlines the result, the error of a protocol-level failure or the input
  requests; ``tasks/update`` carries answers, and acknowledges the rest; ``tasks/cancel``
  acknowledges; ``Mcp-Name`` names the task.

Both are installed with ``install(server, tasks)`` from the SDK's public seams: a
server middleware (the 2025 ``CreateTaskResult`` is not a ``CallToolResult``, so it
cannot come from the ``tools/call`` handler, whose result the SDK sieves), request
handlers for ``tasks/*``, and ``server.extensions``.

Owners: a task belongs to the client identity of the bearer token that created it
(``AccessToken.client_id``); on stdio and unauthenticated HTTP everybody is the one
anonymous owner. Another token gets "no such task" for everything, as SPEC 10 says.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..engine import MAX_TTL, CallResult, InputRequest, InputResponse, Task, Tasks, TaskStatus, ToolError
from ..engine.lowlevel import spawn
from ._sdk import principal_of
from .convert import result_to_wire
from .elicitation import declared_modes, form_schema, mode_of, requires, resumption
from .jobs import started_content, started_sentence, task_owner
from .options import TASK_PAGE_SIZE
from .pages import Cursors

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server

log = logging.getLogger("fusion_nb")

EXTENSION = "io.modelcontextprotocol/tasks"
"""The 2026-07-28 tasks extension's identifier (SEP-2663)."""
RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The 2025-11-25 ``_meta`` key tying a message to its task."""
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
SPEC_PIN = "SEP-2663 as @modelcontextprotocol/conformance 0.2.0-alpha.12 checks it (SEP commits 451f5e1, d963ad0)"
"""What the 2026 wire implements (before: ``experimental-ext-tasks@07bf500``, whose draft the SEP since changed)."""

TASK_ORIGIN = "task for "
"""How the activity panel's origin of an agent's task begins (``task_origin``)."""


def task_origin(client: str | None) -> str:
    """The origin the notebook shows for a task an agent started: ``task for claude-code 2.1``."""
    return TASK_ORIGIN + (client or "a client")


LEGACY_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


class TaskParams(types.RequestParams):
    """Params of every ``tasks/*`` request, read leniently: the handler checks them and says what is wrong."""

    task_id: Any = None
    input_responses: Any = None
    cursor: Any = None


def owner_of(ctx: ServerRequestContext[Any, Any]) -> Hashable:
    """The identity a task belongs to: the verified token's ``client_id`` (``None``: anonymous), or with
    OAuth (a token with a subject) its client, issuer and subject, as the SDK binds sessions.

    Read on every ``tools/call``; its import is at the top (``import mcp`` has loaded it already:
    an import statement here cost each call more than the lookup itself).
    """
    token = get_access_token()
    if token is None:
        return None
    if token.subject is None:
        return token.client_id
    return json.dumps(principal_of(token))  # (OAuth: a person through a client, not every user of that client)


def opted_in(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether a 2026 request's own client capabilities carry the tasks extension."""
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    if extensions and EXTENSION in extensions:
        return True
    meta = ctx.meta or {}
    declared = cast("dict[str, Any]", meta).get(CLIENT_CAPABILITIES)
    return isinstance(declared, dict) and EXTENSION in (declared.get("extensions") or {})


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _task_wire(task: Task, status: str, ttl_key: str, poll_key: str) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "taskId": task.id,
        "status": status,
        "createdAt": task.created_at,
        "lastUpdatedAt": task.updated_at,
        ttl_key: _ms(task.ttl),
        poll_key: _ms(task.poll_interval),
    }
    if task.status_message:
        wire["statusMessage"] = task.status_message
    return wire


def legacy_task(task: Task) -> dict[str, Any]:
    """The 2025-11-25 ``Task`` object."""
    return _task_wire(task, str(task.status), "ttl", "pollInterval")


def protocol_failure(task: Task) -> bool:
    """Whether ``task`` ended in a protocol-level failure: its handler crashed, or its worker died
    (no result); not a ``ToolError`` its code raised, which is a tool's answer."""
    if task.status != TaskStatus.FAILED:
        return False
    result = task.result
    return result is None or result.crashed


def modern_task(task: Task) -> dict[str, Any]:
    """The SEP-2663 ``Task`` (flat, ``ttlMs``/``pollIntervalMs``).

    A tool that failed with its own error is ``completed`` with its ``isError`` result, as
    the SEP requires; ``failed`` is for protocol-level failures only (``protocol_failure``).
    """
    status = str(task.status)
    if task.status == TaskStatus.FAILED and not protocol_failure(task):
        status = str(TaskStatus.COMPLETED)
    return _task_wire(task, status, "ttlMs", "pollIntervalMs")


def _call_result(task: Task, tasks: Tasks, modern: bool) -> dict[str, Any]:
    result = task.result
    if result is None and task.status == TaskStatus.FAILED:  # ended without a call result: a dead worker's
        result = CallResult.failure(
            ToolError("TASK_FAILED", task.status_message or f'Task "{task.id}" of tool "{task.tool_name}" failed.')
        )
    elif result is None:
        result = CallResult.failure(
            ToolError("CANCELLED", f'Task "{task.id}" of tool "{task.tool_name}" has no result.')
        )
    tool = tasks.app.get(task.tool_name)  # (every worker serves the same tools: a copy has no call)
    return result_to_wire(result, has_output_schema=tool is not None and tool.output_schema is not None, modern=modern)


def _protocol_error(task: Task) -> dict[str, Any]:
    """The JSON-RPC error a protocol-level failure inlines: one sentence (a crash names its class and
    error id, never its traceback; a dead worker's task says so)."""
    result = task.result
    error = result.error if result is not None else None
    message = error.message if error is not None else None
    message = message or task.status_message or f'Task "{task.id}" of tool "{task.tool_name}" failed.'
    wire: dict[str, Any] = {"code": INTERNAL_ERROR, "message": message}
    if error is not None and error.details:
        wire["data"] = error.details
    return wire


def _elicitation(request: InputRequest, task_id: str | None) -> dict[str, Any]:
    """An input request as ``elicitation/create`` params (tied to the task on 2025)."""
    params: dict[str, Any]
    if request.kind == "url":
        params = {"mode": "url", "message": request.message, "url": request.url}
    else:
        params = {"mode": "form", "message": request.message, "requestedSchema": form_schema(request)}
    if task_id is not None:
        params["_meta"] = {RELATED_TASK: {"taskId": task_id}}
    return params


def detailed_task(task: Task, tasks: Tasks) -> dict[str, Any]:
    """The 2026 ``tasks/get`` answer: the task with its result or its input requests inlined."""
    wire = modern_task(task)
    if protocol_failure(task):
        wire["error"] = _protocol_error(task)
    elif task.final and task.status != TaskStatus.CANCELLED:
        wire["result"] = _call_result(task, tasks, modern=True)
    pending = task.pending if task.status == TaskStatus.INPUT_REQUIRED else []
    if pending:  # (several at once for ``require_input.all``; an answered one leaves the map)
        wire["inputRequests"] = {
            request.key: {"method": "elicitation/create", "params": _elicitation(request, None)} for request in pending
        }
    return wire


def needs_extension(message: str) -> MCPError:
    """SEP-2575's ``-32021`` (Missing Required Client Capability) naming the tasks extension: a 2026
    request that can only be served with a task, or that reaches ``tasks/*``, without declaring it."""
    return requires(message, {"extensions": {EXTENSION: {}}})


def _invalid(message: str) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=message)


@contextlib.contextmanager
def store_errors() -> Iterator[None]:
    """A shared task store that cannot be reached answers its one sentence as a JSON-RPC error."""
    try:
        yield
    except ToolError as error:
        raise MCPError(code=INTERNAL_ERROR, message=error.message) from None


def _task_id(method: str, params: TaskParams) -> str:
    task_id = params.task_id
    if not isinstance(task_id, str) or not task_id:
        shown = repr(task_id)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise _invalid(f"{method} needs params.taskId, the id string of a task; got {shown}.")
    if len(task_id) > 200:  # longer than any id a store makes: a string, and no task (never looked up)
        raise _not_found(method, task_id)
    return task_id


def _not_found(method: str, task_id: str) -> MCPError:
    shown = task_id if len(task_id) <= 40 else task_id[:37] + "..."
    return _invalid(
        f'{method}: there is no task "{shown}" for this client '
        "(it never existed, has expired, or belongs to another token)."
    )


def requested_ttl(name: str, task_param: object) -> float | None:
    """The ttl (seconds) a 2025 ``params.task`` asks for; ``None`` for the tool's own. Raises one sentence."""
    if not isinstance(task_param, dict):
        raise _invalid(
            f'Tool "{name}": params.task must be an object such as {{"ttl": 60000}}; got {task_param!r:.60}.'
        )
    ttl = task_param.get("ttl")
    if ttl is None:
        return None
    limit = _ms(MAX_TTL)
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 1000 <= ttl <= limit:
        raise _invalid(
            f'Tool "{name}": params.task.ttl must be a whole number of milliseconds '
            f"from 1000 to {limit}; got {ttl!r:.40}."
        )
    return ttl / 1000


def _resumed(params: Mapping[str, Any]) -> tuple[dict[str, Any] | None, InputResponse | None]:
    """The continuation and answer a 2026 retry carries (its ``requestState`` unsealed by the boundary), or none."""
    state = params.get("requestState")
    if not state:
        return None, None
    retry = types.CallToolRequestParams.model_validate(params)
    assert retry.request_state is not None
    return resumption(retry, retry.request_state)


def _can_answer(ctx: ServerRequestContext[Any, Any]) -> Any:
    modes = declared_modes(ctx.session.client_capabilities)  # (a task asks a person only: no sampling, no roots)
    return lambda request: request.for_person and mode_of(request) in modes


class TaskWire:
    """The middleware and ``tasks/*`` handlers of one server over one app's ``Tasks``."""

    def __init__(
        self, tasks: Tasks, *, heartbeat: float = 15.0, page_size: int = TASK_PAGE_SIZE, cursors: Cursors | None = None
    ) -> None:
        self.tasks = tasks
        #: tasks per ``tasks/list`` page, and the cursors that continue one (sealed per owner)
        self.page_size = page_size
        self.cursors = cursors or Cursors()
        #: seconds between heartbeat progress notifications of a task tool run as a plain call
        self.heartbeat = heartbeat

    # -- middleware: the handshake and task creation -------------------------------------------
    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Declare the 2025 capability; turn a task-augmented ``tools/call`` into a task."""
        method = ctx.method
        if method == "tools/call":
            owner = task_owner.set(owner_of(ctx))  # (the job tools read it)
            try:
                return await self._tools_call(ctx, call_next)
            finally:
                task_owner.reset(owner)
        if method == "initialize":
            result = await call_next(ctx)
            if isinstance(result, dict) and isinstance(result.get("capabilities"), dict):
                result["capabilities"]["tasks"] = LEGACY_CAPABILITY
            return result
        return await call_next(ctx)

    async def _tools_call(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params or {}
        name = params.get("name")
        tool = self.tasks.app.get(name) if isinstance(name, str) else None
        options = tool.task if tool is not None else None
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if modern:
            if options is not None and opted_in(ctx):
                assert tool is not None
                if options.required and tool.interactive and not params.get("requestState"):
                    # SEP-2663's MRTR composition: a required task tool's first round runs in the request;
                    # a question there is an InputRequiredResult, the round that has its answer makes the task
                    return await call_next(ctx)
                resume, response = _resumed(params)
                created = await self._create(ctx, str(name), params.get("arguments"), None, resume, response)
                if isinstance(created, dict):
                    return created
                return {"resultType": "task", **modern_task(created)}
            if options is not None and self.tasks.job_wait is not None:
                return await self._job(ctx, str(name), params.get("arguments"))
            if options is not None and options.required:
                raise needs_extension(
                    f'Tool "{name}" runs only as a task, and this request did not declare the '
                    f"{EXTENSION} extension in its client capabilities."
                )
            return await call_next(ctx)
        task_param = params.get("task")
        if task_param is not None and isinstance(name, str):
            if options is None:
                raise _invalid(
                    f'Tool "{name}" does not run as a task (its taskSupport is "forbidden"); '
                    "call it without params.task."
                )
            created = await self._create(ctx, name, params.get("arguments"), requested_ttl(name, task_param))
            if isinstance(created, dict):
                return created
            self._notify_status(ctx, created)
            return {"task": legacy_task(created)}
        if options is not None and self.tasks.job_wait is not None:
            return await self._job(ctx, str(name), params.get("arguments"))
        if options is not None and options.required:
            return _refusal(
                ToolError(
                    "TASK_REQUIRED",
                    f'Tool "{name}" runs only as a task, and this call did not ask for one.',
                    recovery='Call it with params.task (e.g. {"ttl": 600000}) from a client that supports '
                    "MCP tasks, or ask the server's owner to enable job tools.",
                )
            )
        return await call_next(ctx)

    async def _create(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        arguments: object,
        ttl: float | None,
        resume: dict[str, Any] | None = None,
        response: InputResponse | None = None,
    ) -> Task | dict[str, Any]:
        """The new task, or the tool error result that says why none was made (bounds, arguments)."""
        from .server import RequestInfo, calling_client, client_label  # (server imports this module)

        app = self.tasks.app
        args = arguments if isinstance(arguments, dict) or arguments is None else {"": arguments}
        info = RequestInfo(ctx) if app.context_factory is not None else None
        calling = calling_client.set(task_origin(client_label(ctx)))  # the activity panel's origin
        try:
            return await self.tasks.start(
                owner_of(ctx),
                name,
                args,
                ttl=ttl,
                request_info=info,
                can_answer=_can_answer(ctx),
                resume=resume,
                response=response,
            )
        except ToolError as error:
            return _refusal(error)
        finally:
            calling_client.reset(calling)

    async def _job(self, ctx: ServerRequestContext[Any, Any], name: str, arguments: object) -> dict[str, Any]:
        """Job tools: start the task and answer at once with its id and what to call next."""
        created = await self._create(ctx, name, arguments, None)
        if isinstance(created, dict):
            return created
        assert self.tasks.job_wait is not None
        tool = self.tasks.app.get(name)
        has_schema = tool is not None and tool.output_schema is not None
        text = started_sentence(created, self.tasks.job_wait)
        # a tool with an output schema must answer structured content; tools/list declares this shape too
        structured = started_content(created) if has_schema else None
        return result_to_wire(
            CallResult(content=[{"type": "text", "text": text}], structured_content=structured),
            has_output_schema=has_schema,
            modern=ctx.protocol_version in MODERN_PROTOCOL_VERSIONS,
        )

    def _notify_status(self, ctx: ServerRequestContext[Any, Any], task: Task) -> None:
        """Send ``notifications/tasks/status`` on the creating connection after every change (2025)."""
        session = ctx.session
        if not session.can_send_request:
            return  # stateless HTTP: no channel outlives the request

        sent = (task.status, task.status_message, task.updated)  # what the CreateTaskResult said

        async def send() -> None:
            nonlocal sent
            while True:
                state = (task.status, task.status_message, task.updated)
                if state != sent:
                    sent = state
                    notification = types.TaskStatusNotification(
                        params=types.TaskStatusNotificationParams.model_validate(legacy_task(task))
                    )
                    try:
                        await session.send_notification(cast("types.ServerNotification", notification))
                    except Exception:
                        return  # the client went away: it polls or it is gone
                if task.final:
                    return
                await task.wait_change()

        spawn(send, name=f"fusion-nb task status {task.tool_name}")

    # -- tasks/* handlers ------------------------------------------------------------------------
    async def _find(self, ctx: ServerRequestContext[Any, Any], method: str, params: TaskParams) -> Task:
        task_id = _task_id(method, params)
        with store_errors():
            task = await self.tasks.find(owner_of(ctx), task_id)
        if task is None:
            raise _not_found(method, task_id)
        return task

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/get``: the task (2025), or the task with its result or questions inlined (2026)."""
        modern = _checked(ctx, "tasks/get", params)
        task = await self._find(ctx, "tasks/get", params)
        if modern:
            return {"resultType": "complete", **detailed_task(task, self.tasks)}
        return legacy_task(task)

    async def result(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/result`` (2025): wait for the end, asking the task's questions on the way; the call's result."""
        _legacy_only(ctx, "tasks/result", "tasks/get inlines the result once the task has ended")
        task = await self._find(ctx, "tasks/result", params)
        asked = None
        with store_errors():
            while not task.final:
                question = task.question
                if question is not None and question is not asked:  # (an invalid answer is asked anew)
                    asked = question
                    for request in task.pending:  # (the parts of ``require_input.all`` one after the other)
                        await self._ask(ctx, task, request)
                else:
                    await task.wait_change()
        result = _call_result(task, self.tasks, modern=False)
        result["_meta"] = {**(result.get("_meta") or {}), RELATED_TASK: {"taskId": task.id}}
        return result

    async def _ask(self, ctx: ServerRequestContext[Any, Any], task: Task, request: InputRequest) -> None:
        """Put the task's question to the client over this request, and hand its answer to the task."""
        elicit = types.ElicitRequest(
            params=types.ElicitRequestURLParams.model_validate(_elicitation(request, task.id))
            if request.kind == "url"
            else types.ElicitRequestFormParams.model_validate(_elicitation(request, task.id))
        )
        try:
            answer = await ctx.session.send_request(
                elicit, types.ElicitResult, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
            )
            response = InputResponse(answer.action, dict(answer.content) if answer.content is not None else None)
        except MCPError:
            response = InputResponse("cancel")
        await self.tasks.respond(task, request.key, response)

    async def list(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/list`` (2025): this client's tasks only, ``page_size`` at a time.

        A page costs its own tasks, not the client's others nor anybody else's; its
        cursor is sealed for this client (another's, or a forged one, is -32602).
        """
        _legacy_only(ctx, "tasks/list", "a client keeps the ids of the tasks it started")
        owner = owner_of(ctx)
        scope = f"tasks/list {owner!r}"
        after = None
        if params.cursor is not None:
            after = json.loads(self.cursors.open(scope, "tasks/list", params.cursor))
        with store_errors():
            tasks, mark = await self.tasks.find_page(owner, after, self.page_size)
        result: dict[str, Any] = {"tasks": [legacy_task(task) for task in tasks]}
        if mark is not None:
            result["nextCursor"] = self.cursors.seal(scope, json.dumps(mark))
        return result

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/cancel``: abort the task's call; the task (2025) or an empty acknowledgement (2026)."""
        modern = _checked(ctx, "tasks/cancel", params)
        task = await self._find(ctx, "tasks/cancel", params)
        if task.final and not modern:
            raise _invalid(f'tasks/cancel: task "{task.id}" has already ended ({task.status}); it cannot be cancelled.')
        with store_errors():
            await self.tasks.stop(task)
        if modern:
            return {"resultType": "complete"}
        return legacy_task(task)

    async def update(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/update`` (2026): the client's answers to the task's input requests, acknowledged.

        SEP-2663: an answer to a request the task does not wait on (an unknown key, one
        answered already, an empty map) is ignored, not refused; only a malformed answer
        to a request it waits on is ``-32602``, in one sentence.
        """
        _checked(ctx, "tasks/update", params)
        task = await self._find(ctx, "tasks/update", params)
        responses = params.input_responses
        if not isinstance(responses, dict):
            raise _invalid(
                'tasks/update needs params.inputResponses, an object such as {"confirm": {"action": "accept", '
                f'"content": {{...}}}}; got {responses!r:.60}.'
            )
        waiting = {request.key for request in task.pending}
        for key, answer in responses.items():
            if key not in waiting:
                continue
            try:
                elicited = types.ElicitResult.model_validate(answer)
            except ValueError:
                raise _invalid(
                    f'tasks/update: inputResponses["{key:.40}"] must be an elicitation answer '
                    '{"action": "accept" | "decline" | "cancel", "content": {...}}.'
                ) from None
            response = InputResponse(elicited.action, dict(elicited.content) if elicited.content is not None else None)
            with store_errors():
                await self.tasks.respond(task, str(key), response)  # (a question gone meanwhile: nothing to do)
        return {"resultType": "complete"}


def _checked(ctx: ServerRequestContext[Any, Any], method: str, params: TaskParams) -> bool:
    """Whether a ``tasks/*`` request speaks 2026, where it must name its task in ``Mcp-Name`` when it
    has that header (``-32020`` otherwise, as SEP-2243 checks ``tools/call``) and must carry the
    extension in its client capabilities (SEP-2575's ``-32021`` otherwise)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    request = ctx.request
    header = request.headers.get(MCP_NAME_HEADER) if request is not None else None
    if header is not None and decode_header_value(header) != params.task_id:
        raise MCPError(code=HEADER_MISMATCH, message=f"{MCP_NAME_HEADER} header does not match {method}'s taskId")
    if not opted_in(ctx):
        raise needs_extension(f"{method} needs the {EXTENSION} extension in this request's client capabilities.")
    return True


def _legacy_only(ctx: ServerRequestContext[Any, Any], method: str, instead: str) -> None:
    """``tasks/result`` and ``tasks/list`` are 2025-11-25 methods: SEP-2663 removed them (``-32601``)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(
            code=METHOD_NOT_FOUND,
            message=f"{method} does not exist in 2026-07-28 (the tasks extension, SEP-2663, removed it): {instead}.",
        )


def _refusal(error: ToolError) -> dict[str, Any]:
    return result_to_wire(CallResult.failure(error), has_output_schema=True)


def install(
    server: Server[Any],
    tasks: Tasks,
    *,
    heartbeat: float = 15.0,
    page_size: int = TASK_PAGE_SIZE,
    cursors: Cursors | None = None,
) -> TaskWire:
    """Serve ``tasks`` from ``server``: the middleware (innermost), the ``tasks/*`` handlers, the 2026 extension."""
    wire = TaskWire(tasks, heartbeat=heartbeat, page_size=page_size, cursors=cursors)
    server.middleware.append(wire)
    for method, handler in (
        ("tasks/get", wire.get),
        ("tasks/result", wire.result),
        ("tasks/list", wire.list),
        ("tasks/cancel", wire.cancel),
        ("tasks/update", wire.update),
    ):
        server.add_request_handler(method, TaskParams, handler)
    server.extensions[EXTENSION] = {}
    return wire
