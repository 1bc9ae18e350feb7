"""One in-flight call: its signal, its status, and the result it settles with.

The pipeline (queue, middleware, serializer, handler) runs in a detached worker
task so that an abort settles the call at once, whatever the handler does with
its cancellation; the worker's cleanup finishes in the background, and a reaper
releases the call's slots if cleanup outlives the app's grace period.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from .background import Detached
from .context import Context
from .errors import CANCELLED, INTERNAL_ERROR, TIMEOUT, Aborted, ToolError
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
    "queued", "running", "waiting", "done", "failed", "cancelled", "timed out")
_FINAL_STATUS = {CANCELLED: CANCELLED_STATUS, TIMEOUT: TIMED_OUT}


class Call:
    """Handle of one call: ``await call.wait()``, ``call.cancel()``, ``call.status``.

    Listeners added with ``watch(fn)`` get ``fn(call)`` after every status or
    progress change (views read the call; they coalesce as they like).
    """

    __slots__ = ("app", "tool", "id", "signal", "status", "progress", "result", "ctx",
                 "_settled", "_held", "_worker", "_last_percent", "_on_progress", "_listeners", "_worker_done")

    def __init__(self, app: Fusion, tool: Tool | None, call_id: str, on_progress: Callable[[ProgressEvent], None] | None) -> None:
        self.app = app
        self.tool = tool
        self.id = call_id
        self.signal = AbortSignal()
        self.status = QUEUED
        self.progress: ProgressEvent | None = None
        self.result: CallResult | None = None
        self.ctx: Context | None = None
        self._settled = anyio.Event()
        self._held: list[Slots] = []
        self._worker: Detached | None = None
        self._worker_done: anyio.Event | None = None
        self._last_percent = -1.0
        self._on_progress = on_progress
        self._listeners: list[Callable[[Call], None]] = []

    # -- observing -------------------------------------------------------------------
    @property
    def settled(self) -> bool:
        return self.result is not None

    def watch(self, listener: Callable[[Call], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _notify(self) -> None:
        for listener in self._listeners:
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
                await self._settled.wait()
            except BaseException:
                self.cancel(CANCELLED)
                raise
        assert self.result is not None
        return self.result

    def cancel(self, reason: str = CANCELLED) -> bool:
        """Abort the call: it settles now; its handler is cancelled and cleans up in the background."""
        if self.result is not None:
            return False
        self.signal.abort(reason)
        self._settle(CallResult.failure(abort_error(self.tool.name if self.tool else "?", reason, self.tool.timeout if self.tool else None)), _FINAL_STATUS.get(reason, CANCELLED_STATUS))
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
        self._settled.set()
        self.app._forget(self)
        self._notify()

    # -- the worker ------------------------------------------------------------------
    def _start(self) -> None:
        self._worker = self.app._spawn(self._work, name=f"fusion-nb call {self.tool.name}", on_done=self._worker_finished)

    def _worker_finished(self) -> None:
        self._release_all()
        if self._worker_done is not None:
            self._worker_done.set()

    async def _reap(self) -> None:
        with anyio.move_on_after(self.app.grace):
            await self._worker_done.wait()
        if self._worker is not None and not self._worker.done:
            log.warning("tool %s is still cleaning up %gs after its call was aborted; its slots are released and the task is abandoned", self.tool.name, self.app.grace)
            self._worker.cancel()
            self._release_all()

    async def hold(self, slots: Slots) -> None:
        """Wait for a slot of ``slots``; it is released when the worker ends."""
        await slots.acquire()
        self._held.append(slots)

    def _release_all(self) -> None:
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
        except Aborted:
            return
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            if self.signal.aborted:
                return
            log.exception("tool %s failed", tool.name)
            result = CallResult.failure(internal_error(tool.name, exc))
        finally:
            self._release_all()
        self._settle(result, FAILED if result.is_error else DONE)

    async def _timer(self, seconds: float) -> None:
        await anyio.sleep(seconds)
        self.cancel(TIMEOUT)

    async def _pipeline(self) -> Any:
        tool = self.tool
        if tool.slots is not None:
            await self.hold(tool.slots)
        self.set_status(RUNNING)
        return await tool.chain(self.ctx)

    def _present(self, value: Any) -> CallResult:
        model = self.tool.output_model
        if model is not None:
            try:
                if not isinstance(value, model):
                    value = model.model_validate(value.model_dump() if hasattr(value, "model_dump") else value)
            except Exception as exc:
                raise ToolError(INTERNAL_ERROR, f'Tool "{self.tool.name}" returned a value that does not match its output model {model.__name__}: {exc.__class__.__name__}.',
                                recovery="This is a bug in the tool; report it to its author.") from None
        content, structured = present(value)
        return CallResult(value=value, content=content, structured_content=structured)

    def __repr__(self) -> str:
        name = self.tool.name if self.tool else "?"
        return f"<Call {self.id} {name} {self.status}>"


def abort_error(tool_name: str, reason: str, timeout: float | None) -> ToolError:
    if reason == TIMEOUT:
        return ToolError(TIMEOUT, f'Tool "{tool_name}" did not finish within its {timeout:g} s timeout.',
                         recovery="Retry with a smaller request, or raise the tool's timeout.")
    return ToolError(CANCELLED, f'The call to tool "{tool_name}" was cancelled before it finished.',
                     recovery="Call the tool again if you still need its result.")


def internal_error(tool_name: str, exc: BaseException) -> ToolError:
    return ToolError(INTERNAL_ERROR, f'Tool "{tool_name}" failed with {type(exc).__name__}: {exc}',
                     recovery="This may be a bug in the tool or a transient failure; retrying may help.",
                     details={"exception": type(exc).__name__})
