"""Running one call: queue, middleware, serializer, handler, input rounds; detached or inline.

A call runs *detached* (in a task of its own, so an abort settles it at once whatever
the handler does with its cancellation, while cleanup finishes in the background) or
*inline* (in the task that awaits it: no extra task, the MCP request path). Either
way the runner releases the call's slots only when its body has really stopped, and
settles the call exactly once, whatever the handler raises.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ._background import Detached, Event, Workers, is_cancellation, is_foreign_cancellation, new_event
from ._call import CANCELLED_STATUS, DONE, FAILED, RUNNING, WAITING, Call, CallStatus
from ._channel import DEFER, InputChannel
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
from ._handlers import make_runner
from ._interactive import (
    InputQuestion,
    InputRequest,
    InputResponse,
    Reask,
    Rounds,
    checked_answer,
    continuation,
    current_rounds,
)
from ._middleware import Middleware, Stage, compose
from ._present import present
from ._result import CallResult
from ._schema import input_validator
from ._slots import Slots
from ._streaming import ProgressEvent
from ._threads import ThreadPool, describe_crash

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
        "task_name",
        "threaded",
        "tool",
        "validate",
    )

    def __init__(self, tool: Tool, app_middleware: Iterable[Middleware]) -> None:
        self.tool = tool
        self.validate = input_validator(tool.name, tool.input_model)
        self.task_name = f"fusion-nb call {tool.name}"
        self.slots = Slots(tool.name, *tool.concurrency) if tool.concurrency else None
        self.serializer = Slots(tool.name, 1, None) if tool.verb == "mutation" else None
        #: whether the innermost stage reads ``current_runner`` (threads, generators, the serializer)
        self.needs_runner = self.serializer is not None or tool.kind != "async"
        #: whether the body runs in a thread (admitted by the app's thread pool)
        self.threaded = tool.runs_in_thread
        #: whether a call may run in the task that awaits it (a timeout or a thread needs a worker)
        self.inline_ok = tool.timeout is None and not self.threaded
        self.compose(app_middleware)

    def compose(self, app_middleware: Iterable[Middleware]) -> None:
        """Rebuild the chain: the app's middleware (outermost), the tool's, the handler stage."""
        middleware = [*app_middleware, *self.tool.middleware]
        self.chain: Stage = compose(middleware, handler_stage(self.tool, self.serializer))
        self.direct: Callable[[Any, Context], Awaitable[Any]] | None = (
            self.tool.handler if not middleware and not self.needs_runner else None
        )

    @property
    def limits(self) -> tuple[Slots, ...]:
        """The tool's slot pools (for stats and leak checks)."""
        return tuple(slots for slots in (self.slots, self.serializer) if slots is not None)


def handler_stage(tool: Tool, serializer: Slots | None) -> Stage:
    """The innermost stage: a last abort gate, the mutation serializer, the handler."""
    if serializer is None and tool.kind == "async":
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
            ctx.signal.raise_if_aborted()
        return await run(ctx.input, ctx, runner.call.report, runner.in_thread)

    return stage


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What every runner of an app shares: where detached work and threads go, and the app's rules."""

    workers: Workers
    threads: ThreadPool
    grace: float
    max_rounds: int
    register: Callable[[Call], None]  # (also tells the app's ``on_call`` listeners)
    forget: Callable[[Call], None]


