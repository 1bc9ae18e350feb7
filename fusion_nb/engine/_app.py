"""``App``: a registry of tools plus the engine that runs their calls."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.metadata
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from ._background import Workers
from ._builder import BuilderFactory
from ._call import Call
from ._catalog import (
    Catalog,
    Completer,
    Prompt,
    Resource,
    choices_of,
    placeholders,
    prompt_arguments,
    template_pattern,
)
from ._channel import InputChannel, NoChannel, ScriptedAnswers
from ._errors import ToolError, internal_error, new_error_id, unknown_tool
from ._gate import Gate
from ._interactive import InputRequest
from ._middleware import Middleware
from ._present import DEFAULT_LIMITS, AnswerLimits
from ._request import CallRequest, bad_request
from ._result import CallResult
from ._runner import Runner, RunSettings, ToolPlan
from ._streaming import LogEvent, ProgressEvent
from ._threads import ThreadPool
from ._tool import Tool

log = logging.getLogger("fusion_nb")
_new_request = tuple.__new__  # (every field given: the namedtuple's own ``__new__`` is one more frame per call)


@functools.cache
def _installed_version() -> str:
    """The installed fusion-nb's version, read from its metadata once (not per app)."""
    return importlib.metadata.version("fusion-nb")


_call_gate: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "fusion_nb_call_gate", default=None
)


@contextlib.contextmanager
def gating_calls(gate: Callable[[str], None]) -> Iterator[None]:
    """Run ``gate(tool_name)`` before every call started in this context, by any app; it may raise.

    For hosts that run code which must not perform tool calls: ``fusion-nb serve`` runs
    a notebook's cells this way, so a demo cell's ``await refund(...)`` is refused
    before any handler runs. Tasks started inside inherit the gate (context variables).
    """
    token = _call_gate.set(gate)
    try:
        yield
    finally:
        _call_gate.reset(token)


@dataclass(frozen=True, slots=True)
class EngineStats:
    """A snapshot of what an app holds; every field is 0 when it is idle.

    ``slots_active``/``slots_queued`` sum every tool's concurrency limit and mutation
    serializer; ``threads_abandoned`` counts sync bodies still running for calls that
    were already aborted.
    """

    active_calls: int
    background_tasks: int
    slots_active: int
    slots_queued: int
    threads_running: int
    threads_abandoned: int

    @property
    def idle(self) -> bool:
        """True when nothing of any call remains."""
        return not any(
            (
                self.active_calls,
                self.background_tasks,
                self.slots_active,
                self.slots_queued,
                self.threads_running,
                self.threads_abandoned,
            )
        )


_NOTHING: Any = object()  # ``app.resource(uri)`` without a value: used as a decorator


