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

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


class Cancellable(Protocol):
    """Anything with ``cancel()``: an asyncio task, a trio cancel scope, a timer handle."""

    def cancel(self) -> Any: ...


class Interruptible(ABC):
    """Runs an awaitable in the current task so that ``cancel()`` from elsewhere ends it.

    The cancellation this causes is taken back when ``run`` returns (it returns True
    then); any other cancellation (the task's own caller's) propagates. Made in the
    task that will call ``run``; one ``run`` per object.
    """

    __slots__ = ()

    @abstractmethod
    async def run(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> bool:
        """Await ``fn(*args)``; True if ``cancel`` ended it."""

    @abstractmethod
    def cancel(self) -> None:
        """End the run from another task or a loop callback (a no-op once it has ended)."""

    @abstractmethod
    async def cancel_here(self) -> None:
        """End the run from inside it (its own task): raises the cancellation ``run`` takes back."""


class Backend(ABC):
    """What differs between event loops, as the engine needs it (one instance per library)."""

    __slots__ = ()

    name: str

    @abstractmethod
    def new_event(self) -> Event:
        """A one-shot event of this loop (made per waited call: cheap matters)."""

    @abstractmethod
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str, on_done: Callable[[Any], None]) -> Cancellable:
        """Run ``coro`` detached (it outlives the caller) in a copy of the context; ``on_done(_)`` once it ended.

        ``on_done`` (whose one argument means nothing) runs on the loop whatever the
        outcome, also for a task cancelled before its first step. Returns what
        cancels the task (it may still clean up).
        """

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


from ._asyncio import ASYNCIO  # noqa: E402  (the default backend needs the interface above)

__all__ = ["Backend", "Cancellable", "Event", "Interruptible", "current_backend", "guarded"]