class Deferred(Exception):
    """The channel deferred: the call ends input-required, carrying its continuation."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload


class Runner:
    """Drives one call (see the module docstring); owns the call's slots and its worker."""

    # No __slots__: what most calls never use stays a class-level default instead of
    # being set on every runner (a call's set-up cost is the engine's per-call cost).
    pending_inline = False
    _turn: tuple[Slots, Event] | None = None
    _worker: Detached | None = None
    _worker_done: Event | None = None
    _scope: anyio.CancelScope | None = None
    _inline_task: asyncio.Task[Any] | None = None
    _inline_cancelled = False

    def __init__(
        self,
        call_id: str,
        plan: ToolPlan,
        settings: RunSettings,
        app: App,
        args: Any,
        value: Any,
        state: dict[str, Any],
        channel: InputChannel,
        rounds: Rounds | None,
        resume: tuple[InputRequest, InputResponse] | None,
        on_progress: Callable[[ProgressEvent], None] | None,
    ) -> None:
        self.plan = plan
        self.settings = settings
        call = self.call = Call(call_id, plan.tool, None, args, self, on_progress, settings.forget)
        self.ctx = Context(call_id, plan.tool, app, call.signal, state, value)
        self.args = args
        self.channel = channel
        self.rounds = rounds
        self.resume = resume
        self._held: list[Slots] = []

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
                    self._held.append(plan.slots)
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
            # ``_work`` lets nothing but cancellation escape (no guard frame); a task group might
            self._worker = self.settings.workers.spawn(
                self._timed_work if timed else self._work, self.plan.task_name, self._worker_finished, timed
            )

    def defer_inline(self) -> None:
        """Run the call in the first task that awaits it; until then it holds nothing."""
        self.pending_inline = True

    async def run_inline(self) -> None:
        """Run the call in the awaiting task (no detached worker, no extra loop turns).

        For callers whose answer goes nowhere once they are cancelled (an MCP request:
        the SDK sends no response to a cancelled request). An abort from elsewhere
        cancels the pipeline; the answer then follows the handler's unwinding.
        """
        self.pending_inline = False
        if self.call.result is not None:
            self.call.mark_stopped()  # aborted before it ever ran
            return
        if not self._begin():
            return
        try:
            try:
                task = asyncio.current_task()
            except RuntimeError:  # no asyncio loop: trio
                with anyio.CancelScope() as scope:
                    self._scope = scope
                    await self._work()
                return
            # asyncio: one native cancel (as for detached calls), taken back before it leaves
            assert task is not None
            self._inline_task = task
            try:
                await self._work()
            except asyncio.CancelledError:
                if not self._inline_cancelled or task.uncancel() > 0:
                    raise  # the caller's own cancellation
                self._inline_cancelled = False
            finally:
                self._inline_task = None
                if self._inline_cancelled:  # the handler swallowed our cancel: balance the count
                    task.uncancel()
        finally:
            self._scope = None
            self._release_all()
            self.call.mark_stopped()

    # -- aborting ------------------------------------------------------------------------
    def abort(self) -> None:
        """The call was aborted (and has settled): stop its body; cleanup goes on in the background."""
        if self.pending_inline:  # never awaited, so it never ran
            self.call.mark_stopped()
        self.pending_inline = False
        self._leave_queue()
        if self._scope is not None:
            self._scope.cancel()
        elif self._inline_task is not None and self._inline_task is not asyncio.current_task():
            # (a call aborting itself needs no cancel: its gates see the signal, and a
            # cancel requested of the running task could not be taken back on 3.11)
            self._inline_cancelled = True
            self._inline_task.cancel()
        worker = self._worker
        if worker is not None and not worker.done:
            worker.cancel()
            self._worker_done = new_event()
            self.settings.workers.spawn(self._watch_cleanup, name=f"fusion-nb cleanup watch {self.plan.tool.name}")

    async def _watch_cleanup(self) -> None:
        """After ``grace``, say once that the aborted body is still cleaning up (never interrupt it)."""
        done = self._worker_done
        if done is None:
            return
        with anyio.move_on_after(self.settings.grace):
            await done.wait()
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
        return slots in self._held

    async def hold(self, slots: Slots) -> None:
        """Wait (FIFO) for a slot of ``slots``; it is released when the body has stopped."""
        await slots.acquire()
        self._held.append(slots)

    def _leave_queue(self) -> None:
        if self._turn is not None:
            slots, turn = self._turn
            self._turn = None
            slots.leave(turn)

    def _release_all(self) -> None:
        if self._turn is not None:
            self._leave_queue()
        while self._held:
            self._held.pop().release()

    def _worker_finished(self) -> None:
        self._release_all()
        self.call.mark_stopped()
        if self._worker_done is not None:
            self._worker_done.set()

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
        """Queue, rounds of the chain, presenting, settling: one frame for the whole call.

        Whatever the handler raises, the call settles here (or was settled by its abort).
        """
        call, plan = self.call, self.plan
        tool = plan.tool
        try:
            queued = self._turn
            if queued is not None:
                await queued[1].wait()
                if self._turn is not queued:  # aborted as the slot arrived; abort() passed it on
                    raise Aborted("cancelled")
                self._turn = None
                self._held.append(queued[0])
            call.mark(RUNNING)
            ctx, chain, direct, rounds = self.ctx, plan.chain, plan.direct, self.rounds
            runner_token = current_runner.set(self) if plan.needs_runner else None
            # this call's answers (none: also for a call nested in one that has some)
            rounds_token = (
                current_rounds.set(rounds) if rounds is not None or current_rounds.get() is not None else None
            )
            try:
                if self.resume is not None:
                    request, response = self.resume
                    assert rounds is not None  # a resumed call always carries its rounds
                    rounds.record(request, checked_answer(tool.name, request, response, False))
                while True:
                    if direct is not None:
                        if ctx.signal.aborted:
                            ctx.signal.raise_if_aborted()
                        value = await direct(ctx.input, ctx)
                    else:
                        value = await chain(ctx)
                    if type(value) is not InputRequest:
                        break
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
                    rounds.record(value, await self._collect(value, rounds))
            finally:
                if rounds_token is not None:
                    current_rounds.reset(rounds_token)
                if runner_token is not None:
                    current_runner.reset(runner_token)
            if tool.presenter is not None:
                value = tool.presenter(value)
            result = self._present(value)
        except ToolError as error:
            result = CallResult.failure(error)
        except Deferred as deferred:
            result = CallResult(input_required=deferred.payload)
        except BaseException as exc:
            if is_cancellation(exc) and not is_foreign_cancellation(exc):
                raise  # ours (the call has settled) or the awaiting caller's (``Call.wait`` settles it)
            if call.signal.aborted:
                if not isinstance(exc, Aborted) and not is_cancellation(exc):
                    log.error(
                        "tool %s (call %s) raised during its cleanup after an abort",
                        tool.name,
                        call.id,
                        exc_info=exc,
                    )
                return
            result = self._crashed(exc)
        self._release_all()  # the body has stopped: the next caller finds its slot free
        call.settle(result, _status_of(result))

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
            )
        else:
            log.error("tool %s (call %s) failed (error id %s)", tool.name, self.call.id, error_id, exc_info=exc)
        error = internal_error(tool.name, exc, error_id)
        return CallResult.failure(error, exception=exc, error_id=error_id)

    async def _timer(self, seconds: float) -> None:
        await anyio.sleep(seconds)
        self.call.cancel(TIMEOUT)

    async def _collect(self, request: InputRequest, rounds: Rounds) -> InputResponse:
        """Ask the channel for the answers, re-asking invalid ones where it can."""
        tool, call, channel = self.plan.tool, self.call, self.channel
        limit = tool.max_rounds or self.settings.max_rounds
        problems: tuple[str, ...] = ()
        while True:
            rounds.round += 1
            if rounds.round > limit:
                raise too_many_rounds(tool.name, limit)
            call.mark(WAITING, request)
            response = await channel.ask(InputQuestion(request, tool.name, call.id, call.signal, problems))
            call.mark(RUNNING)
            if response is None:
                raise no_way_to_ask(tool.name, request.message)
            if response is DEFER:
                raise Deferred(
                    {"request": request, "continuation": continuation(tool.name, self.args, rounds, request)}
                )
            try:
                return checked_answer(tool.name, request, response, channel.can_reask)
            except Reask as reask:
                problems = tuple(reask.problems)

    def _present(self, value: Any) -> CallResult:
        tool = self.plan.tool
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
        content, structured = present(value)
        return CallResult(value, content, structured)


def _status_of(result: CallResult) -> CallStatus:
    """A dismissed question ends the call as cancelled (the person stopped it), any other error as failed."""
    if not result.is_error:
        return DONE
    return CANCELLED_STATUS if result.error is not None and result.error.code == CANCELLED else FAILED
