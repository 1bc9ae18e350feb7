"""Detached tasks: work that must outlive the caller that started it.

A call settles the moment it is aborted, while its handler's cleanup goes on in the
background. anyio has no portable way to start a task that outlives its caller, so
this module does it per backend: an asyncio task, or a trio system task inside a
cancel scope. Cancellation is the backend's own: one ``CancelledError`` on asyncio
(so ``finally: await ...`` cleanup runs), a cancelled scope on trio (shield cleanup).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

import anyio

log = logging.getLogger("fusion_nb")
T = TypeVar("T")


def on_asyncio() -> bool:
    """Whether the running loop is asyncio's (else trio's: the only other backend served)."""
    try:
        asyncio.get_running_loop()  # raises under trio (and outside any loop)
    except RuntimeError:
        return False
    return True


class Event(Protocol):
    """What the engine needs of an event: set once, checked, awaited."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


class _LoopFlag:
    """asyncio's ``Event`` without what a one-shot flag never needs (``clear``, the lazy loop lookup, a deque).

    Each waiter awaits a future of its own, so cancelling one waiter leaves the others waiting.
    """

    __slots__ = ("_loop", "_value", "_waiters")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._value = False
        self._waiters: list[asyncio.Future[None]] | None = None

    def set(self) -> None:
        if self._value:
            return
        self._value = True
        waiters, self._waiters = self._waiters, None
        if waiters:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def is_set(self) -> bool:
        return self._value

    async def wait(self) -> bool:
        if self._value:
            return True
        waiter = self._loop.create_future()
        if self._waiters is None:
            self._waiters = [waiter]
        else:
            self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._waiters is not None and waiter in self._waiters:  # (cancelled before the flag was set)
                self._waiters.remove(waiter)
        return True


def new_event() -> Event:
    """An event of the running backend: a ``_LoopFlag`` on asyncio, anyio's on trio.

    Every waited call makes one, so the cost matters: ``anyio.Event()`` on asyncio
    costs about 2 µs (it looks the backend up each time), ``asyncio.Event()`` about
    0.25 µs, a ``_LoopFlag`` less. Cancelling a waiter works the same (anyio cancels
    asyncio tasks natively).
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return anyio.Event()
    return _LoopFlag(loop)


def is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is the running backend's cancellation exception."""
    if isinstance(exc, asyncio.CancelledError):
        return True
    return type(exc).__name__ == "Cancelled" and type(exc).__module__.startswith("trio")


def is_foreign_cancellation(exc: BaseException) -> bool:
    """A ``CancelledError`` that nobody asked this task for: an awaited future was cancelled elsewhere.

    asyncio lets a coroutine that awaits a cancelled future or task see its
    ``CancelledError``; the task itself was not cancelled (``cancelling()`` is 0).
    anyio's ``CancelScope.__exit__`` makes the same distinction. On trio a
    cancellation always belongs to a scope, so it is never foreign.
    """
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


class Detached:
    """Handle of one detached task: ``cancel()`` it, see whether it is ``done``.

    When it finishes it leaves ``members`` (the set that counts it, if any) and runs
    ``on_done``; one object per task, no closures.
    """

    __slots__ = ("_members", "_on_done", "_scope", "_task", "done")

    def __init__(self, on_done: Callable[[], None] | None = None, members: Workers | None = None) -> None:
        self._task: Any = None
        self._scope: Any = None
        self.done = False
        self._on_done = on_done
        self._members = members

    def cancel(self) -> None:
        """Cancel the task once, the backend's way (it may still clean up)."""
        if self.done:
            return
        if self._task is not None:
            self._task.cancel()
        elif self._scope is not None:
            self._scope.cancel()

    def _finished_task(self, task: Any) -> None:
        self._finish()

    def _finish(self) -> None:
        self.done = True
        on_done, self._on_done = self._on_done, None  # (it may refer back to this handle)
        if on_done is not None:
            on_done()
        members, self._members = self._members, None
        if members is not None:
            members.left(self)


