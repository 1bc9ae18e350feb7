"""The handle of one call: its status, its progress and the result it settles with.

A ``Call`` is what callers and views hold. It settles exactly once; its runner
(``_runner.Runner``) drives it through ``mark``, ``report`` and ``settle`` and is
told by ``cancel`` to stop. Nothing else writes to a call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from ._background import Event, new_event
from ._errors import CANCELLED, TIMEOUT, ToolError, abort_error
from ._interactive import InputRequest
from ._result import CallResult
from ._signal import AbortSignal
from ._streaming import LogEvent, ProgressEvent

if TYPE_CHECKING:
    from ._request import CallRequest
    from ._tool import Tool

log = logging.getLogger("fusion_nb")


class CallStatus(StrEnum):
    """Where a call is. The last four are final; a settled call never changes again."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"  # for input (a form, a URL visit, a client's answer)
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed out"


# The members as plain module constants: the runner reads them on every call, and a module
# global is one lookup where ``CallStatus.X`` is two (benchmarks/engine.py times the call path).
QUEUED, RUNNING, WAITING = CallStatus.QUEUED, CallStatus.RUNNING, CallStatus.WAITING
DONE, FAILED = CallStatus.DONE, CallStatus.FAILED
CANCELLED_STATUS, TIMED_OUT = CallStatus.CANCELLED, CallStatus.TIMED_OUT


class Driver(Protocol):
    """What a call needs from whoever runs it (its runner)."""

    def abort(self) -> None: ...

    def settled(self, call: Call) -> None: ...


#: ``Call.signal``: one signal per call, also when a worker thread and the loop ask at once
_SIGNAL_LOCK = threading.Lock()

#: log levels a view shows without naming them (from ``warning`` up, the line starts with its level)
_PLAIN_LEVELS = frozenset(("debug", "info", "notice"))

_NO_LISTENERS: tuple[Callable[[Call], None], ...] = ()


