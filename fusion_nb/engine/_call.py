"""One in-flight call: its signal, its status, and the result it settles with.

The pipeline (queue, middleware, serializer, handler) runs in a detached worker
task so that an abort settles the call at once, whatever the handler does with
its cancellation; the worker's cleanup finishes in the background, and a reaper
releases the call's slots if cleanup outlives the app's grace period.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from .ask import validate_form
from .background import Detached, on_asyncio
from .channel import DEFER, InputChannel
from .context import Context
from .errors import (
    CANCELLED,
    ELICITATION_ROUNDS_EXCEEDED,
    ELICITATION_UNSUPPORTED,
    INTERNAL_ERROR,
    INVALID_ANSWER,
    TIMEOUT,
    Aborted,
    ToolError,
)
from .interactive import InputRequest, InputResponse, Rounds, _rounds, continuation
from .present import present
from .result import CallResult
from .signal import AbortSignal
from .slots import Slots
from .streaming import ProgressEvent

if TYPE_CHECKING:
    from .app import Fusion
    from .tool import Tool

log = logging.getLogger("fusion_nb")

#: Status values, in the order a call may pass through them.
QUEUED, RUNNING, WAITING, DONE, FAILED, CANCELLED_STATUS, TIMED_OUT = (
    "queued",
    "running",
    "waiting",
    "done",
    "failed",
    "cancelled",
    "timed out",
)
_FINAL_STATUS = {CANCELLED: CANCELLED_STATUS, TIMEOUT: TIMED_OUT}


class Call:
    """Handle of one call: ``await call.wait()``, ``call.cancel()``, ``call.status``.

    Listeners added with ``watch(fn)`` get ``fn(call)`` after every status or
    progress change (views read the call; they coalesce as they like).
    """

    __slots__ = (
        "_held",
        "_inline",
        "_inline_cancelled",
        "_inline_task",
        "_last_percent",
        "_listeners",
        "_on_progress",
        "_resume",
        "_scope",
        "_settled",
        "_turn",
        "_worker",
        "_worker_done",
        "app",
        "args",
        "channel",
        "ctx",
        "id",
        "progress",
        "request",
        "result",
        "rounds",
        "signal",
        "started_at",
        "status",
        "tool",
    )

    def __init__(
        self, app: Fusion, tool: Tool | None, call_id: str, on_progress: Callable[[ProgressEvent], None] | None
    ) -> None:
        self.app = app
        self.tool = tool
        self.id = call_id
        self.signal = AbortSignal()
        self.status = QUEUED
        #: ``time.monotonic()`` when the call was made (views show elapsed time from it)
        self.started_at = time.monotonic()
        self.progress: ProgressEvent | None = None
        self.result: CallResult | None = None
        #: the handler's context while the call runs (``None`` once settled)
        self.ctx: Context | None = None
        self._settled: anyio.Event | None = None  # made when somebody waits
        self._held: list[Slots] = []
        self._worker: Detached | None = None
        self._worker_done: anyio.Event | None = None
        self._last_percent = -1.0
        self._on_progress = on_progress
        self._listeners: list[Callable[[Call], None]] = []
        self.args: Any = None
        self._inline = False  # runs in the task that waits for it (see ``_run_inline``)
        self._scope: anyio.CancelScope | None = None
        self._inline_task: asyncio.Task | None = None
        self._inline_cancelled = False
        self._turn: tuple[Slots, anyio.Event] | None = None
        self.channel: InputChannel | None = None
        self.rounds = Rounds()
        self._resume: tuple[InputRequest, InputResponse] | None = None
        #: the input request being answered right now (views render it)
        self.request: InputRequest | None = None

    # -- observing -------------------------------------------------------------------
    @property
    def settled(self) -> bool:
        return self.result is not None

    def watch(self, listener: Callable[[Call], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _notify(self) -> None:
        if not self._listeners:
            return
        for listener in list(self._listeners):  # listeners may unsubscribe while notified
            try:
                listener(self)
            except Exception:  # a broken view must not break the call
                log.exception("fusion-nb call listener failed")

    def set_status(self, status: str) -> None:
        if self.result is None and status != self.status:
            self.status = status
            self._notify()

    def offer_progress(self, event: ProgressEvent) -> None:
        """Forward progress that does not go backwards (equal values pass: new message)."""
        percent = event.percent
        if self.result is not None or percent < self._last_percent or percent != percent:
            return
        self._last_percent = percent
        self.progress = event
        if self._on_progress is not None:
            try:
                self._on_progress(event)
            except Exception:
                log.exception("fusion-nb on_progress listener failed")
        if self._listeners:
            self._notify()

    # -- settling --------------------------------------------------------------------
    async def wait(self) -> CallResult:
        """The result; cancelling the task that waits aborts the call."""
        if self.result is None:
            try:
                if self._inline:
                    await self._run_inline()
                else:
                    if self._settled is None:
                        self._settled = anyio.Event()
                    await self._settled.wait()
            except BaseException:
                self.cancel(CANCELLED)
                raise
        assert self.result is not None
        return self.result

    async def _run_inline(self) -> None:
        """Run the pipeline in the waiting task: no detached worker, no extra loop turns.

        For callers whose answer goes nowhere once they are cancelled (an MCP request:
        the SDK sends no response to a cancelled request). An abort from elsewhere
        cancels the pipeline; the answer then follows the handler's unwinding.
        """
        self._inline = False
        if not on_asyncio():
            with anyio.CancelScope() as scope:
                self._scope = scope
                try:
                    await self._work()
                finally:
                    self._scope = None
            return
        # asyncio: one native cancel (as for detached calls), taken back before it leaves
        task = self._inline_task = asyncio.current_task()
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

    def cancel(self, reason: str = CANCELLED) -> bool:
        """Abort the call: it settles now; its handler is cancelled and cleans up in the background."""
        if self.result is not None:
            return False
        self.signal.abort(reason)
        self._leave_queue()
        self._settle(
            CallResult.failure(
                abort_error(self.tool.name if self.tool else "?", reason, self.tool.timeout if self.tool else None)
            ),
            _FINAL_STATUS.get(reason, CANCELLED_STATUS),
        )
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
            self.app._spawn(self._reap, name=f"fusion-nb reaper {self.tool.name}")
        return True

    def _settle(self, result: CallResult, status: str) -> None:
        if self.result is not None:
            return
        self.result = result
        self.status = status
        self.ctx = None  # the context points back at the call: no cycle outlives it (less GC)
        if self._settled is not None:
            self._settled.set()
        self.app._forget(self)
        self._notify()

    # -- the worker ------------------------------------------------------------------
    def _start(self) -> None:
        self._worker = self.app._spawn(
            self._work, name=f"fusion-nb call {self.tool.name}", on_done=self._worker_finished
        )

    def _worker_finished(self) -> None:
        self._release_all()
        if self._worker_done is not None:
            self._worker_done.set()

    async def _reap(self) -> None:
        with anyio.move_on_after(self.app.grace):
            await self._worker_done.wait()
        if self._worker is not None and not self._worker.done:
            log.warning(
                "tool %s is still cleaning up %gs after its call was aborted; its slots are released and the task is abandoned",
                self.tool.name,
                self.app.grace,
            )
            self._worker.cancel()
            self._release_all()

    async def hold(self, slots: Slots) -> None:
        """Wait for a slot of ``slots``; it is released when the worker ends."""
        await slots.acquire()
        self._held.append(slots)

    def queue(self, slots: Slots) -> None:
        """Take a slot or a queue place now, in call order (``SERVER_BUSY`` if full)."""
        turn = slots.reserve()
        if turn is None:
            self._held.append(slots)
        else:
            self._turn = (slots, turn)

    def _leave_queue(self) -> None:
        if self._turn is not None:
            slots, turn = self._turn
            self._turn = None
            slots.leave(turn)

    def _release_all(self) -> None:
        self._leave_queue()
        while self._held:
            self._held.pop().release()

    async def _work(self) -> None:
        tool = self.tool
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
        except _Deferred as deferred:
            result = CallResult(input_required=deferred.payload)
        except Aborted:
            return
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            if self.signal.aborted:
                return
            log.exception("tool %s failed", tool.name)
            error = internal_error(tool.name, exc)
            error.__cause__ = exc  # for hosts that show the original traceback (the notebook)
            result = CallResult.failure(error)
        finally:
            self._release_all()
        self._settle(result, FAILED if result.is_error else DONE)

    async def _timer(self, seconds: float) -> None:
        await anyio.sleep(seconds)
        self.cancel(TIMEOUT)

    async def _pipeline(self) -> Any:
        tool = self.tool
        queued = self._turn
        if queued is not None:
            await queued[1].wait()
            if self._turn is not queued:  # aborted as the slot arrived; cancel() passed it on
                raise Aborted(CANCELLED)
            self._turn = None
            self._held.append(queued[0])
        self.set_status(RUNNING)
        rounds, ctx = self.rounds, self.ctx
        token = _rounds.set(rounds)  # this call's answers, also for an inline call nested in another
        try:
            if self._resume is not None:
                request, response = self._resume
                rounds.record(request, self._checked(request, response, None))
            while True:
                value = await tool.chain(ctx)
                if type(value) is not InputRequest:
                    return value
                rounds.record(value, await self._collect(value))
        finally:
            _rounds.reset(token)

    async def _collect(self, request: InputRequest) -> InputResponse:
        """Ask the channel for the answers, re-asking invalid ones where it can."""
        tool, rounds = self.tool, self.rounds
        limit = tool.max_rounds or self.app.max_rounds
        problems: list[str] | None = None
        while True:
            rounds.round += 1
            if rounds.round > limit:
                raise ToolError(
                    ELICITATION_ROUNDS_EXCEEDED,
                    f'Tool "{tool.name}" asked for input more than {limit} times in one call.',
                    recovery="Answer fewer follow-up questions per call, or raise the tool's max_rounds.",
                )
            self.request = request
            self.set_status(WAITING)
            channel = self.channel
            response = await channel.ask(request, self, problems) if channel is not None else None
            self.request = None
            self.set_status(RUNNING)
            if response is None:
                raise ToolError(
                    ELICITATION_UNSUPPORTED,
                    f'Tool "{tool.name}" needs input ({request.message!r}) but this caller has no way to ask for it.',
                    recovery="Call it from a client that supports elicitation, or give scripted answers.",
                )
            if response is DEFER:
                raise _Deferred(
                    {"request": request, "continuation": continuation(tool.name, self.args, rounds, request)}
                )
            try:
                return self._checked(request, response, channel)
            except _Reask as reask:
                problems = reask.problems

    def _checked(self, request: InputRequest, response: InputResponse, channel: InputChannel | None) -> InputResponse:
        if response.action not in ("accept", "decline", "cancel"):
            raise ToolError(
                INVALID_ANSWER,
                f'Tool "{self.tool.name}" got an answer with action {response.action!r}; expected accept, decline or cancel.',
            )
        if response.action != "accept" or request.fields is None:
            return response
        content, problems = validate_form(request.fields, response.content)
        if not problems:
            return InputResponse("accept", content)
        if channel is not None and channel.can_reask:
            raise _Reask(problems)
        raise ToolError(
            INVALID_ANSWER,
            f'Invalid answer for tool "{self.tool.name}": ' + "; ".join(problems) + ".",
            recovery="Answer again with values that match the requested fields.",
            details={"errors": problems},
        )

    def _present(self, value: Any) -> CallResult:
        model = self.tool.output_model
        if model is not None:
            try:
                if not isinstance(value, model):
                    value = model.model_validate(value.model_dump() if hasattr(value, "model_dump") else value)
            except Exception as exc:
                raise ToolError(
                    INTERNAL_ERROR,
                    f'Tool "{self.tool.name}" returned a value that does not match its output model {model.__name__}: {exc.__class__.__name__}.',
                    recovery="This is a bug in the tool; report it to its author.",
                ) from None
        content, structured = present(value)
        return CallResult(value=value, content=content, structured_content=structured)

    def __repr__(self) -> str:
        name = self.tool.name if self.tool else "?"
        return f"<Call {self.id} {name} {self.status}>"


class _Deferred(Exception):
    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload


class _Reask(Exception):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


def abort_error(tool_name: str, reason: str, timeout: float | None) -> ToolError:
    if reason == TIMEOUT:
        return ToolError(
            TIMEOUT,
            f'Tool "{tool_name}" did not finish within its {timeout:g} s timeout.',
            recovery="Retry with a smaller request, or raise the tool's timeout.",
        )
    return ToolError(
        CANCELLED,
        f'The call to tool "{tool_name}" was cancelled before it finished.',
        recovery="Call the tool again if you still need its result.",
    )


def internal_error(tool_name: str, exc: BaseException) -> ToolError:
    return ToolError(
        INTERNAL_ERROR,
        f'Tool "{tool_name}" failed with {type(exc).__name__}: {exc}',
        recovery="This may be a bug in the tool or a transient failure; retrying may help.",
        details={"exception": type(exc).__name__},
    )