def spawn(
    fn: Callable[[], Coroutine[Any, Any, Any]],
    name: str,
    on_done: Callable[[], None] | None = None,
    guarded: bool = True,
    members: Workers | None = None,
) -> Detached:
    """Run ``fn()`` detached in a copy of the current context.

    Anything escaping ``fn`` is logged, never raised (``guarded=False``: ``fn``
    promises to let nothing but cancellation escape, and saves the guard's frame).
    ``on_done`` runs on the loop once the task has finished, whatever the outcome;
    then the task leaves ``members``.
    """
    handle = Detached(on_done, members)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio
        import trio

        scope = handle._scope = trio.CancelScope()

        async def in_scope() -> None:
            try:
                with scope:
                    await _guarded(fn, name)
            finally:
                handle._finish()

        trio.lowlevel.spawn_system_task(in_scope, name=name, context=contextvars.copy_context())
        return handle
    # A task cancelled before its first step never runs its body, so the done
    # callback (not a ``finally``) is what reliably marks it finished.
    task = handle._task = loop.create_task(_guarded(fn, name) if guarded else fn(), name=name)
    task.add_done_callback(handle._finished_task)
    return handle


async def _guarded(fn: Callable[[], Awaitable[Any]], name: str) -> None:
    try:
        await fn()
    except BaseException as exc:
        if is_cancellation(exc):
            raise
        log.exception("fusion-nb background task %s failed", name)


class Workers:
    """The detached tasks of one app, counted until they end, with a shared idle event.

    ``background_tasks`` and ``wait_background`` read it; the calls' runners spawn
    through it, so nothing of a call can outlive the count.
    """

    __slots__ = ("_idle", "_tasks")

    def __init__(self) -> None:
        self._tasks: set[Detached] = set()
        self._idle: anyio.Event | None = None

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(
        self,
        fn: Callable[[], Coroutine[Any, Any, Any]],
        name: str,
        on_done: Callable[[], None] | None = None,
        guarded: bool = True,
    ) -> Detached:
        """Start ``fn`` detached (see ``spawn``); it is counted until it has finished."""
        handle = spawn(fn, name, on_done, guarded, self)
        self._tasks.add(handle)  # (no task finishes before this: its end is a loop callback)
        return handle

    def left(self, handle: Detached) -> None:
        """``handle``'s task has finished: it no longer counts (the idle waiters wake with the last)."""
        self._tasks.discard(handle)
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


async def wait_through_cancel(work: Awaitable[T], on_cancel: Callable[[], None]) -> T:
    """Await ``work`` to its end even if the awaiting task is cancelled; ``on_cancel()`` says it was.

    For work in a thread, which cannot be interrupted: ``on_cancel`` (called once, on
    the loop) asks the thread to stop, the wait goes on until it has, and the
    cancellation is raised after that. ``anyio.to_thread.run_sync`` alone is not
    enough: on asyncio a native ``task.cancel()`` (how the engine cancels a detached
    call) ends its wait at once and leaves the thread running; on trio the wait
    cannot be cancelled, so nothing would notice the cancellation at all.
    """
    if not on_asyncio():
        return await _trio_wait_through_cancel(work, on_cancel)
    future = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError as cancelled:
        if not future.done():
            on_cancel()
            with anyio.CancelScope(shield=True):  # anyio re-delivers its cancels every loop turn: no spinning
                while not future.done():
                    try:
                        await asyncio.shield(future)
                    except asyncio.CancelledError:
                        pass  # another native cancel: still waiting for the thread
                    except Exception:
                        break  # the thread's own error; the cancellation wins
        raise cancelled


async def _trio_wait_through_cancel(work: Awaitable[T], on_cancel: Callable[[], None]) -> T:
    finished = False

    async def watch() -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            if not finished:
                on_cancel()
            raise

    error: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            value = await work  # uncancellable: ends when the thread has returned
        except Exception as exc:  # raised below, not wrapped in the group's ExceptionGroup
            error = exc
        finally:
            finished = True
            group.cancel_scope.cancel()
    if error is not None:
        raise error
    return value


def nothing() -> None:
    """A callback that does nothing (``wait_through_cancel`` with no stop request)."""
    pass


def loop_scheduler() -> Callable[[Callable[[], None]], object]:
    """How a worker thread schedules a callback on the running loop (asyncio or trio)."""
    if on_asyncio():
        return asyncio.get_running_loop().call_soon_threadsafe
    import trio

    return trio.lowlevel.current_trio_token().run_sync_soon
