"""The asyncio backend: native tasks, native cancellation taken back with ``uncancel``."""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio

from . import Backend, Cancellable, Interruptible, ReadWatch, guarded

T = TypeVar("T")
_current_task = asyncio.current_task
_get_running_loop = asyncio.get_running_loop


class _PerThread(threading.local):
    #: the empty context done callbacks run in (one per thread: a context is entered by one thread at a time)
    done_context = contextvars.Context()


_per_thread = _PerThread()


class LoopFlag:
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


# the states of a ``TaskCut``
_ARMED, _CANCELLED, _ENDED, _CAUGHT = 0, 1, 2, 3


class TaskCut(Interruptible):
    """One native ``task.cancel()``, counted, and taken back (``uncancel``) as the block exits.

    Cheaper than a cancel scope: nothing is set up unless a cancel comes. A
    ``cancel()`` from the task itself is ignored (its own checks see why it should
    stop; a cancel requested of the running task could not be taken back on 3.11):
    inside the block, ``cancel_here`` is the way.
    """

    __slots__ = ("_state", "_task")

    def __init__(self) -> None:
        self._task = _current_task()
        self._state = _ARMED

    def __enter__(self) -> TaskCut:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if self._state != _CANCELLED:
            self._state = _ENDED
            return False  # not ours: whatever it is propagates
        self._state = _ENDED
        task = self._task
        assert task is not None
        if exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            self._state = _CAUGHT
            return task.uncancel() == 0  # (still raised when its caller cancelled it too)
        task.uncancel()  # the work swallowed our cancel: balance the count
        return False

    @property
    def cancelled_caught(self) -> bool:
        return self._state == _CAUGHT

    def cancel(self) -> None:
        task = self._task
        if self._state == _ARMED and task is not None and task is not _current_task():
            self._state = _CANCELLED
            task.cancel()

    async def cancel_here(self) -> None:
        task = self._task
        if task is not _current_task():
            self.cancel()
            return
        if self._state == _ARMED and task is not None:
            self._state = _CANCELLED
            task.cancel()
            await asyncio.sleep(0)  # raises the cancellation just requested


_new_cut = object.__new__


def spawn_task(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, Any],
    name: str,
    on_done: Callable[[Any], None] | None,
    eager: bool = False,
) -> asyncio.Task[Any]:
    """``AsyncioBackend.spawn`` on ``loop``.

    A task cancelled before its first step never runs its body, so the done
    callback (not a ``finally``) is what reliably says it finished. It runs in one
    shared empty context: it reads no context variable, and a copy per task is
    memory every in-flight call would hold.
    """
    if eager:  # (Python 3.12+: the first step runs now, in the caller's turn)
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, name=name, eager_start=True)  # type: ignore[call-arg]
    else:
        task = loop.create_task(coro, name=name)
    if on_done is not None:
        task.add_done_callback(on_done, context=_per_thread.done_context)
    return task


def task_cut() -> TaskCut:
    """A ``TaskCut`` for the current task, made without an ``__init__`` frame (one per inline call)."""
    cut: TaskCut = _new_cut(TaskCut)
    cut._task = _current_task()
    cut._state = _ARMED
    return cut


class AsyncioBackend(Backend):
    """Backend for any asyncio loop (uvicorn's, ipykernel's through tornado, uvloop)."""

    __slots__ = ()

    name = "asyncio"

    def loop_token(self) -> object:
        return _get_running_loop()

    def new_event(self) -> LoopFlag:
        # ``anyio.Event()`` looks the backend up on every construction; this is made per waited call
        return LoopFlag(_get_running_loop())

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str, on_done: Callable[[Any], None] | None) -> Cancellable:
        return spawn_task(_get_running_loop(), coro, name, on_done)

    if sys.version_info >= (3, 12):

        def spawn_eager(
            self, coro: Coroutine[Any, Any, Any], name: str, on_done: Callable[[Any], None] | None
        ) -> Cancellable:
            return spawn_task(_get_running_loop(), coro, name, on_done, eager=True)

    def start_later(self, fn: Callable[[], Coroutine[Any, Any, Any]], name: str) -> Callable[[], None]:
        return _Later(fn, name).stop

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        return _get_running_loop().call_later(delay, callback)

    def call_soon(self, callback: Callable[[], None]) -> None:
        _get_running_loop().call_soon(callback)

    def watch_readable(self, fd: int) -> ReadWatch:
        return FdWatch(_get_running_loop(), fd)

    def interruptible(self) -> TaskCut:
        return task_cut()

    def is_cancellation(self, exc: BaseException) -> bool:
        return isinstance(exc, asyncio.CancelledError)

    def is_foreign_cancellation(self, exc: BaseException) -> bool:
        # asyncio lets a coroutine that awaits a future cancelled elsewhere see its
        # ``CancelledError`` although its task was not cancelled (``cancelling()`` is 0);
        # anyio's ``CancelScope.__exit__`` makes the same distinction.
        if not isinstance(exc, asyncio.CancelledError):
            return False
        task = _current_task()
        return task is not None and task.cancelling() == 0

    async def wait_through_cancel(self, work: Awaitable[T], on_cancel: Callable[[], None]) -> T:
        # ``anyio.to_thread.run_sync`` alone is not enough: a native ``task.cancel()``
        # (how a detached call is cancelled) ends its wait at once, leaving the thread running.
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

    def loop_scheduler(self) -> Callable[[Callable[[], None]], object]:
        return _get_running_loop().call_soon_threadsafe


class FdWatch(ReadWatch):
    """``AsyncioBackend.watch_readable``: the loop's reader callback, registered on the first wait."""

    __slots__ = ("_calling", "_fd", "_loop", "_registered", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self._loop = loop
        self._fd = fd
        self._registered = False
        self._calling = False  # what is registered is a ``call_when_readable`` callback, not ``_ready``
        self._waiter: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        if not self._registered or self._calling:
            self._loop.add_reader(self._fd, self._ready)
            self._registered, self._calling = True, False
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _ready(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def call_when_readable(self, callback: Callable[[], None]) -> bool:
        self._loop.add_reader(self._fd, callback)
        self._registered = self._calling = True
        return True

    def pause(self) -> None:
        if self._calling:
            self.close()

    def close(self) -> None:
        if self._registered:
            self._loop.remove_reader(self._fd)
            self._registered = self._calling = False


class _Later:
    """``start_later``'s state: the pending loop callback, then the task it started."""

    __slots__ = ("_fn", "_handle", "_name", "_task")

    def __init__(self, fn: Callable[[], Coroutine[Any, Any, Any]], name: str) -> None:
        self._fn = fn
        self._name = name
        self._task: asyncio.Task[Any] | None = None
        self._handle: asyncio.Handle | None = _get_running_loop().call_soon(self._start)

    def _start(self) -> None:
        self._handle = None
        self._task = _get_running_loop().create_task(guarded(self._fn, self._name), name=self._name)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        elif self._task is not None:
            self._task.cancel()


ASYNCIO = AsyncioBackend()
