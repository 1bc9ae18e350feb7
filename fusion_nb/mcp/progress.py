"""Per-call progress for MCP clients: strictly increasing, coalesced, flushed before the result.

A task tool run as a plain call (its client has no tasks) also gets a heartbeat: after
``heartbeat`` seconds without progress the pump sends one anyway, so hosts and
proxies with idle timeouts keep a silent minutes-long call alive.

Allocated only for calls whose request asked for progress. The engine offers events
synchronously from the call's worker; a small sender task forwards the newest one at
most once per ``interval`` seconds, and ``close()`` makes it send the last pending
value at once, then pause ``FINAL_SETTLE`` so the client handles it before the result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext

from ..engine import ProgressEvent
from ._sdk import direct_progress_requested

FINAL_SETTLE = 0.02
"""Seconds between a call's last progress notification and its result.

Written in order is not enough: the TypeScript SDK (1.x and 2.x) handles a
notification one microtask later than a response, so when both arrive in one read
the response wins and the client drops the final progress ("unknown token"). A
short pause lets the notification reach the client in a read of its own; it is
paid only by calls that asked for progress and still had a value to send. 5 ms was
not enough for a client still warming up (one drop in 20 floods under CI load).
"""

HEARTBEAT_STEP = 0.001
"""How much a heartbeat raises the progress value: progress must increase with every
notification, and a thousandth of a percent is invisible on any bar."""

Report = Callable[[float, "float | None", "str | None"], Awaitable[None]]


class ProgressPump:
    """Coalesces ``offer()``ed events and sends them through ``report`` (``ctx.session.report_progress``)."""

    __slots__ = ("_closed", "_closing", "_heartbeat", "_high", "_interval", "_message", "_pending", "_report", "_wake")

    def __init__(self, report: Report, interval: float, heartbeat: float | None = None) -> None:
        self._report = report
        self._interval = interval
        #: seconds of silence after which the last value goes out again, a hair higher (``None``: never)
        self._heartbeat = heartbeat
        self._message: str | None = None
        self._high = -1.0  # the highest value accepted so far (sent or pending)
        self._pending: ProgressEvent | None = None
        self._wake = anyio.Event()
        self._closing = anyio.Event()
        self._closed = False

    def offer(self, event: ProgressEvent) -> None:
        """Engine ``on_progress`` hook: keep only values above everything accepted before."""
        if self._closed or not event.percent > self._high:
            return
        self._high = event.percent
        self._pending = event
        self._wake.set()

    def close(self) -> None:
        """No more events: the sender sends what is pending (without waiting) and returns."""
        self._closed = True
        self._closing.set()
        self._wake.set()

    async def run(self) -> None:
        """The sender task: one notification per wake-up, then a pause of ``interval``."""
        while True:
            if self._heartbeat is None:
                await self._wake.wait()
            else:
                with anyio.move_on_after(self._heartbeat) as silence:
                    await self._wake.wait()
                if silence.cancelled_caught:  # a silent handler: tell the client (and every proxy) the call lives
                    self._high = beat = max(self._high, 0.0) + HEARTBEAT_STEP
                    await self._report(beat, 100.0, self._message or "still working")
                    continue
            self._wake = anyio.Event()
            event, self._pending = self._pending, None
            if event is not None:
                self._message = event.message or self._message
                await self._report(event.percent, 100.0, event.message)
            if self._closing.is_set():
                if self._pending is None:
                    if event is not None:
                        await anyio.sleep(FINAL_SETTLE)
                    return
                continue
            with anyio.move_on_after(self._interval):
                await self._closing.wait()


def wants_progress(ctx: ServerRequestContext[Any, Any], modern: bool) -> bool:
    """Whether the request asked for progress (so nothing is allocated when it did not).

    Stream and HTTP transports carry a progress token in ``_meta``. The 2026
    in-process direct path has no token: the caller's callback rides the dispatch
    context instead, which only ``_sdk`` may look at (``modern``: the request speaks
    2026-07-28, the only era with a direct path).
    """
    meta = ctx.meta
    if meta and meta.get("progress_token") is not None:
        return True
    return modern and direct_progress_requested(ctx.session)
