"""Where sync bodies run, and what happens to a thread whose call was aborted.

A thread cannot be killed. When its call is aborted the call answers CANCELLED at
once, but the body goes on until it returns (or notices ``ctx.signal.aborted``),
and until then it still holds its tool's slots: a limit counts bodies that really
run. While its call is live a body counts against anyio's default thread limiter,
like any ``to_thread`` work; once aborted it leaves that limiter and becomes
*abandoned*, so a body that ignores its signal can never starve other sync tools.
Abandoned threads are bounded per app: when ``max_abandoned`` of them run, new sync
calls of a tool that has abandoned threads get SERVER_BUSY.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from ._background import nothing, on_asyncio, wait_through_cancel
from ._errors import Aborted, threads_busy
from ._signal import AbortSignal

T = TypeVar("T")
log = logging.getLogger("fusion_nb")


class ThreadPool:
    """Runs sync bodies in threads and counts the ones left behind by aborted calls."""

    __slots__ = ("_unbounded", "abandoned", "max_abandoned", "running")

    def __init__(self, max_abandoned: int) -> None:
        if max_abandoned < 1:
            raise ValueError("max_abandoned_threads must be at least 1")
        self.max_abandoned = max_abandoned
        #: threads running a body right now, live or abandoned
        self.running = 0
        #: abandoned threads per tool name
        self.abandoned: Counter[str] = Counter()
        self._unbounded: dict[bool, anyio.CapacityLimiter] = {}

    @property
    def abandoned_total(self) -> int:
        """Threads still running for calls that were already aborted."""
        return sum(self.abandoned.values())

    def admit(self, tool_name: str) -> None:
        """Refuse a new sync call of ``tool_name`` while its abandoned threads fill the pool."""
        mine = self.abandoned.get(tool_name, 0)
        if mine and self.abandoned_total >= self.max_abandoned:
            raise threads_busy(tool_name, mine, self.max_abandoned)

    async def run(self, func: Callable[[], T], tool_name: str, signal: AbortSignal) -> T:
        """Run ``func()`` in a thread and wait for it to return, whatever aborts.

        The waiting task is not released by cancellation before the thread ends (the
        call has already answered), so whoever holds the call's slots holds them
        exactly as long as the body runs.
        """
        default = anyio.to_thread.current_default_thread_limiter()
        borrower = object()
        await default.acquire_on_behalf_of(borrower)
        live = True

        def abandon(reason: str) -> None:
            nonlocal live
            if live:
                live = False
                default.release_on_behalf_of(borrower)
                self.abandoned[tool_name] += 1

        undo = signal.on_abort(abandon)
        self.running += 1
        try:
            return await wait_through_cancel(
                anyio.to_thread.run_sync(_reporting_late_errors(func, signal), limiter=self._limiter()), nothing
            )
        finally:
            self.running -= 1
            undo()
            if live:
                default.release_on_behalf_of(borrower)
            else:
                self.abandoned[tool_name] -= 1
                if not self.abandoned[tool_name]:
                    del self.abandoned[tool_name]

    def _limiter(self) -> anyio.CapacityLimiter:
        # The thread itself runs uncounted by anyio: ``run`` does the counting above.
        backend = on_asyncio()
        limiter = self._unbounded.get(backend)
        if limiter is None:
            limiter = self._unbounded[backend] = anyio.CapacityLimiter(math.inf)
        return limiter


def _reporting_late_errors(func: Callable[[], T], signal: AbortSignal) -> Callable[[], T]:
    """``func`` with any error it raises after its call was aborted logged (nobody else will see it)."""

    def body() -> T:
        try:
            return func()
        except Aborted:
            raise
        except BaseException as exc:
            if signal.aborted:
                log.error("%s raised during its cleanup after an abort", signal.label, exc_info=exc)
            raise

    return body
