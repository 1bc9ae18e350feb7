"""``Fusion``: a registry of tools plus the engine that runs their calls."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio

from .ask import fields_from_schema
from .background import Detached, spawn
from .builder import BuilderFactory
from .call import Call
from .channel import InputChannel, NoChannel, ScriptedAnswers, as_response
from .context import Context
from .errors import INVALID_INPUT, UNKNOWN_TOOL, ToolError
from .interactive import InputRequest, InputResponse, Rounds, arguments_digest
from .middleware import Middleware
from .result import CallResult
from .schema import validate_input
from .streaming import ProgressEvent
from .tool import Tool


class Fusion:
    """An app: ``app.f`` builds tools, ``await app.call(name, args)`` runs them.

    Options: ``middleware`` (app-wide, outermost), ``context_factory(request_info)``
    returning a dict merged into ``ctx.state``, ``grace`` (seconds an aborted
    handler's cleanup may take before its slots are released) and ``max_rounds``
    (input rounds per call).
    """

    def __init__(
        self,
        name: str = "fusion-nb",
        *,
        version: str = "0.1.0",
        instructions: str | None = None,
        middleware: Iterable[Middleware] = (),
        context_factory: Callable[[Any], Mapping[str, Any]] | None = None,
        grace: float = 5.0,
        max_rounds: int = 8,
        input_channel: InputChannel | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.instructions = instructions
        self.middleware: list[Middleware] = list(middleware)
        self.context_factory = context_factory
        self.grace = grace
        self.max_rounds = max_rounds
        #: who answers input requests when a call names no channel (none: fail fast)
        self.input_channel: InputChannel = input_channel or NoChannel()
        self.f = BuilderFactory(self)
        self._tools: dict[str, Tool] = {}
        self._calls: dict[str, Call] = {}
        self._workers: set[Detached] = set()
        self._ids = itertools.count(1)
        self._registry_listeners: list[Callable[[], None]] = []
        self._idle: anyio.Event | None = None
        self._call_listeners: list[Callable[[Call], None]] = []

    # -- registry --------------------------------------------------------------------
    @property
    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def register(self, tool: Tool) -> Tool:
        """Add ``tool``, replacing any tool of the same name; listeners hear of the change."""
        self._tools[tool.name] = tool
        self._registry_changed()
        return tool

    def remove(self, name: str) -> bool:
        if self._tools.pop(name, None) is None:
            return False
        self._registry_changed()
        return True

    def use(self, middleware: Middleware) -> Fusion:
        """Add app-wide middleware (outermost); existing tools are recomposed once."""
        self.middleware.append(middleware)
        for tool in self._tools.values():
            tool.compose()
        return self

    def on_tools_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        self._registry_listeners.append(listener)
        return lambda: self._registry_listeners.remove(listener) if listener in self._registry_listeners else None

    def on_call(self, listener: Callable[[Call], None]) -> Callable[[], None]:
        """``listener(call)`` hears of every call that starts running (activity views)."""
        self._call_listeners.append(listener)
        return lambda: self._call_listeners.remove(listener) if listener in self._call_listeners else None

    def _registry_changed(self) -> None:
        for listener in list(self._registry_listeners):
            listener()

    # -- calls -----------------------------------------------------------------------
    def start(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        on_progress: Callable[[ProgressEvent], None] | None = None,
        request_info: Any = None,
        answers: Mapping[str, Any] | Callable[[InputRequest], Any] | None = None,
        channel: InputChannel | None = None,
        resume: Mapping[str, Any] | None = None,
        response: Any = None,
        inline: bool = False,
    ) -> Call:
        """Start a call and return its handle at once (it may already be settled).

        ``inline=True`` defers the run to the first ``await call.wait()``, which runs
        it in that task (cheaper: no detached worker); an abort from elsewhere is then
        answered once the handler has unwound. Tools with a timeout always run detached.

        ``answers`` scripts the answers to input requests; ``channel`` is a
        transport's own input channel. ``resume`` is a continuation from an earlier
        input-required result and ``response`` the client's answer to its request.
        """
        tool = self._tools.get(name)
        call = Call(self, tool, str(next(self._ids)), on_progress)
        if tool is None:
            call._settle(CallResult.failure(unknown_tool(name, self._tools)), "failed")
            return call
        try:
            value = validate_input(name, tool.input_model, args)
            if resume is not None:
                call.rounds, pending = restore(tool.name, args, resume)
                call._resume = (pending, as_response(pending, response) or InputResponse("cancel"))
            state = dict(self.context_factory(request_info)) if self.context_factory is not None else {}
            if tool.slots is not None:
                call.queue(tool.slots)
        except ToolError as error:
            call._settle(CallResult.failure(error), "failed")
            return call
        call.args = args
        call.channel = (
            ScriptedAnswers(answers) if answers is not None else channel if channel is not None else self.input_channel
        )
        call.ctx = Context(call, tool, self, state, value)
        self._calls[call.id] = call
        if inline and tool.timeout is None:
            call._inline = True
        else:
            call._start()
        for listener in self._call_listeners:
            listener(call)
        return call

    async def call(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        on_progress: Callable[[ProgressEvent], None] | None = None,
        answers: Mapping[str, Any] | Callable[[InputRequest], Any] | None = None,
        **options: Any,
    ) -> CallResult:
        """Run a call to its result; cancelling the awaiting task aborts it (see ``start``)."""
        return await self.start(name, args, on_progress=on_progress, answers=answers, **options).wait()

    @property
    def active_calls(self) -> list[Call]:
        return list(self._calls.values())

    @property
    def background_tasks(self) -> int:
        """Detached tasks still running (call workers and reapers); 0 when fully idle."""
        return len(self._workers)

    async def aclose(self) -> None:
        """Abort every live call and wait (up to ``grace``) for their cleanup."""
        for call in self.active_calls:
            call.cancel()
        await self.wait_background(self.grace)

    async def wait_background(self, timeout: float | None = None) -> bool:
        """Wait until no detached task runs; returns False on timeout."""
        with anyio.move_on_after(timeout):
            while self._workers:
                if self._idle is None or self._idle.is_set():
                    self._idle = anyio.Event()  # shared by every waiter until it is set
                await self._idle.wait()
            return True
        return False

    def _spawn(self, fn: Callable[[], Any], *, name: str, on_done: Callable[[], None] | None = None) -> Detached:
        """Start a detached task that ``background_tasks`` counts until it ends."""
        handle: Detached

        def finished() -> None:
            self._workers.discard(handle)
            if on_done is not None:
                on_done()
            if not self._workers and self._idle is not None:
                self._idle.set()

        handle = spawn(fn, name=name, on_done=finished)
        if not handle.done:
            self._workers.add(handle)
        return handle

    def _forget(self, call: Call) -> None:
        self._calls.pop(call.id, None)

    def __repr__(self) -> str:
        return f"<Fusion {self.name!r} tools={len(self._tools)}>"


def unknown_tool(name: str, tools: Mapping[str, Tool]) -> ToolError:
    known = ", ".join(sorted(tools)) or "none"
    return ToolError(
        UNKNOWN_TOOL,
        f'There is no tool named "{name}" (available tools: {known}).',
        recovery="Call tools/list and use one of the listed names.",
        details={"tool": name},
    )


def restore(tool_name: str, args: Any, resume: Mapping[str, Any]) -> tuple[Rounds, InputRequest]:
    """Rebuild a call's rounds and pending request from its continuation, or refuse it."""
    try:
        foreign = resume.get("tool") != tool_name or resume.get("args") != arguments_digest(args)
        pending = resume["pending"]
        rounds = Rounds(int(resume["round"]), dict(resume["answers"]), resume.get("state"))
        schema = pending.get("schema")
        request = InputRequest(
            pending["kind"],
            pending["message"],
            fields=fields_from_schema(schema) if schema else None,
            url=pending.get("url"),
            state=pending.get("state"),
            key=pending["key"],
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        foreign, request, rounds = True, None, None
    if foreign:
        raise ToolError(
            INVALID_INPUT,
            f'The request state sent to tool "{tool_name}" does not belong to this call (another tool or other arguments).',
            recovery="Start the call again without a request state.",
        )
    return rounds, request
