"""The one place the engine knows which event loop it runs on: asyncio or trio.

anyio hides most differences, but the engine needs a few things anyio does not
offer portably: a task that outlives its caller, a cancellation the canceller can
take back, a cheaper one-shot event, waiting out a thread through a cancellation.
Each backend implements the small ``Backend`` interface below (anyio's
``abc/_eventloop.py`` and ``_backends/`` are the model); ``current_backend()``
chooses it from the running loop, and no other module branches on the backend.
"""

from __future__ import annotations

import logging
import sys
from abc import ABC, abstractmethod
from asyncio import _get_running_loop
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
log = logging.getLogger("fusion_nb")


class Event(Protocol):
    """What the engine needs of an event: set once, checked, awaited."""

    def set(self) -> None:
        """Set it (once; later calls do nothing) and wake every waiter."""
        ...

    def is_set(self) -> bool:
        """Whether it has been set."""
        ...

    async def wait(self) -> Any:
        """Return once it is set (at once if it is); cancellable."""
        ...


class Cancellable(Protocol):
    """Anything with ``cancel()``: an asyncio task, a trio cancel scope, a timer handle."""

    def cancel(self) -> Any:
        """Cancel it (a no-op once it has ended)."""


class Interruptible(ABC):
    """A block of the current task that ``cancel()`` from elsewhere can end: ``with cut: await ...``.

    The cancellation this causes is taken back as the block exits (``cancelled_caught``
    then says so); any other cancellation (the task's own caller's) propagates. A
    context manager, not a wrapper coroutine: it costs no frame on the call path.
    Made in the task that enters it; entered once.
    """

    __slots__ = ()

    @abstractmethod
    def __enter__(self) -> Interruptible: ...

    @abstractmethod
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool: ...

    @property
    @abstractmethod
    def cancelled_caught(self) -> bool:
        """Whether ``cancel`` ended the block (its cancellation was taken back)."""

    @abstractmethod
    def cancel(self) -> None:
        """End the block from another task or a loop callback (a no-op once it has exited)."""

    @abstractmethod
    async def cancel_here(self) -> None:
        """End the block from inside it (its own task): raises the cancellation the block takes back."""


class ReadWatch(ABC):
    """Waits, as often as needed, until one descriptor is readable; ``close`` stops watching it.

    asyncio keeps the descriptor registered with its loop from the first wait to
    ``close`` (each wait is one future) instead of registering and removing it per
    wait as ``anyio.wait_readable`` does: a pipe's reader waits once per message.
    """

    __slots__ = ()

    @abstractmethod
    async def wait(self) -> None:
        """Return once the descriptor is readable (or at end of input); cancellable."""

    def call_when_readable(self, callback: Callable[[], None]) -> bool:
        """Have the loop run ``callback()`` in each turn the descriptor is readable, until ``pause``.

        The callback reads in the loop's own readiness turn, where a waiting task
        would only be woken one turn later (a pipe's reader saves one loop turn per
        message). Readiness is level-triggered and may be stale: the callback must
        read non-blocking. ``False`` where the loop has no such callbacks (trio):
        ``wait`` instead. A later ``wait`` ends the callbacks too.
        """
        return False

    def pause(self) -> None:
        """Stop running the ``call_when_readable`` callback (a no-op when none runs)."""
        return  # where ``call_when_readable`` says False, no callback ever runs

    @abstractmethod
    def close(self) -> None:
        """Stop watching (the descriptor stays open: it is not the watch's to close)."""


