"""Running one call: queue, middleware, serializer, handler, input rounds; detached or inline.

A call runs *detached* (in a task of its own, so an abort settles it at once whatever
the handler does with its cancellation, while cleanup finishes in the background) or
*inline* (in the task that awaits it: no extra task, the MCP request path). Either
way the runner releases the call's slots only when its body has really stopped, and
settles the call exactly once, whatever the handler raises.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

import anyio

from ._backends import Cancellable, Interruptible, current_backend, interruptible
from ._background import Event, Workers
from ._call import CANCELLED_STATUS, DONE, FAILED, RUNNING, WAITING, Call, CallStatus
from ._channel import DEFER, InputChannel, as_response
from ._context import Context
from ._errors import (
    CANCELLED,
    INTERNAL_ERROR,
    TIMEOUT,
    Aborted,
    ToolError,
    internal_error,
    new_error_id,
    no_way_to_ask,
    refused_again,
)
from ._errors import rounds_exceeded as too_many_rounds
from ._gate import Gate
from ._handlers import HandlerKind, make_runner
from ._interactive import (
    ACCEPT,
    CANCEL,
    InputQuestion,
    InputRequest,
    InputResponse,
    Reask,
    Rounds,
    checked_answer,
    continuation,
    current_rounds,
    restore,
)
from ._middleware import Middleware, Stage, compose
from ._present import present
from ._request import CallRequest
from ._result import CallResult
from ._schema import input_validator
from ._slots import Slots
from ._threads import ThreadPool, describe_crash
from ._tool import Verb

if TYPE_CHECKING:
    from ._app import App
    from ._tool import Tool

log = logging.getLogger("fusion_nb")
T = TypeVar("T")

#: the runner of the call whose pipeline is running in this context
current_runner: contextvars.ContextVar[Runner] = contextvars.ContextVar("fusion_nb_runner")


class ToolPlan:
    """How an app runs one registered tool: its validator, its composed chain and its limits.

    The limits (concurrency slots, mutation serializer) live as long as the
    registration; ``compose`` rebuilds the chain when the app's middleware changes.
    ``direct`` is the handler itself when nothing stands between the runner and it (an
    async function, no middleware, no serializer): the runner then awaits it without
    a stage frame, the common case made cheap.
    """

    __slots__ = (
        "chain",
        "direct",
        "inline_ok",
        "needs_runner",
        "serializer",
        "slots",
        "threaded",
        "tool",
        "validate",
    )

    def __init__(self, tool: Tool, app_middleware: Iterable[Middleware]) -> None:
        self.tool = tool
        self.validate = input_validator(tool.name, tool.inputs)
        self.slots = Slots(tool.name, *tool.concurrency) if tool.concurrency else None
        self.serializer = Slots(tool.name, 1, None) if tool.verb is Verb.MUTATION else None
        #: whether the innermost stage reads ``current_runner`` (threads, generators, the serializer)
        self.needs_runner = self.serializer is not None or tool.kind is not HandlerKind.ASYNC
        #: whether the body runs in a thread (admitted by the app's thread pool)
        self.threaded = tool.runs_in_thread
        #: whether a call may run in the task that awaits it (a timeout or a thread needs a worker)
        self.inline_ok = tool.timeout is None and not self.threaded
        self.compose(app_middleware)

    def compose(self, app_middleware: Iterable[Middleware]) -> None:
        """Rebuild the chain: the app's middleware (outermost), the tool's, the handler stage."""
        middleware = [*app_middleware, *self.tool.middleware]
        self.chain: Stage = compose(middleware, handler_stage(self.tool, self.serializer))
        self.direct: Callable[[Any, Context], Coroutine[Any, Any, Any]] | None = (
            self.tool.handler if not middleware and not self.needs_runner else None
        )

    @property
    def task_name(self) -> str:
        """The name of a worker task running a call (made when one is spawned: a registration holds no copy)."""
        return f"fusion-nb call {self.tool.name}"

    @property
    def limits(self) -> tuple[Slots, ...]:
        """The tool's slot pools (for stats and leak checks)."""
        return tuple(slots for slots in (self.slots, self.serializer) if slots is not None)


