"""A tool's ``ctx.log`` lines as MCP ``notifications/message``, filtered by the level its client chose.

2025-11-25: the client picks a level per connection with ``logging/setLevel`` (kept here,
forgotten when the connection closes; until then every level is sent, as the SDK does).
2026-07-28 has no ``logging/setLevel`` (the SDK answers ``-32601``): each request opts in with
``_meta["io.modelcontextprotocol/logLevel"]``, and a request without it gets no log lines.
Lines ride the call's own stream (its POST's SSE on HTTP) and all are sent before its result.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types import LOG_LEVEL_META_KEY

from ..engine import LOG_LEVELS, LogEvent
from ..engine.lowlevel import spawn
from ._sdk import connection_of, on_connection_close

log = logging.getLogger("fusion_nb")
MAX_PENDING = 1000
"""Lines a call may have waiting to be written; beyond, new ones are dropped and counted (a
handler logging in a tight loop must not grow the server's memory while a slow client reads)."""


class LogLevels:
    """The ``logging/setLevel`` each handshake-era connection chose, and the level a request wants."""

    def __init__(self) -> None:
        self._levels: dict[object, str] = {}

    async def set_level(self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> Any:
        """(Handshake era only: the SDK answers -32601 for it on 2026-07-28 before it gets here.)"""
        key = connection_of(ctx.session)
        if key not in self._levels:
            on_connection_close(ctx.session, lambda: self._levels.pop(key, None))
        self._levels[key] = params.level
        return types.EmptyResult()

    def least(self, ctx: ServerRequestContext[Any, Any], modern: bool) -> int | None:
        """The index in ``LOG_LEVELS`` of the least severe level to send, or ``None``: send none."""
        if modern:
            wanted = (ctx.meta or {}).get(LOG_LEVEL_META_KEY)
        else:
            wanted = self._levels.get(connection_of(ctx.session), LOG_LEVELS[0])
        return LOG_LEVELS.index(wanted) if wanted in LOG_LEVELS else None


class LogPump:
    """Takes a call's lines synchronously (``offer``) and writes them in order until ``finish``.

    Its sender task starts with the first line the client wants: a 2025 client hears every
    level by default, and a call that logs nothing must not pay for a task per call.
    """

    __slots__ = ("_closed", "_ctx", "_done", "_dropped", "_least", "_logger", "_pending", "_stop_sender", "_wake")

    def __init__(self, ctx: ServerRequestContext[Any, Any], least: int, logger: str) -> None:
        self._ctx = ctx
        self._least = least
        self._logger = logger
        self._pending: deque[LogEvent] = deque()
        self._dropped = 0
        self._closed = False
        self._stop_sender: Callable[[], None] | None = None  # set once the sender task runs
        self._wake: anyio.Event | None = None  # (made when the sender starts)
        self._done: anyio.Event | None = None

    def offer(self, event: LogEvent) -> None:
        """Engine ``on_log`` hook: keep the line if its level is wanted and there is room."""
        if self._closed or LOG_LEVELS.index(event.level) < self._least:
            return
        if len(self._pending) >= MAX_PENDING:
            self._dropped += 1
            return
        self._pending.append(event)
        if self._stop_sender is None:
            self._wake, self._done = anyio.Event(), anyio.Event()
            sender = spawn(self._run, name=f"fusion-nb log lines of {self._logger}", on_done=self._done.set)
            self._stop_sender = sender.cancel
        else:
            assert self._wake is not None
            self._wake.set()

    async def finish(self) -> None:
        """The call has its result: write what is pending first (lines go before the result)."""
        self._closed = True
        if self._stop_sender is not None:
            assert self._wake is not None and self._done is not None
            self._wake.set()
            await self._done.wait()

    def abandon(self) -> None:
        """The call ended without a result to send (cancelled): drop what is pending."""
        self._closed = True
        self._pending.clear()
        if self._stop_sender is not None:
            self._stop_sender()

    async def _run(self) -> None:
        try:
            while True:
                while self._pending:
                    await self._send(self._pending.popleft())
                if self._dropped:
                    dropped, self._dropped = self._dropped, 0
                    await self._send(LogEvent("warning", f"{dropped} log lines were dropped: the client read slowly."))
                if self._closed and not self._pending:
                    return
                assert self._wake is not None
                await self._wake.wait()
                self._wake = anyio.Event()
        except Exception as exc:  # the client is gone: its call's own answer meets the same end
            log.debug("fusion-nb: log lines of %s not sent: %r", self._logger, exc)

    async def _send(self, event: LogEvent) -> None:
        data: Any = {"message": event.message, **event.data} if event.data else event.message
        params = types.LoggingMessageNotificationParams(level=event.level, data=data, logger=self._logger)  # type: ignore[arg-type]
        await self._ctx.session.send_notification(
            types.LoggingMessageNotification(params=params), related_request_id=self._ctx.request_id
        )
