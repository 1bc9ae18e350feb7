"""Detached tasks: work that must outlive the caller that started it.

A call settles the moment it is aborted, while its handler's cleanup goes on in the
background. anyio has no portable way to start a task that outlives its caller;
the running loop's backend (``_backends``) does it: an asyncio task, or a trio
system task inside a cancel scope. Cancellation is the backend's own: one
``CancelledError`` on asyncio (so ``finally: await ...`` cleanup runs), a cancelled
scope on trio (shield cleanup). This module counts the tasks and hands out the
backend's helpers under the names the engine uses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

import anyio

from ._backends import Cancellable, Event, current_backend, guarded, new_event
from ._backends import spawn as spawn_job

T = TypeVar("T")

__all__ = [
    "Detached",
    "Event",
    "Finisher",
    "Workers",
    "current_backend",
    "new_event",
    "nothing",
    "spawn",
    "wait_through_cancel",
]


async def wait_through_cancel(work: Awaitable[T], on_cancel: Callable[[], None]) -> T:
    """Await ``work`` to its end even if the awaiting task is cancelled (see ``Backend.wait_through_cancel``)."""
    return await current_backend().wait_through_cancel(work, on_cancel)


def nothing() -> None:
    """A callback that does nothing (``wait_through_cancel`` with no stop request)."""


class Detached:
    """Handle of one detached task (``spawn``): ``cancel()`` it, see whether it is ``done``; then ``on_done``."""

    __slots__ = ("_job", "_on_done", "done")

    def __init__(self, on_done: Callable[[], None] | None = None) -> None:
        self._job: Cancellable | None = None
        self.done = False
        self._on_done = on_done

    def cancel(self) -> None:
        """Cancel the task once, the backend's way (it may still clean up)."""
        if not self.done and self._job is not None:
            self._job.cancel()

    def _finished(self, _: object) -> None:
        self.done = True
        self._job = None
        on_done, self._on_done = self._on_done, None  # (it may refer back to this handle)
        if on_done is not None:
            on_done()


def spawn(
    fn: Callable[[], Coroutine[Any, Any, Any]],
    name: str,
    on_done: Callable[[], None] | None = None,
    guard: bool = True,
) -> Detached:
    """Run ``fn()`` detached in a copy of the current context.

    Anything escaping ``fn`` is logged, never raised (``guard=False``: ``fn``
    promises to let nothing but cancellation escape, and saves the guard's frame).
    ``on_done`` runs on the loop once the task has finished, whatever the outcome.
    """
    handle = Detached(on_done)
    handle._job = spawn_job(guarded(fn, name) if guard else fn(), name, handle._finished)
    return handle


class Finisher(Protocol):
    """Who hears that its detached task ended (a call's runner: it releases the call's slots then)."""

    def worker_finished(self) -> None: ...


class Workers:
    """The detached tasks of one app, counted until they end, with a shared idle event.

    ``background_tasks`` and ``wait_background`` read it; the calls' runners spawn
    through it, so nothing of a call can outlive the count. A task is kept with its
    ``Finisher`` (no handle and no callback made per task: every in-flight call
    holds what its task holds).
    """

    __slots__ = ("_idle", "_left", "_tasks")

    def __init__(self) -> None:
        self._tasks: dict[Cancellable, Finisher | None] = {}
        self._idle: anyio.Event | None = None
        self._left = self._leave  # one bound method for every task

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(
        self,
        fn: Callable[[], Coroutine[Any, Any, Any]],
        name: str,
        finisher: Finisher | None = None,
        guard: bool = True,
    ) -> Cancellable:
        """Start ``fn`` detached (see ``spawn``); it is counted until it has finished, then ``finisher`` hears."""
        job = spawn_job(guarded(fn, name) if guard else fn(), name, self._left)
        self._tasks[job] = finisher  # (no task finishes before this: its end is a loop callback)
        return job

    def running(self, job: Cancellable) -> bool:
        """Whether ``job`` (what ``spawn`` returned) has not finished yet."""
        return job in self._tasks

    def _leave(self, job: Cancellable) -> None:
        finisher = self._tasks.get(job)
        if finisher is not None:
            finisher.worker_finished()
        self._tasks.pop(job, None)
        if not self._tasks and self._idle is not None:
            self._idle.set()

    async def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no detached task runs; False on timeout. Any number of waiters may wait."""
        with anyio.move_on_after(timeout):
            while self._tasks:
                if self._idle is None or self._idle.is_set():
                    self._idle = anyio.Event()  # shared by every waiter until it is set
                await self._idle.wait()
            return True
        return False
