"""Running a handler of any of the four kinds, with progress routed out of it.

Each runner is ``async run(input, ctx, offer) -> response value``. Cancellation of
the task running it interrupts whatever it awaits; sync handlers run in worker
threads that are abandoned on cancel (their late results are discarded).
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import anyio

from ._streaming import ProgressEvent, Respond

log = logging.getLogger("fusion_nb")

Offer = Callable[[ProgressEvent], None]
InThread = Callable[[Callable[[], Any]], Awaitable[Any]]


def handler_kind(fn: Callable[..., Any]) -> str:
    """One of ``async``, ``async_gen``, ``sync``, ``sync_gen`` (checked on the user's function)."""
    target = inspect.unwrap(fn)
    if inspect.isasyncgenfunction(target):
        return "async_gen"
    if inspect.iscoroutinefunction(target):
        return "async"
    if inspect.isgeneratorfunction(target):
        return "sync_gen"
    if callable(target):
        return "sync"
    raise TypeError(f"a handler must be callable, got {fn!r}")


def make_runner(fn: Callable[..., Any], tool_name: str):
    kind = handler_kind(fn)
    ignored = _IgnoredYields(tool_name)
    if kind == "async":

        async def run(input: Any, ctx: Any, offer: Offer, in_thread: InThread) -> Any:
            return await fn(input, ctx)

    elif kind == "async_gen":

        async def run(input: Any, ctx: Any, offer: Offer, in_thread: InThread) -> Any:
            async with aclosing(fn(input, ctx)) as stream:
                async for item in stream:
                    if type(item) is ProgressEvent:
                        offer(item)
                    elif type(item) is Respond:
                        return item.value  # aclosing() closes the generator
                    else:
                        ignored.note(item)
            return None

    elif kind == "sync":

        async def run(input: Any, ctx: Any, offer: Offer, in_thread: InThread) -> Any:
            return await in_thread(lambda: fn(input, ctx))

    else:

        async def run(input: Any, ctx: Any, offer: Offer, in_thread: InThread) -> Any:
            driver = _SyncGeneratorDriver(fn(input, ctx), in_thread)
            try:
                while True:
                    done, item = await driver.next()
                    if done:
                        return item
                    if type(item) is ProgressEvent:
                        offer(item)
                    elif type(item) is Respond:
                        return item.value
                    else:
                        ignored.note(item)
            finally:
                await driver.close()

    run.kind = kind  # type: ignore[attr-defined]
    return run


class _SyncGeneratorDriver:
    """Steps a sync generator in worker threads; closes it in the thread that holds it.

    If the caller stops waiting mid-step (abort), the step's thread closes the
    generator when ``next()`` returns, so its ``finally`` runs exactly once and
    never on the event loop.
    """

    def __init__(self, gen: Any, in_thread: InThread) -> None:
        self.gen = gen
        self.in_thread = in_thread
        self.lock = threading.Lock()
        self.stepping = False
        self.abandoned = False

    def _step(self) -> tuple[bool, Any]:
        try:
            return False, next(self.gen)
        except StopIteration as stop:
            return True, stop.value
        finally:
            with self.lock:
                self.stepping = False
                if self.abandoned:
                    self.gen.close()

    async def next(self) -> tuple[bool, Any]:
        self.stepping = True
        return await self.in_thread(self._step)

    async def close(self) -> None:
        with self.lock:
            if self.stepping:
                self.abandoned = True  # the running step closes it
                return
        if inspect.getgeneratorstate(self.gen) == inspect.GEN_CLOSED:
            return
        with anyio.CancelScope(shield=True):
            await self.in_thread(self.gen.close)


class _IgnoredYields:
    """Logs the first non-progress yield of a tool at debug level, once."""

    __slots__ = ("seen", "tool_name")

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name
        self.seen = False

    def note(self, item: Any) -> None:
        if not self.seen:
            self.seen = True
            log.debug(
                "tool %s yielded %r; only progress() events are forwarded, other yields are ignored",
                self.tool_name,
                type(item).__name__,
            )