class Backend(ABC):
    """What differs between event loops, as the engine needs it (one instance per library)."""

    __slots__ = ()

    name: str

    @abstractmethod
    def loop_token(self) -> object:
        """What identifies the running loop (a key for state kept per loop, such as a periodic timer)."""

    @abstractmethod
    def new_event(self) -> Event:
        """A one-shot event of this loop (made per waited call: cheap matters)."""

    @abstractmethod
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str, on_done: Callable[[Any], None] | None) -> Cancellable:
        """Run ``coro`` detached (it outlives the caller) in a copy of the context; ``on_done(job)`` once it ended.

        ``job`` is what this returns: what cancels the task (it may still clean up).
        ``on_done`` runs on the loop whatever the outcome, also for a task cancelled
        before its first step. ``None``: the caller's own ``finally`` is enough (nothing
        cancels the task before it starts); on asyncio that saves a loop callback.
        """

    def spawn_eager(
        self, coro: Coroutine[Any, Any, Any], name: str, on_done: Callable[[Any], None] | None
    ) -> Cancellable:
        """``spawn``, with the task's first step taken at once, in the caller's turn, where the loop can.

        Work that never suspends (a quick call) then ends without a loop turn of its
        own. asyncio can on Python 3.12 and later (``eager_start``); elsewhere this is
        ``spawn``. The caller must be ready for ``coro`` to run up to its first
        suspension (or to its end) before this returns.
        """
        return self.spawn(coro, name, on_done)

    @abstractmethod
    def start_later(self, fn: Callable[[], Coroutine[Any, Any, Any]], name: str) -> Callable[[], None]:
        """Spawn ``fn()`` detached once the loop has had a turn; returns what stops it (started or not).

        Work that most often is not needed at all (a call's supervisor) then costs
        nothing when the caller finishes without suspending.
        """

    @abstractmethod
    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        """Run ``callback()`` on the loop after ``delay`` seconds, unless cancelled first."""

    @abstractmethod
    def call_soon(self, callback: Callable[[], None]) -> None:
        """Run ``callback()`` on the loop's next turn, after everything ready now (from the loop's thread)."""

    @abstractmethod
    def watch_readable(self, fd: int) -> ReadWatch:
        """A ``ReadWatch`` of ``fd`` on this loop."""

    @abstractmethod
    def interruptible(self) -> Interruptible:
        """An ``Interruptible`` for the current task."""

    @abstractmethod
    def is_cancellation(self, exc: BaseException) -> bool:
        """Whether ``exc`` is this loop's cancellation exception."""

    @abstractmethod
    def is_foreign_cancellation(self, exc: BaseException) -> bool:
        """A cancellation nobody asked this task for (asyncio: an awaited future cancelled elsewhere)."""

    @abstractmethod
    async def wait_through_cancel(self, work: Awaitable[T], on_cancel: Callable[[], None]) -> T:
        """Await ``work`` to its end even if the awaiting task is cancelled; ``on_cancel()`` says it was.

        For work in a thread, which cannot be interrupted: ``on_cancel`` (called once,
        on the loop) asks the thread to stop, the wait goes on until it has, and the
        cancellation is raised after that.
        """

    @abstractmethod
    def loop_scheduler(self) -> Callable[[Callable[[], None]], object]:
        """How a worker thread schedules a callback on the running loop."""


async def guarded(fn: Callable[[], Awaitable[Any]], name: str) -> None:
    """``await fn()`` with anything but cancellation logged instead of raised (detached work has no caller)."""
    try:
        await fn()
    except BaseException as exc:
        if current_backend().is_cancellation(exc):
            raise
        log.exception("fusion-nb background task %s failed", name)


_trio_backend: Backend | None = None


def current_backend() -> Backend:
    """The backend of the running loop.

    asyncio is recognised by its running-loop slot (one C-level read per thread,
    no exception raised); anything else must be trio, the only other loop served,
    confirmed once through trio's own ``in_trio_run`` and then kept.
    """
    if _get_running_loop() is not None:
        return ASYNCIO
    global _trio_backend
    if _trio_backend is not None:
        return _trio_backend
    trio = sys.modules.get("trio")
    if trio is None or not trio.lowlevel.in_trio_run():
        raise RuntimeError("fusion-nb's engine runs on an asyncio or trio event loop, and none is running")
    from ._trio import TRIO

    _trio_backend = TRIO
    return TRIO


# What every call does, in one step each: ``current_backend().x(...)`` with the lookup
# and the method dispatch saved on asyncio (benchmarks/engine.py times the call path).


def interruptible() -> Interruptible:
    """``current_backend().interruptible()`` (an inline call makes one)."""
    if _get_running_loop() is not None:
        return task_cut()
    return current_backend().interruptible()


def new_event() -> Event:
    """``current_backend().new_event()`` (a waited call makes one)."""
    loop = _get_running_loop()
    if loop is not None:
        return LoopFlag(loop)
    return current_backend().new_event()


def spawn(coro: Coroutine[Any, Any, Any], name: str, on_done: Callable[[Any], None]) -> Cancellable:
    """``current_backend().spawn(...)`` (a detached call makes one)."""
    loop = _get_running_loop()
    if loop is not None:
        return spawn_task(loop, coro, name, on_done)
    return current_backend().spawn(coro, name, on_done)


from ._asyncio import ASYNCIO, LoopFlag, spawn_task, task_cut  # noqa: E402  (they need the interface above)

__all__ = [
    "Backend",
    "Cancellable",
    "Event",
    "Interruptible",
    "ReadWatch",
    "current_backend",
    "guarded",
    "interruptible",
    "new_event",
    "spawn",
]