def handler_stage(tool: Tool, serializer: Slots | None) -> Stage:
    """The innermost stage: a last abort gate, the mutation serializer, the handler."""
    if serializer is None and tool.kind is HandlerKind.ASYNC:
        fn = tool.handler

        async def plain(ctx: Context) -> Any:  # the common case, one frame
            ctx.signal.raise_if_aborted()
            return await fn(ctx.input, ctx)

        return plain
    run = make_runner(tool.handler, tool.name)

    async def stage(ctx: Context) -> Any:
        ctx.signal.raise_if_aborted()
        runner = current_runner.get()
        if serializer is not None and not runner.holds(serializer):  # once per call, not per round
            await runner.hold(serializer)
            gate = runner.settings.gate  # a mutation passes the gate in its serializer's order
            if gate is not None and gate.closed:
                await gate.passage()
            ctx.signal.raise_if_aborted()
        return await run(ctx.input, ctx, runner.call.report, runner.in_thread)

    return stage


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What every runner of an app shares: the app, where detached work and threads go, and its rules."""

    app: App
    workers: Workers
    threads: ThreadPool
    grace: float
    max_rounds: int
    register: Callable[[Call], None]  # (also tells the app's ``on_call`` listeners)
    forget: Callable[[Call], None]
    gate: Gate | None = None  # the host's: calls wait before their body while its own work runs


class Deferred(Exception):
    """The channel deferred: the call ends input-required, carrying its continuation."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload


