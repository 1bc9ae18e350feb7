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

from ._background import Detached, Workers, is_cancellation, is_foreign_cancellation, on_asyncio
from ._call import Call, CallStatus
from ._channel import DEFER, InputChannel
from ._context import Context
from ._errors import INTERNAL_ERROR, TIMEOUT, Aborted, ToolError, internal_error, new_error_id, no_way_to_ask
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
from ._slots import Slots
from ._streaming import ProgressEvent
from ._threads import ThreadPool

if TYPE_CHECKING:
    from ._app import App
    from ._tool import Tool

log = logging.getLogger("fusion_nb")
T = TypeVar("T")

#: the runner of the call whose pipeline is running in this context
current_runner: contextvars.ContextVar[Runner] = contextvars.ContextVar("fusion_nb_runner")


class ToolPlan:
    """How an app runs one registered tool: its composed chain and its limits.

    The limits (concurrency slots, mutation serializer) live as long as the
    registration; ``compose`` rebuilds the chain when the app's middleware changes.
    """

    __slots__ = ("chain", "serializer", "slots", "tool")

    def __init__(self, tool: Tool, app_middleware: Iterable[Middleware]) -> None:
        self.tool = tool
        self.slots = Slots(tool.name, *tool.concurrency) if tool.concurrency else None
        self.serializer = Slots(tool.name, 1, None) if tool.verb == "mutation" else None
        self.chain: Stage = compose([*app_middleware, *tool.middleware], handler_stage(tool, self.serializer))

    def compose(self, app_middleware: Iterable[Middleware]) -> None:
        """Rebuild the chain: the app's middleware (outermost), the tool's, the handler stage."""
        self.chain = compose([*app_middleware, *self.tool.middleware], handler_stage(self.tool, self.serializer))

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
    register: Callable[[Call], None]
    forget: Callable[[Call], None]
    announce: Callable[[Call], None]


class Deferred(Exception):
    """The channel deferred: the call ends input-required, carrying its continuation."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload


class Runner:
    """Drives one call (see the module docstring); owns the call's slots and its worker."""

    __slots__ = (
        "_held",
        "_inline_cancelled",
        "_inline_task",
        "_scope",
        "_turn",
        "_worker",
        "_worker_done",
        "args",
        "call",
        "channel",
        "ctx",
        "pending_inline",
        "plan",
        "resume",
        "rounds",
        "settings",
    )

    def __init__(
        self,
        call_id: str,
        plan: ToolPlan,
        settings: RunSettings,
        *,
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
        self.call = Call(
            call_id, plan.tool, arguments=args, driver=self, on_progress=on_progress, on_settle=settings.forget
        )
        self.ctx = Context(self.call.id, plan.tool, app, self.call.signal, state, value)
        self.args = args
        self.channel = channel
        self.rounds = rounds
        self.resume = resume
        self.pending_inline = False
        self._held: list[Slots] = []
        self._turn: tuple[Slots, anyio.Event] | None = None
        self._worker: Detached | None = None
        self._worker_done: anyio.Event | None = None
        self._scope: anyio.CancelScope | None = None
        self._inline_task: asyncio.Task[Any] | None = None
        self._inline_cancelled = False

    # -- starting ----------------------------------------------------------------------
    def _begin(self) -> bool:
        """Take a slot or a queue place (in call order), register and announce the call."""
        tool, call = self.plan.tool, self.call
        try:
            if tool.runs_in_thread:
                self.settings.threads.admit(tool.name)
            if self.plan.slots is not None:
                turn = self.plan.slots.reserve()
                if turn is None:
                    self._held.append(self.plan.slots)
                else:
                    self._turn = (self.plan.slots, turn)
        except ToolError as error:
            call.settle(CallResult.failure(error), CallStatus.FAILED)
            call.mark_stopped()
            return False
        self.settings.register(call)
        self.settings.announce(call)
        return True

    def start_detached(self) -> None:
        """Run the call in a task of its own."""
        if self._begin():
            self._worker = self.settings.workers.spawn(
                self._work, name=f"fusion-nb call {self.plan.tool.name}", on_done=self._worker_finished
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
        if self.call.settled:
            self.call.mark_stopped()  # aborted before it ever ran
            return
        if not self._begin():
            return
        try:
            if not on_asyncio():
                with anyio.CancelScope() as scope:
                    self._scope = scope
                    await self._work()
                return
            # asyncio: one native cancel (as for detached calls), taken back before it leaves
            task = self._inline_task = asyncio.current_task()
            assert task is not None
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
            self._worker_done = anyio.Event()
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
    async def _work(self) -> None:
        call, tool = self.call, self.plan.tool
        try:
            if tool.timeout is None:
                value = await self._pipeline()
            else:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._timer, tool.timeout)
                    value = await self._pipeline()
                    group.cancel_scope.cancel()
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
        call.settle(result, CallStatus.FAILED if result.is_error else CallStatus.DONE)

    def _crashed(self, exc: BaseException) -> CallResult:
        """An unexpected exception: logged with an id; the client gets the class and the id."""
        tool, error_id = self.plan.tool, new_error_id()
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

    async def _pipeline(self) -> Any:
        queued = self._turn
        if queued is not None:
            await queued[1].wait()
            if self._turn is not queued:  # aborted as the slot arrived; abort() passed it on
                raise Aborted("cancelled")
            self._turn = None
            self._held.append(queued[0])
        self.call.mark(CallStatus.RUNNING)
        rounds, ctx, chain = self.rounds, self.ctx, self.plan.chain
        runner_token = current_runner.set(self)
        rounds_token = current_rounds.set(rounds)  # this call's answers, also for a call nested in another
        try:
            if self.resume is not None:
                request, response = self.resume
                assert rounds is not None  # a resumed call always carries its rounds
                rounds.record(request, checked_answer(self.plan.tool.name, request, response, False))
            while True:
                value = await chain(ctx)
                if type(value) is not InputRequest:
                    return value
                if rounds is None:  # the first input request of this call: from now on it has answers
                    rounds = self.rounds = Rounds()
                    current_rounds.set(rounds)
                rounds.record(value, await self._collect(value, rounds))
        finally:
            current_rounds.reset(rounds_token)
            current_runner.reset(runner_token)

    async def _collect(self, request: InputRequest, rounds: Rounds) -> InputResponse:
        """Ask the channel for the answers, re-asking invalid ones where it can."""
        tool, call, channel = self.plan.tool, self.call, self.channel
        limit = tool.max_rounds or self.settings.max_rounds
        problems: tuple[str, ...] = ()
        while True:
            rounds.round += 1
            if rounds.round > limit:
                raise too_many_rounds(tool.name, limit)
            call.mark(CallStatus.WAITING, request)
            response = await channel.ask(InputQuestion(request, tool.name, call.id, call.signal, problems))
            call.mark(CallStatus.RUNNING)
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
        return CallResult(value=value, content=content, structured_content=structured)
