"""Running a handler of any of the four kinds, with progress routed out of it.

Each runner is ``async run(input, ctx, offer, in_thread) -> response value``:

- ``offer(event)`` takes a progress event; it is only ever called on the event loop.
- ``in_thread(func)`` runs ``func()`` in a worker thread and returns an awaitable of
  its result. The engine supplies it (its own thread pool); it must not abandon the
  thread when the awaiting task is cancelled, so whoever awaits the runner holds the
  call's slots exactly as long as the body really runs. Async runners ignore it.

Cancelling the task running an async handler interrupts whatever it awaits. A sync
handler runs whole in one thread; it stops when it returns (or when it notices
``ctx.signal.aborted``). A sync *generator* also runs whole in one thread (one hop
per call, not one per step): the thread iterates it, hands progress to the loop
coalesced, checks ``ctx.signal.aborted`` before every step and closes the generator
itself, so the generator's ``finally`` runs exactly once and never on the loop.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from enum import StrEnum
from typing import Any, Protocol, TypeVar, cast

import anyio
import anyio.to_thread

from ._background import current_backend, nothing, wait_through_cancel
from ._errors import Aborted
from ._streaming import ProgressEvent, Respond

log = logging.getLogger("fusion_nb")
T = TypeVar("T")

Offer = Callable[[ProgressEvent], None]


class InThread(Protocol):
    """Runs ``func()`` in a worker thread; the await lasts until the thread has returned."""

    def __call__(self, func: Callable[[], T], /) -> Awaitable[T]: ...


async def run_in_anyio_thread(func: Callable[[], T]) -> T:
    """The default ``in_thread``: anyio's default pool, waiting for the thread even when cancelled."""
    return await wait_through_cancel(anyio.to_thread.run_sync(func), nothing)


class HandlerRunner(Protocol):
    """``await run(input, ctx, offer, in_thread)``: runs the handler once, returns its response value."""

    #: the handler's kind, see ``handler_kind``
    kind: str

    def __call__(
        self, input: Any, ctx: Any, offer: Offer, in_thread: InThread = run_in_anyio_thread, /
    ) -> Awaitable[Any]: ...


class HandlerKind(StrEnum):
    """How a tool's body runs: a coroutine or async generator on the loop, a function or generator in a thread."""

    ASYNC = "async"
    ASYNC_GEN = "async_gen"
    SYNC = "sync"
    SYNC_GEN = "sync_gen"


def handler_kind(fn: Callable[..., Any]) -> HandlerKind:
    """The kind of ``fn`` (checked on the user's function, under any decorator)."""
    target = inspect.unwrap(fn)
    if inspect.isasyncgenfunction(target):
        return HandlerKind.ASYNC_GEN
    if inspect.iscoroutinefunction(target):
        return HandlerKind.ASYNC
    if inspect.isgeneratorfunction(target):
        return HandlerKind.SYNC_GEN
    if callable(target):
        return HandlerKind.SYNC
    raise TypeError(f"a handler must be callable, got {fn!r}")


def make_runner(fn: Callable[..., Any], tool_name: str) -> HandlerRunner:
    """The runner of ``fn`` for its kind (see the module docstring for the interface)."""
    kind = handler_kind(fn)
    ignored = _IgnoredYields(tool_name)
    run: Callable[..., Awaitable[Any]]
    if kind is HandlerKind.ASYNC:

        async def run(input: Any, ctx: Any, offer: Offer, in_thread: InThread = run_in_anyio_thread) -> Any:
            return await fn(input, ctx)

    elif kind is HandlerKind.ASYNC_GEN:

        async def run(input: Any, ctx: Any, offer: Offer, in_thread: InThread = run_in_anyio_thread) -> Any:
            async with aclosing(fn(input, ctx)) as stream:
                async for item in stream:
                    if type(item) is ProgressEvent:
                        offer(item)
                    elif type(item) is Respond:
                        return item.value  # aclosing() closes the generator
                    else:
                        ignored.note(item)
            return None

    elif kind is HandlerKind.SYNC:

        async def run(input: Any, ctx: Any, offer: Offer, in_thread: InThread = run_in_anyio_thread) -> Any:
            return await in_thread(functools.partial(fn, input, ctx))

    else:

        async def run(input: Any, ctx: Any, offer: Offer, in_thread: InThread = run_in_anyio_thread) -> Any:
            relay = _ProgressRelay(offer, current_backend().loop_scheduler())
            drive = functools.partial(_drive_generator, fn, input, ctx, relay, ignored)
            try:
                return await wait_through_cancel(in_thread(drive), relay.stop)
            finally:
                relay.deliver()  # the last progress before the result, on the loop

    run.kind = kind  # type: ignore[attr-defined]
    return cast(HandlerRunner, run)


def _drive_generator(
    fn: Callable[..., Any], input: Any, ctx: Any, relay: _ProgressRelay, ignored: _IgnoredYields
) -> Any:
    """In the worker thread: iterate the sync generator to its response, then close it here.

    The signal (and a cancellation of the awaiting task, ``relay.stopped``) is checked
    before every step; once set, the generator is closed (its ``finally`` runs in this
    thread) and ``Aborted`` ends the run.
    """
    signal = ctx.signal
    generator = fn(input, ctx)
    try:
        while True:
            if signal.aborted or relay.stopped:
                raise Aborted(signal.reason or "cancelled")
            try:
                item = next(generator)
            except StopIteration as stop:
                return stop.value
            if type(item) is ProgressEvent:
                relay.post(item)
            elif type(item) is Respond:
                return item.value
            else:
                ignored.note(item)
    finally:
        generator.close()  # a no-op when it has finished; otherwise its finally runs here, once


class _ProgressRelay:
    """Hands progress from a worker thread to the loop, coalesced.

    Only the latest event waits, and at most one loop callback is scheduled at a
    time, so a generator yielding in a tight loop costs the loop one callback per
    time it gets to run, not one per yield; the order of events is kept.
    """

    __slots__ = ("_lock", "_offer", "_pending", "_schedule", "_scheduled", "stopped")

    def __init__(self, offer: Offer, schedule: Callable[[Callable[[], None]], object]) -> None:
        self._offer = offer
        self._schedule = schedule
        self._lock = threading.Lock()
        self._pending: ProgressEvent | None = None
        self._scheduled = False
        #: set on the loop when the awaiting task was cancelled; the thread stops at its next step
        self.stopped = False

    def stop(self) -> None:
        """Loop thread: the awaiting task was cancelled; the generator stops before its next step."""
        self.stopped = True

    def post(self, event: ProgressEvent) -> None:
        """Worker thread: make ``event`` the one waiting; wake the loop unless it is already woken."""
        with self._lock:
            self._pending = event
            if self._scheduled:
                return
            self._scheduled = True
        self._schedule(self.deliver)

    def deliver(self) -> None:
        """Loop thread: offer the waiting event, if any."""
        with self._lock:
            event, self._pending = self._pending, None
            self._scheduled = False
        if event is not None:
            try:
                self._offer(event)
            except Exception:  # never into the loop's own machinery (trio would crash the run)
                log.exception("fusion-nb progress delivery failed")


class _IgnoredYields:
    """Logs the first non-progress yield of a tool at debug level, once."""

    __slots__ = ("seen", "tool_name")

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name
        self.seen = False

    def note(self, item: Any) -> None:
        """Remember (and log, the first time) a yield that is neither progress nor a response."""
        if not self.seen:
            self.seen = True
            log.debug(
                "tool %s yielded %r; only progress() events are forwarded, other yields are ignored",
                self.tool_name,
                type(item).__name__,
            )
