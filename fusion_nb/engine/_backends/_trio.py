"""The trio backend: system tasks in cancel scopes; a scope is trio's only way to cancel."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio
import trio

from . import Backend, Cancellable, Interruptible, ReadWatch, guarded

T = TypeVar("T")
log = logging.getLogger("fusion_nb")


class ScopeCut(Interruptible):
    """A cancel scope around the run (trio takes back what its scopes cancel)."""

    __slots__ = ("_scope",)

    def __init__(self) -> None:
        self._scope = trio.CancelScope()

    def __enter__(self) -> ScopeCut:
        self._scope.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        return bool(self._scope.__exit__(exc_type, exc, tb))

    @property
    def cancelled_caught(self) -> bool:
        return self._scope.cancelled_caught

    def cancel(self) -> None:
        self._scope.cancel()

    async def cancel_here(self) -> None:
        self._scope.cancel()
        await trio.lowlevel.checkpoint()


class FdReadable(ReadWatch):
    """``TrioBackend.watch_readable``: trio's own wait (its I/O manager keeps no registration to undo)."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def wait(self) -> None:
        await trio.lowlevel.wait_readable(self._fd)

    def close(self) -> None:
        pass


class _Timer:
    """``call_later``'s handle: a system task asleep in its own scope."""

    __slots__ = ("scope",)

    def __init__(self) -> None:
        self.scope = trio.CancelScope()

    def cancel(self) -> None:
        self.scope.cancel()


class TrioBackend(Backend):
    """Backend for trio (anyio's events; detached work as system tasks, so no nursery must outlive it)."""

    __slots__ = ()

    name = "trio"

    def loop_token(self) -> object:
        return trio.lowlevel.current_trio_token()

    def new_event(self) -> trio.Event:
        return trio.Event()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str, on_done: Callable[[Any], None] | None) -> Cancellable:
        scope = trio.CancelScope()

        async def in_scope() -> None:
            try:
                with scope:
                    try:
                        await coro
                    except Exception:  # (an exception leaving a system task would crash the run)
                        log.exception("fusion-nb background task %s failed", name)
            finally:
                if on_done is not None:
                    on_done(scope)

        trio.lowlevel.spawn_system_task(in_scope, name=name, context=contextvars.copy_context())
        return scope

    def start_later(self, fn: Callable[[], Coroutine[Any, Any, Any]], name: str) -> Callable[[], None]:
        # no loop turn to wait for: a system task starts at the next scheduling point anyway
        return self.spawn(guarded(fn, name), name, _ignore).cancel

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        timer = _Timer()

        async def later() -> None:
            with timer.scope:
                await trio.sleep(delay)
                callback()

        trio.lowlevel.spawn_system_task(later, name="fusion-nb timer")
        return timer

    def call_soon(self, callback: Callable[[], None]) -> None:
        trio.lowlevel.current_trio_token().run_sync_soon(callback)

    def watch_readable(self, fd: int) -> ReadWatch:
        return FdReadable(fd)

    def interruptible(self) -> ScopeCut:
        return ScopeCut()

    def is_cancellation(self, exc: BaseException) -> bool:
        return isinstance(exc, trio.Cancelled)

    def is_foreign_cancellation(self, exc: BaseException) -> bool:
        return False  # a trio cancellation always belongs to a scope of this task

    async def wait_through_cancel(self, work: Awaitable[T], on_cancel: Callable[[], None]) -> T:
        # trio's thread wait cannot be cancelled at all: a watcher beside it notices the cancellation
        finished = False

        async def watch() -> None:
            try:
                await anyio.sleep_forever()
            except trio.Cancelled:
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

    def loop_scheduler(self) -> Callable[[Callable[[], None]], object]:
        return trio.lowlevel.current_trio_token().run_sync_soon


def _ignore(_: Any) -> None:
    pass


TRIO = TrioBackend()