class App:
    """An app: ``app.f`` builds tools, ``await app.call(name, args)`` runs them.

    Options: ``middleware`` (app-wide, outermost; ``use`` adds more and recomposes
    every tool), ``context_factory(request_info)`` returning a dict merged into
    ``ctx.state``, ``grace`` (seconds after which an aborted call's unfinished cleanup
    is reported, and ``aclose`` stops waiting), ``max_rounds`` (input rounds per
    call), ``input_channel`` (who answers input requests when a call names nobody)
    ``max_abandoned_threads`` (sync bodies left running by aborted calls before
    their tools refuse new calls) and ``answer_limits`` (how large an answer may get:
    ``AnswerLimits(max_bytes=1 << 20, max_side=1568)`` by default; every answer over it
    is cut, saying what was cut).
    """

    def __init__(
        self,
        name: str = "fusion-nb",
        *,
        version: str | None = None,
        instructions: str | None = None,
        middleware: Iterable[Middleware] = (),
        context_factory: Callable[[Any], Mapping[str, Any]] | None = None,
        grace: float = 5.0,
        max_rounds: int = 8,
        input_channel: InputChannel | None = None,
        max_abandoned_threads: int = 4,
        answer_limits: AnswerLimits | None = None,
    ) -> None:
        if answer_limits is not None and not isinstance(answer_limits, AnswerLimits):
            raise TypeError(f"answer_limits must be an AnswerLimits, not {type(answer_limits).__name__}.")
        self.name = name
        #: how large an answer may get (read wherever a value is presented)
        self.answer_limits: AnswerLimits = answer_limits or DEFAULT_LIMITS
        #: the version servers announce (default: the installed fusion-nb's)
        self.version = version or _installed_version()
        self.instructions = instructions
        self.context_factory = context_factory
        self._grace = grace
        self._max_rounds = max_rounds
        self._run_settings: RunSettings | None = None
        self._gate: Gate | None = None
        #: who answers input requests when a call names no channel (none: fail fast)
        self.input_channel: InputChannel = input_channel or NoChannel()
        #: the builder factory: ``app.f.action("name")...handle(fn)``
        self.f = BuilderFactory(self)
        self._middleware: tuple[Middleware, ...] = tuple(middleware)
        self._plans: dict[str, ToolPlan] = {}
        self._calls: dict[str, Call] = {}
        self._settled: anyio.Event | None = None  # set when the last call settles (``wait_calls``)
        self._workers = Workers()
        self._threads = ThreadPool(max_abandoned_threads)
        self._ids = map(str, itertools.count(1))  # call ids "1", "2", ...: made as strings
        self._registry_listeners: list[Callable[[], None]] = []
        self._call_listeners: list[Callable[[Call], None]] = []
        #: resources and prompts (``app.resource``, ``app.prompt``)
        self.catalog = Catalog()

    @property
    def grace(self) -> float:
        """Seconds after which an aborted call's unfinished cleanup is reported (``aclose`` waits that long)."""
        return self._grace

    @grace.setter
    def grace(self, seconds: float) -> None:
        self._grace = seconds
        self._run_settings = None

    @property
    def gate(self) -> Gate | None:
        """The host's ``Gate`` that holds calls back while its own work runs (a person's cell); ``None``: none."""
        return self._gate

    @gate.setter
    def gate(self, gate: Gate | None) -> None:
        self._gate = gate
        self._run_settings = None

    @property
    def max_rounds(self) -> int:
        """Input rounds one call may ask for, unless its tool says otherwise."""
        return self._max_rounds

    @max_rounds.setter
    def max_rounds(self, rounds: int) -> None:
        self._max_rounds = rounds
        self._run_settings = None

    # -- registry --------------------------------------------------------------------
    @property
    def tools(self) -> list[Tool]:
        """The registered tools, in registration order."""
        return [plan.tool for plan in self._plans.values()]

    def get(self, name: str) -> Tool | None:
        """The tool registered as ``name``, or ``None``."""
        plan = self._plans.get(name)
        return plan.tool if plan is not None else None

    def register(self, tool: Tool) -> Tool:
        """Add ``tool``, replacing any tool of the same name; listeners hear of the change.

        Calls already running keep the limits of the registration they started under.
        """
        self._plans.pop(tool.name, None)  # a replaced tool moves to the end, like a new one
        self._plans[tool.name] = ToolPlan(tool, self._middleware)
        self._registry_changed()
        return tool

    def remove(self, name: str) -> bool:
        """Unregister ``name``; False if there was no such tool."""
        if self._plans.pop(name, None) is None:
            return False
        self._registry_changed()
        return True

    @property
    def middleware(self) -> tuple[Middleware, ...]:
        """The app-wide middleware, outermost first (read-only: add with ``use``)."""
        return self._middleware

    def use(self, middleware: Middleware) -> App:
        """Add app-wide middleware (innermost of the app's); every registered tool is recomposed.

        A middleware is ``async def mw(ctx, call_next)`` and runs around every call: it may read
        ``ctx`` (``tool``, ``input``, ``signal``) and enrich ``ctx.state``; ``return await
        call_next()`` runs the rest of the chain and the handler, and what it returns is the
        response value (return something else, or raise ``ToolError``, to short-circuit). An
        aborted call stops before the next stage. Calls already running finish with the chain
        they started with. Example, logging how long each call takes::

            async def timed(ctx, call_next):
                started = time.perf_counter()
                try:
                    return await call_next()
                finally:
                    log.info("%s took %.3fs", ctx.tool.name, time.perf_counter() - started)

            app.use(timed)
        """
        self._middleware = (*self._middleware, middleware)
        for plan in self._plans.values():
            plan.compose(self._middleware)
        return self

    # -- resources and prompts ----------------------------------------------------------
    def resource(
        self,
        uri: str,
        value: Any = _NOTHING,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        complete: Completer | None = None,
    ) -> Any:
        """Offer a resource at ``uri``: ``app.resource(uri, value)``, or ``@app.resource(uri)`` over a function.

        The function is called on every read (sync or async) and its answer presented like a
        tool's (a DataFrame, a figure...). A ``uri`` with ``{placeholders}`` is a template:
        the function gets each placeholder as a keyword argument (one path segment each).
        A placeholder annotated ``Literal[...]`` or with an ``Enum`` completes by itself
        (MCP ``completion/complete``); ``complete(argument, value, context)`` suggests any.
        """

        def register(read: Callable[..., Any]) -> Callable[..., Any]:
            doc = description if description is not None else (read.__doc__ or "").strip() or None
            shown = name or getattr(read, "__name__", None) or uri
            pattern = template_pattern(uri)
            choices = choices_of(read) if pattern is not None else {}
            self.catalog.add_resource(Resource(uri, read, shown, doc, mime_type, pattern, complete, choices))
            return read

        if value is _NOTHING:
            return register
        self.catalog.add_resource(Resource(uri, lambda: value, name or uri, description, mime_type, None))
        return value

    def prompt(
        self,
        name: str,
        template: str | None = None,
        *,
        description: str | None = None,
        complete: Completer | None = None,
    ) -> Any:
        """Offer a prompt: ``app.prompt(name, "Explain {topic}")`` or ``@app.prompt(name)`` over a function.

        A template's ``{placeholders}`` are its (required) arguments; a function's parameters
        are (required unless they have a default), and it returns the text or a list of
        ``{"role", "content"}`` messages (a content: text, anything a tool may return, an ``Image``...,
        or a content block written as MCP's dict, ``{"type": "image", "data": ..., "mimeType": ...}``).
        An argument annotated ``Literal[...]`` or with an ``Enum`` completes by itself (MCP
        ``completion/complete``); ``complete(argument, value, context)`` (sync or async,
        returning strings) suggests values for any argument.
        """
        if template is not None:
            if not isinstance(template, str):
                kind = type(template).__name__
                raise TypeError(
                    f"app.prompt({name!r}, template): the template is a str, not a {kind} "
                    "(use @app.prompt(name) over a function)."
                )
            text = template
            arguments = tuple((argument, True) for argument in placeholders(text))
            self.catalog.add_prompt(
                Prompt(name, lambda **values: text.format(**values), description, arguments, complete)
            )
            return None

        def register(render: Callable[..., Any]) -> Callable[..., Any]:
            doc = description if description is not None else (render.__doc__ or "").strip() or None
            self.catalog.add_prompt(Prompt(name, render, doc, prompt_arguments(render), complete, choices_of(render)))
            return render

        return register

    def on_tools_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        """``listener()`` hears of every registration and removal; returns an unsubscribe function."""
        self._registry_listeners.append(listener)
        return lambda: self._registry_listeners.remove(listener) if listener in self._registry_listeners else None

    def on_call(self, listener: Callable[[Call], None]) -> Callable[[], None]:
        """``listener(call)`` hears of every call that starts running (activity views).

        A listener that raises is logged with the call id; the call runs regardless.
        """
        self._call_listeners.append(listener)
        return lambda: self._call_listeners.remove(listener) if listener in self._call_listeners else None

    def _registry_changed(self) -> None:
        for listener in list(self._registry_listeners):
            try:
                listener()
            except Exception:
                log.exception("fusion-nb: a tools-changed listener of app %r failed", self.name)

    # -- calls -----------------------------------------------------------------------
    def request(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        on_progress: Callable[[ProgressEvent], None] | None = None,
        answers: Mapping[str, Any] | Callable[[InputRequest], Any] | None = None,
        channel: InputChannel | None = None,
        request_info: Any = None,
        resume: Mapping[str, Any] | None = None,
        response: Any = None,
        ended_by: Callable[[], str | None] | None = None,
        on_log: Callable[[LogEvent], None] | None = None,
    ) -> CallRequest:
        """A call to make, built but not started: ``app.start(request)`` or ``await app.run(request)``.

        ``answers`` scripts the answers to input requests; ``channel`` is who else
        answers them (a transport's channel, a widget; default: the app's
        ``input_channel``). ``request_info`` is what ``context_factory`` reads.
        ``resume`` is a continuation from an earlier input-required result and
        ``response`` the client's answer to its request; ``ended_by`` says why the
        caller went (see ``CallRequest``); ``on_log`` hears ``ctx.log`` lines. A request that cannot be
        built raises ``TypeError`` (a host's bug); a tool that does not exist, or
        arguments that do not fit it, are the call's own result when it runs.
        """
        if type(name) is not str or answers is not None or response is not None:  # (one test on the common path)
            if not isinstance(name, str):
                raise bad_request("request", f"the tool name must be a string, got {type(name).__name__}.")
            if answers is not None:
                if channel is not None:
                    raise bad_request("request", f"call {name!r} got both answers and channel; give one of them.")
                channel = ScriptedAnswers(answers)
            if response is not None and resume is None:
                raise bad_request("request", f"call {name!r} got a response but no resume (its continuation).")
        return _new_request(
            CallRequest, (name, args, on_progress, channel, request_info, resume, response, ended_by, on_log)
        )

    def start(
        self,
        request: CallRequest | str,
        args: Mapping[str, Any] | None = None,
        *,
        on_progress: Callable[[ProgressEvent], None] | None = None,
        answers: Mapping[str, Any] | Callable[[InputRequest], Any] | None = None,
    ) -> Call:
        """Start a call in a task of its own and return its handle at once (it may already be settled).

        ``app.start(name, args, on_progress=..., answers=...)``, or ``app.start(request)``
        with a request from ``app.request(...)`` (any other option lives there).
        """
        if not isinstance(request, CallRequest):  # a name (``_prepare`` refuses one that is not a string)
            channel = ScriptedAnswers(answers) if answers is not None else None
            request = _new_request(CallRequest, (request, args, on_progress, channel, None, None, None, None, None))
        elif args is not None or on_progress is not None or answers is not None:
            raise bad_request("start", "a request comes alone; its options belong in the request.")
        prepared = self._prepare(request)
        if type(prepared) is Call:  # refused before it could run
            return prepared
        assert isinstance(prepared, Runner)
        prepared.start_detached()
        return prepared.call

    async def call(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        on_progress: Callable[[ProgressEvent], None] | None = None,
        answers: Mapping[str, Any] | Callable[[InputRequest], Any] | None = None,
    ) -> CallResult:
        """Run a call to its result; cancelling the awaiting task aborts it (options: see ``start``)."""
        return await self.start(name, args, on_progress=on_progress, answers=answers).wait()

    async def run(self, request: CallRequest) -> CallResult:
        """Run ``request`` in the awaiting task, to its result (transports: no detached worker).

        For callers whose answer goes nowhere once they are cancelled (an MCP
        request). Cancelling the awaiting task aborts the call; an abort from
        elsewhere is answered once the handler has unwound. Tools with a timeout and
        sync tools still run detached (their timer and thread need a worker), awaited
        here.
        """
        prepared = self._prepare(request)
        if type(prepared) is Call:  # refused before it could run: settled already
            result = prepared.result
            assert result is not None
            return result
        assert isinstance(prepared, Runner)
        if prepared.plan.inline_ok:
            return await prepared.run_inline()
        prepared.start_detached()
        return await prepared.call.wait()

    def _prepare(self, request: CallRequest) -> Runner | Call:
        """The runner of a new call, or the call already settled FAILED when it cannot start."""
        gate = _call_gate.get()
        name = request.tool
        if gate is not None:
            gate(name)
        call_id = next(self._ids)
        plan = self._plans.get(name) if isinstance(name, str) else None
        if plan is None:
            return Call.failed(call_id, None, request, unknown_tool(str(name), self._plans))
        try:
            return Runner(call_id, request, plan, self._run_settings or self._settings())
        except ToolError as error:
            return Call.failed(call_id, plan.tool, request, error)
        except Exception as exc:  # a context factory (or answer) that fails is the host's bug
            error_id = new_error_id()
            log.error("starting a call of tool %s failed (error id %s)", name, error_id, exc_info=exc)
            return Call.failed(call_id, plan.tool, request, internal_error(name, exc, error_id), error_id=error_id)

    def _settings(self) -> RunSettings:
        settings = self._run_settings
        if settings is not None:
            return settings
        settings = self._run_settings = RunSettings(
            app=self,
            workers=self._workers,
            threads=self._threads,
            grace=self.grace,
            max_rounds=self.max_rounds,
            register=self._register_call,
            forget=self._forget_call,
            gate=self._gate,
        )
        return settings

    def _register_call(self, call: Call) -> None:
        self._calls[call.id] = call
        if self._call_listeners:
            self._announce_call(call)

    def _forget_call(self, call: Call) -> None:
        self._calls.pop(call.id, None)
        if not self._calls and self._settled is not None:
            self._settled.set()

    def _announce_call(self, call: Call) -> None:
        for listener in list(self._call_listeners):
            try:
                listener(call)
            except Exception:
                log.exception("fusion-nb: an on_call listener failed for call %s (tool %s)", call.id, call.tool_name)

    # -- state ---------------------------------------------------------------------------
    @property
    def active_calls(self) -> list[Call]:
        """Calls that started and have not settled."""
        return list(self._calls.values())

    @property
    def background_tasks(self) -> int:
        """Detached tasks still running (call workers and cleanup watches); 0 when fully idle."""
        return len(self._workers)

    def stats(self) -> EngineStats:
        """What the app holds right now (tests, leak checks, activity views)."""
        limits = [slots for plan in self._plans.values() for slots in plan.limits]
        return EngineStats(
            active_calls=len(self._calls),
            background_tasks=len(self._workers),
            slots_active=sum(slots.active for slots in limits),
            slots_queued=sum(slots.queued for slots in limits),
            threads_running=self._threads.running,
            threads_abandoned=self._threads.abandoned_total,
        )

    @property
    def idle(self) -> bool:
        """True when no call, task, slot or thread of this app remains (see ``stats``)."""
        return self.stats().idle

    async def aclose(self, because: str | None = None) -> None:
        """Abort every live call (``because``: why, in their results); wait up to ``grace`` for cleanup."""
        for call in self.active_calls:
            call.cancel(because=because)
        await self.wait_background(self.grace)

    async def wait_calls(self, timeout: float | None = None) -> bool:
        """Wait until no call is active (an event set as the last one settles); False on timeout.

        A drain waits on it instead of polling ``active_calls``; any number of waiters may wait.
        """
        with anyio.move_on_after(timeout):
            while self._calls:
                if self._settled is None or self._settled.is_set():
                    self._settled = anyio.Event()  # shared by every waiter until it is set
                await self._settled.wait()
            return True
        return False

    async def wait_background(self, timeout: float | None = None) -> bool:
        """Wait until no detached task runs; returns False on timeout."""
        return await self._workers.wait_idle(timeout)

    def __repr__(self) -> str:
        return f"<App {self.name!r} tools={len(self._plans)}>"
