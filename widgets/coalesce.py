"""Coalescing: many changes, at most one widget flush per interval.

A tool may yield progress thousands of times a second; each widget state change is
a comm message to the browser. ``Coalescer`` turns any burst into one flush per
``interval`` using the running asyncio loop's ``call_later`` (no threads). Without a
running asyncio loop it flushes at once (nothing could run a timer).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class Coalescer:
    """``request()`` marks dirty; ``flush`` runs later, once; ``now()`` flushes at once."""

    __slots__ = ("_flush", "_handle", "_last", "closed", "interval")

    def __init__(self, flush: Callable[[], None], interval: float = 0.1) -> None:
        self._flush = flush
        self.interval = interval
        self._handle: asyncio.TimerHandle | None = None
        self._last = float("-inf")
        self.closed = False

    @property
    def pending(self) -> bool:
        return self._handle is not None

    def request(self) -> None:
        if self.closed or self._handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.now()
            return
        delay = max(0.0, self._last + self.interval - loop.time())
        self._handle = loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._run()

    def now(self) -> None:
        """Flush immediately (the final state must be exact) and drop any pending timer."""
        self.cancel()
        self._run()

    def _run(self) -> None:
        with contextlib.suppress(RuntimeError):  # no loop: nothing to pace against
            self._last = asyncio.get_running_loop().time()
        self._flush()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def close(self) -> None:
        """No more flushes, no timer left behind."""
        self.cancel()
        self.closed = True
