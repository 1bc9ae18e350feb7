"""One bridged call's progress, relayed to the host in order, never backwards, the last value before the result.

The SDK client runs each progress notification's callback in a task of its own, so two
callbacks may finish in either order, and the last may run after the call has returned (its
result then reaches the host first, and the value is lost or late). Here a callback's first
step only records the value, synchronously; sending is serialised, and ``finish`` sends
what is still unsent before the result goes. A callback's task is started before the
response that ends the call is read, so by the time the caller has passed one checkpoint
after the call returned, every callback of that call has recorded its value. Like the
server's own progress (``fusion_nb.mcp.progress.FINAL_SETTLE``), the result then waits until
the last notification has had its own read at the host: the TypeScript SDK drops a
progress that arrives in one read with the result.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel

from ..mcp.progress import FINAL_SETTLE

Report = Callable[[float, float | None, str | None], Awaitable[None]]


class ProgressRelay:
    """Sends the highest progress recorded so far, each value at most once, in rising order."""

    def __init__(self, report: Report, settle: float = FINAL_SETTLE) -> None:
        self._report = report
        self._settle = settle
        self._latest: tuple[float, float | None, str | None] | None = None
        self._sent = -math.inf
        self._sent_at = -math.inf
        self._sending = anyio.Lock()

    def record(self, progress: float, total: float | None, message: str | None) -> None:
        """Keep ``progress`` if it is the highest yet (the protocol's values only rise)."""
        if self._latest is None or progress > self._latest[0]:
            self._latest = (progress, total, message)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The SDK client's ``progress_callback``."""
        self.record(progress, total, message)
        await self._send_latest()

    async def finish(self) -> None:
        """Send what is recorded and not yet sent; await it before answering the host."""
        await anyio.lowlevel.checkpoint()  # callbacks already started record their values first
        await self._send_latest()
        await anyio.sleep(max(0.0, self._sent_at + self._settle - anyio.current_time()))

    async def _send_latest(self) -> None:
        async with self._sending:
            latest = self._latest
            if latest is not None and latest[0] > self._sent:
                self._sent = latest[0]
                await self._report(*latest)
                self._sent_at = anyio.current_time()