class Call:
    """Handle of one call: ``await call.wait()``, ``call.cancel()``, ``call.status``.

    Listeners added with ``watch(fn)`` get ``fn(call)`` after every status or
    progress change (views read the call; they coalesce as they like). A listener
    that raises is logged with the call id and never affects the call. A call is
    complete when constructed: its runner (the ``driver``) is given, never attached later.
    """

    # Every in-flight call holds one: what most calls never use is made on first use.
    __slots__ = (
        "_driver",
        "_ended_by",
        "_listeners",
        "_on_log",
        "_on_progress",
        "_settled",
        "_signal",
        "_stopped",
        "arguments",
        "body_stopped",
        "id",
        "last_log",
        "line",
        "progress",
        "request",
        "result",
        "started_at",
        "status",
        "tool",
        "tool_name",
    )

    def __init__(
        self,
        call_id: str,
        tool: Tool | None,
        call_request: CallRequest,
        driver: Driver | None = None,
        result: CallResult | None = None,
    ) -> None:
        self.id = call_id
        #: the tool called (``None`` when no tool has that name)
        self.tool = tool
        name = call_request.tool
        #: the name the call was made with (the tool's, or an unknown one)
        self.tool_name: str = name if isinstance(name, str) and name else "?"
        #: the arguments as the caller sent them (before validation), for views and traffic logs
        self.arguments = call_request.arguments
        self._on_progress = call_request.on_progress  # (the request itself is not kept: calls are many)
        self._ended_by = call_request.ended_by
        self._on_log = call_request.on_log
        self._signal: AbortSignal | None = None  # made on first use (see ``signal``)
        #: ``time.monotonic()`` when the call was made (views show elapsed time from it)
        self.started_at = time.monotonic()
        self.status = QUEUED if result is None else FAILED
        self.progress: ProgressEvent | None = None
        #: the handler's latest ``ctx.log`` line (views show it)
        self.last_log: LogEvent | None = None
        #: the line views show: the newest progress event's message, or a ``ctx.log`` line if that came last
        self.line: str | None = None
        self.result: CallResult | None = result
        #: the input request being answered right now (views render it)
        self.request: InputRequest | None = None
        self._driver = driver  # (told once the call has settled)
        self._listeners: tuple[Callable[[Call], None], ...] | list[Callable[[Call], None]] = _NO_LISTENERS
        self._settled: Event | None = None  # made when somebody waits
        #: whether the handler has really stopped (cleanup included); a call answers before that
        self.body_stopped = result is not None
        self._stopped: Event | None = None

    @classmethod
    def failed(
        cls,
        call_id: str,
        tool: Tool | None,
        call_request: CallRequest,
        error: ToolError,
        *,
        error_id: str | None = None,
    ) -> Call:
        """A call refused before it ran (unknown tool, invalid input; ``error_id``: the host's bug, logged)."""
        return cls(call_id, tool, call_request, result=CallResult.failure(error, error_id=error_id))

    # -- observing -------------------------------------------------------------------
    @property
    def settled(self) -> bool:
        """True once the call has its result (it never changes afterwards)."""
        return self.result is not None

    def watch(self, listener: Callable[[Call], None]) -> Callable[[], None]:
        """Call ``listener(call)`` after every change; returns a function that unsubscribes."""
        if type(self._listeners) is tuple:
            self._listeners = []
        listeners = self._listeners
        assert isinstance(listeners, list)
        listeners.append(listener)
        return lambda: listeners.remove(listener) if listener in listeners else None

    def _notify(self) -> None:
        for listener in list(self._listeners):  # listeners may unsubscribe while notified
            try:
                listener(self)
            except Exception:
                log.exception("fusion-nb: a listener of call %s (tool %s) failed", self.id, self.tool_name)

    @property
    def signal(self) -> AbortSignal:
        """The call's abort signal (``ctx.signal``), made on first use.

        Most calls never look at it, and every in-flight call would hold one. A worker
        thread may be the first to ask (a body handing ``ctx`` to a thread of its own)
        while the loop aborts the call: the lock makes sure both get the same signal.
        """
        signal = self._signal
        if signal is None:
            with _SIGNAL_LOCK:
                signal = self._signal
                if signal is None:
                    signal = self._signal = AbortSignal(self)
        return signal

    @property
    def aborted(self) -> bool:
        """Whether the call was aborted (cancelled or timed out), read without making its signal."""
        signal = self._signal
        return signal is not None and signal.aborted

    # -- driven by the runner ----------------------------------------------------------
    def mark(self, status: CallStatus, request: InputRequest | None = None) -> None:
        """Move a live call to ``status`` (RUNNING or WAITING, with the request it waits on)."""
        if self.result is None and (status != self.status or request is not self.request):
            self.status = status
            self.request = request
            if self._listeners:
                self._notify()

    def report(self, event: ProgressEvent) -> None:
        """Forward progress that does not go backwards (equal values pass: a new message)."""
        percent, last = event.percent, self.progress
        if self.result is not None or percent != percent or (last is not None and percent < last.percent):
            return
        self.progress = event
        self.line = event.message
        on_progress = self._on_progress
        if on_progress is not None:
            try:
                on_progress(event)
            except Exception:
                log.exception("fusion-nb: the progress listener of call %s (tool %s) failed", self.id, self.tool_name)
        if self._listeners:
            self._notify()

    def log(self, event: LogEvent) -> None:
        """Forward a ``ctx.log`` line of the live call to its request's ``on_log`` and its watchers."""
        if self.result is not None:
            return
        self.last_log = event
        self.line = event.message if event.level in _PLAIN_LEVELS else f"{event.level}: {event.message}"
        on_log = self._on_log
        if on_log is not None:
            try:
                on_log(event)
            except Exception:
                log.exception("fusion-nb: the log listener of call %s (tool %s) failed", self.id, self.tool_name)
        if self._listeners:
            self._notify()

    def settle(self, result: CallResult, status: CallStatus) -> bool:
        """Give the call its result, once; later attempts return False and change nothing."""
        if self.result is not None:
            return False
        self.result = result
        self.status = status
        self.request = None
        driver, self._driver = self._driver, None  # (the runner points at the call; no cycle outlives settling)
        if self._settled is not None:
            self._settled.set()
        if driver is not None:
            try:
                driver.settled(self)
            except Exception:
                log.exception("fusion-nb: settling call %s (tool %s) failed", self.id, self.tool_name)
        if self._listeners:
            self._notify()
        return True

    def mark_stopped(self) -> None:
        """The body has stopped (returned, raised or finished its cleanup after an abort)."""
        self.body_stopped = True
        if self._stopped is not None:
            self._stopped.set()

    async def wait_stopped(self) -> None:
        """Wait until the handler has really stopped, cleanup included (an aborted call answers first).

        Hosts use it to say truthfully that an interrupted call's cleanup ran.
        """
        if not self.body_stopped:
            if self._stopped is None:
                self._stopped = new_event()
            await self._stopped.wait()

    # -- waiting and aborting ----------------------------------------------------------
    async def wait(self) -> CallResult:
        """The result; cancelling the task that waits aborts the call."""
        result = self.result
        if result is None:
            if self._settled is None:
                self._settled = new_event()
            try:
                await self._settled.wait()
            except BaseException:
                self.caller_gone()
                raise
            result = self.result
            assert result is not None  # the event is set by ``settle``
        return result

    def caller_gone(self) -> bool:
        """The task awaiting the call was cancelled: abort it, saying why when its caller knows."""
        ended_by = self._ended_by
        return self.cancel(CANCELLED, ended_by() if ended_by is not None else None)

    def cancel(self, reason: str = CANCELLED, because: str | None = None) -> bool:
        """Abort the call: it settles now; its handler is cancelled and cleans up in the background.

        ``reason`` is ``CANCELLED`` or ``TIMEOUT``; ``because`` ends the result's sentence
        ("the kernel is restarting"). Returns False if it had settled already.
        """
        if self.result is not None:
            return False
        driver = self._driver
        self.signal.abort(reason)
        timeout = self.tool.timeout if self.tool is not None else None
        status = TIMED_OUT if reason == TIMEOUT else CANCELLED_STATUS
        self.settle(CallResult.failure(abort_error(self.tool_name, reason, timeout, because)), status)
        if driver is not None:
            driver.abort()
        return True

    # -- showing -----------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"<Call {self.id} {self.tool_name} {self.status}>"