class Runner:
    """Drives one call (see the module docstring); owns the call's slots and its worker.

    Made from the call's request, its tool's plan and the app's settings; the
    constructor validates the request (``ToolError`` when it cannot run) and leaves a
    complete ``Call``. Each in-flight call holds one runner: what most calls never
    use (a queue turn, held slots, rounds) stays ``None`` until it is needed.
    """

    __slots__ = (
        "_cut",
        "_held",
        "_turn",
        "_worker",
        "call",
        "channel",
        "ctx",
        "plan",
        "resume",
        "rounds",
        "settings",
    )

    def __init__(self, call_id: str, request: CallRequest, plan: ToolPlan, settings: RunSettings) -> None:
        value = plan.validate(request.arguments)
        self.rounds: Rounds | None = None
        self.resume: tuple[InputRequest, InputResponse] | None = None
        if request.resume is not None:
            rounds, pending = restore(plan.tool.name, request.arguments, request.resume)
            self.rounds = rounds
            self.resume = (pending, as_response(pending, request.response) or InputResponse(CANCEL))
        app = settings.app
        factory = app.context_factory
        state = dict(factory(request.request_info)) if factory is not None else None
        self.plan = plan
        self.settings = settings
        self.channel: InputChannel = request.channel if request.channel is not None else app.input_channel
        call = self.call = Call(call_id, plan.tool, request, self)
        self.ctx = Context(call, app, state, value)
        self._held: list[Slots] | None = None
        self._turn: tuple[Slots, Event] | None = None
        self._worker: Cancellable | None = None
        self._cut: Interruptible | None = None

    # -- starting ----------------------------------------------------------------------
    def _begin(self) -> bool:
        """Take a slot or a queue place (in call order), register and announce the call."""
        plan, call = self.plan, self.call
        try:
            if plan.threaded:
                self.settings.threads.admit(plan.tool.name)
            if plan.slots is not None:
                turn = plan.slots.reserve()
                if turn is None:
                    self._held = [plan.slots]
                else:
                    self._turn = (plan.slots, turn)
        except ToolError as error:
            call.settle(CallResult.failure(error), FAILED)
            call.mark_stopped()
            return False
        self.settings.register(call)
        return True

    def start_detached(self) -> None:
        """Run the call in a task of its own (with its timer, when the tool has a timeout)."""
        if self._begin():
            timed = self.plan.tool.timeout is not None
            # what runs lets nothing but cancellation escape (no guard frame); a task group might
            work = self._timed_work if timed else self._work
            self._worker = self.settings.workers.spawn(work, self.plan.task_name, self, timed)

    async def run_inline(self) -> CallResult:
        """Run the call in the awaiting task (no detached worker, no extra loop turns); its result.

        For callers whose answer goes nowhere once they are cancelled (an MCP request:
        the SDK sends no response to a cancelled request). An abort from elsewhere
        cancels the pipeline (the backend's ``Interruptible``: taken back as it exits); the
        answer then follows the handler's unwinding. Cancelling the awaiting task
        aborts the call, as for ``Call.wait``.
        """
        call = self.call
        if self._begin():
            cut = self._cut = interruptible()
            try:
                with cut:
                    await self._work()
            except BaseException:
                call.caller_gone()  # the caller's own cancellation (or a crash of ours): settled once
                raise
            finally:
                self._cut = None
                if self._held is not None or self._turn is not None:  # (``_work`` released them unless it raised)
                    self._release_all()
                call.mark_stopped()
        result = call.result
        assert result is not None  # ``_work`` settles, or the abort that ended it did
        return result

    # -- aborting ------------------------------------------------------------------------
    def abort(self) -> None:
        """The call was aborted (and has settled): stop its body; cleanup goes on in the background."""
        self._leave_queue()
        if self._cut is not None:
            self._cut.cancel()
        worker = self._worker
        if worker is not None and self.settings.workers.running(worker):
            worker.cancel()
            self.settings.workers.spawn(self._watch_cleanup, name=f"fusion-nb cleanup watch {self.plan.tool.name}")

    def settled(self, call: Call) -> None:
        """The call has its result: the app forgets it."""
        self.settings.forget(call)

    async def _watch_cleanup(self) -> None:
        """After ``grace``, say once that the aborted body is still cleaning up (never interrupt it)."""
        with anyio.move_on_after(self.settings.grace):
            await self.call.wait_stopped()  # (``worker_finished`` marks it stopped)
            return
        log.warning(
            "tool %s (call %s) is still cleaning up %gs after it was aborted; its slots stay held until its body ends",
            self.plan.tool.name,
            self.call.id,
            self.settings.grace,
        )

    # -- slots -------------------------------------------------------------------------
    def holds(self, slots: Slots) -> bool:
        """Whether this call holds a slot of ``slots``."""
        return self._held is not None and slots in self._held

    async def hold(self, slots: Slots) -> None:
        """Wait (FIFO) for a slot of ``slots``; it is released when the body has stopped."""
        await slots.acquire()
        self._take(slots)

    def _take(self, slots: Slots) -> None:
        if self._held is None:
            self._held = [slots]
        else:
            self._held.append(slots)

    def _leave_queue(self) -> None:
        if self._turn is not None:
            slots, turn = self._turn
            self._turn = None
            slots.leave(turn)

    def _release_all(self) -> None:
        if self._turn is not None:
            self._leave_queue()
        held = self._held
        if held is not None:
            self._held = None
            while held:
                held.pop().release()

    def worker_finished(self) -> None:
        """The call's detached task has ended (``Workers`` says so): its slots go back, its body has stopped."""
        self._release_all()
        self.call.mark_stopped()

    def in_thread(self, func: Callable[[], T]) -> Awaitable[T]:
        """Run ``func()`` in a thread of the app's pool; the await lasts as long as the thread."""
        return self.settings.threads.run(func, self.plan.tool.name, self.call.signal)

    # -- the pipeline ------------------------------------------------------------------
    async def _timed_work(self) -> None:
        """``_work`` with the tool's timer beside it (the timer aborts the call with TIMEOUT)."""
        timeout = self.plan.tool.timeout
        assert timeout is not None
        async with anyio.create_task_group() as group:
            group.start_soon(self._timer, timeout)
            try:
                await self._work()
            finally:
                group.cancel_scope.cancel()

    async def _work(self) -> None:
        """Queue, the pipeline, presenting, settling: one frame for the whole call.

        Whatever the handler raises, the call settles here (or was settled by its
        abort). Kept to few locals: every in-flight call holds this frame, so the
        rarer paths (a queue turn, input rounds, an exception) live in methods of their own.
        """
        try:
            if self._turn is not None:
                await self._wait_turn()
            gate = self.settings.gate
            if gate is not None and gate.closed and self.plan.serializer is None:
                await gate.passage()  # (a mutation passes it behind its serializer: see ``handler_stage``)
            value = await self.body()
            if type(value) is InputRequest:
                value = await self._pipeline(value)
            result = self._present(value)
        except BaseException as exc:
            outcome = self._outcome(exc)
            if outcome is None:
                raise  # ours (the call has settled) or the awaiting caller's (its waiter settles it)
            if outcome is _UNWOUND:
                return
            result = outcome
        self._finish(result)

    def body(self) -> Coroutine[Any, Any, Any]:
        """The run's first step: the call is running; the handler's coroutine, or the pipeline's.

        The handler is awaited directly (no stage frame) when nothing stands between the
        runner and it and no input rounds are under way; an aborted call stops here.
        """
        self.call.mark(RUNNING)
        plan = self.plan
        if plan.direct is not None and self.rounds is None and current_rounds.get() is None:
            if self.call.aborted:
                self.call.signal.raise_if_aborted()
            ctx = self.ctx
            return plan.direct(ctx.input, ctx)
        return self._pipeline(None)

    def _finish(self, result: CallResult) -> None:
        if self._held is not None or self._turn is not None:
            self._release_all()  # the body has stopped: the next caller finds its slot free
        self.call.settle(result, _status_of(result) if result.is_error else DONE)

    async def _wait_turn(self) -> None:
        queued = self._turn
        assert queued is not None
        await queued[1].wait()
        if self._turn is not queued:  # aborted as the slot arrived; abort() passed it on
            raise Aborted("cancelled")
        self._turn = None
        self._take(queued[0])

    async def _pipeline(self, asked: InputRequest | None) -> Any:
        """The chain, round after round of input, to the handler's last value.

        ``asked``: the first input request, when the direct path already ran the
        handler once (then the rounds start here).
        """
        plan, ctx, rounds, tool = self.plan, self.ctx, self.rounds, self.plan.tool
        chain, direct = plan.chain, plan.direct
        runner_token = current_runner.set(self) if plan.needs_runner else None
        # this call's answers (none: also for a call nested in one that has some)
        rounds_token = current_rounds.set(rounds) if rounds is not None or current_rounds.get() is not None else None
        try:
            if self.resume is not None:
                request, response = self.resume
                assert rounds is not None  # a resumed call always carries its rounds
                rounds.record(request, checked_answer(tool.name, request, response, False))
            value: Any = asked
            while True:
                if value is None:
                    if direct is not None:
                        if self.call.aborted:
                            self.call.signal.raise_if_aborted()
                        value = await direct(ctx.input, ctx)
                    else:
                        value = await chain(ctx)
                    if type(value) is not InputRequest:
                        return value
                if rounds is None:  # the first input request of this call: from now on it has answers
                    rounds = self.rounds = Rounds()
                    if rounds_token is None:
                        rounds_token = current_rounds.set(rounds)
                    else:
                        current_rounds.set(rounds)
                else:
                    refused = rounds.refusal(value)
                    if refused is not None:  # a person's "no" ends the question, on every channel
                        raise refused_again(tool.name, value.message, refused)
                rounds.record(*await self._collect(value, rounds))
                value = None
        finally:
            if rounds_token is not None:
                current_rounds.reset(rounds_token)
            if runner_token is not None:
                current_runner.reset(runner_token)

    def _outcome(self, exc: BaseException) -> CallResult | None:
        """What an exception out of the pipeline means: a result, ``None`` to re-raise it, or ``_UNWOUND``."""
        if isinstance(exc, ToolError):
            return CallResult.failure(exc)
        if isinstance(exc, Deferred):
            return CallResult(input_required=exc.payload)
        backend = current_backend()
        if backend.is_cancellation(exc) and not backend.is_foreign_cancellation(exc):
            return None
        if self.call.aborted:
            if not isinstance(exc, Aborted) and not backend.is_cancellation(exc):
                log.error(
                    "tool %s (call %s) raised during its cleanup after an abort",
                    self.plan.tool.name,
                    self.call.id,
                    exc_info=exc,
                )
            return _UNWOUND
        return self._crashed(exc)

    def _crashed(self, exc: BaseException) -> CallResult:
        """An unexpected exception: logged with an id; the client gets the class and the id."""
        tool, error_id = self.plan.tool, new_error_id()
        exc = describe_crash(exc)  # a sync body's SystemExit is named as such, not as its carrier
        if isinstance(exc, Aborted):
            log.error(
                "tool %s (call %s) raised Aborted although the call was not aborted (error id %s)",
                tool.name,
                self.call.id,
                error_id,
                exc_info=exc,
                extra={"call_id": self.call.id},
            )
        else:
            log.error(
                "tool %s (call %s) failed (error id %s)",
                tool.name,
                self.call.id,
                error_id,
                exc_info=exc,
                extra={"call_id": self.call.id},  # a host showing the call's traceback itself can tell
            )
        error = internal_error(tool.name, exc, error_id)
        return CallResult.failure(error, exception=exc, error_id=error_id)

    async def _timer(self, seconds: float) -> None:
        await anyio.sleep(seconds)
        self.call.cancel(TIMEOUT)

    async def _collect(self, request: InputRequest, rounds: Rounds) -> tuple[InputRequest, InputResponse]:
        """Ask the channel for the answers, re-asking invalid ones where it can: the request answered, and how.

        The parts of ``require_input.all`` are one round: each asked in turn, or, when the
        channel defers to its client, all of them deferred together (each one it can answer),
        or asked together of a channel that ``asks_together`` (an MCP task's ``inputRequests``).
        Of ``require_input.first`` the first part the channel can answer is the round.
        """
        if request.kind == "first":
            for index, part in enumerate(request.parts):
                response = await self._ask(part, rounds, part, counted=index > 0, optional=True)
                if response is not None:
                    return part, response
            raise no_way_to_ask(self.plan.tool.name, request.parts[0].message, request.parts[0].kind)
        if not request.parts or self.channel.asks_together:
            return request, await self._ask(request, rounds, request)
        answers = {}
        for index, part in enumerate(request.parts):
            answers[part.key] = await self._ask(part, rounds, request, counted=index > 0)
        return request, InputResponse(ACCEPT, answers)

    @overload
    async def _ask(
        self, request: InputRequest, rounds: Rounds, whole: InputRequest, counted: bool = False
    ) -> InputResponse: ...
    @overload
    async def _ask(
        self, request: InputRequest, rounds: Rounds, whole: InputRequest, counted: bool, optional: bool
    ) -> InputResponse | None: ...
    async def _ask(
        self, request: InputRequest, rounds: Rounds, whole: InputRequest, counted: bool = False, optional: bool = False
    ) -> InputResponse | None:
        tool, call, channel = self.plan.tool, self.call, self.channel
        limit = tool.max_rounds or self.settings.max_rounds
        problems: tuple[str, ...] = ()
        while True:
            if not counted:
                rounds.round += 1
                if rounds.round > limit:
                    raise too_many_rounds(tool.name, limit)
            counted = False
            call.mark(WAITING, request)
            response = await channel.ask(InputQuestion(request, tool.name, call.id, call.signal, problems))
            call.mark(RUNNING)
            if response is None:
                if optional:
                    return None
                raise no_way_to_ask(tool.name, request.message, request.kind)
            if response is DEFER:
                for part in whole.parts:  # every part goes to the client at once: each must be one it answers
                    if await channel.ask(InputQuestion(part, tool.name, call.id, call.signal)) is None:
                        raise no_way_to_ask(tool.name, part.message, part.kind)
                payload = {"request": whole, "continuation": continuation(tool.name, call.arguments, rounds, whole)}
                raise Deferred(payload)
            try:
                return checked_answer(tool.name, request, response, channel.can_reask)
            except Reask as reask:
                problems = tuple(reask.problems)

    def _present(self, value: Any) -> CallResult:
        """The handler's value as a result: presenter, output model, content (the one presentation seam)."""
        tool = self.plan.tool
        if tool.presenter is not None:
            value = tool.presenter(value)
        model = tool.output_model
        if model is not None:
            try:
                if not isinstance(value, model):
                    value = model.model_validate(value.model_dump() if hasattr(value, "model_dump") else value)
            except Exception as exc:
                raise ToolError(
                    INTERNAL_ERROR,
                    f'Tool "{tool.name}" returned a value that does not match its output model '
                    f"{model.__name__}: {exc.__class__.__name__}.",
                    recovery="This is a bug in the tool; report it to its author.",
                ) from None
        try:
            content, structured = present(value, self.settings.app.answer_limits)
        except (ValueError, RecursionError) as exc:
            if not isinstance(exc, RecursionError) and str(exc) != "Circular reference detected":
                raise
            raise ToolError(
                INTERNAL_ERROR,
                f'Tool "{tool.name}" returned a {type(value).__name__} that contains itself or is nested too deep, '
                "so it cannot be sent as JSON.",
                recovery="This is a bug in the tool; report it to its author.",
            ) from None
        return CallResult(value, content, structured)


#: ``_outcome``: the aborted call's body has unwound (it settled when it was aborted)
_UNWOUND = CallResult()


def _status_of(result: CallResult) -> CallStatus:
    """A dismissed question ends the call as cancelled (the person stopped it), any other error as failed."""
    if not result.is_error:
        return DONE
    return CANCELLED_STATUS if result.error is not None and result.error.code == CANCELLED else FAILED
