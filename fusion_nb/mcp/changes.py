"""Telling connected clients that the tool list changed.

Two eras, two routes:

* handshake era (2025-11-25): the server may notify spontaneously on the
  connection's standalone channel. Connections are remembered when their
  ``notifications/initialized`` arrives and forgotten when they close.
* 2026-07-28: change notifications travel only on a ``subscriptions/listen``
  stream the client opened; the SDK's ``ListenHandler`` serves those from a bus,
  which this module feeds.

Registry listeners are synchronous, so the sends run in one detached task per
burst of changes (several registrations in a row produce one notification).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ListenHandler, ServerEvent, ToolsListChanged

from ..engine import spawn
from ._sdk import connection_of, on_connection_close

log = logging.getLogger("fusion_nb")


class ToolsChangedBus:
    """A ``SubscriptionBus`` whose fan-out is synchronous, so a registry listener can publish."""

    def __init__(self) -> None:
        self._listeners: dict[object, Callable[[ServerEvent], None]] = {}

    def emit(self, event: ServerEvent) -> None:
        """Deliver ``event`` to every listen stream now (a failing listener is logged, not raised)."""
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:
                log.exception("fusion-nb subscription listener failed")

    async def publish(self, event: ServerEvent) -> None:
        """The ``SubscriptionBus`` entry: ``emit``, then a checkpoint."""
        self.emit(event)
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        """Add a listen stream's listener; the returned function removes it."""
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe


class ToolsChangedNotifier:
    """Fans registry changes out to live handshake sessions and 2026 listen streams."""

    def __init__(self) -> None:
        self.bus = ToolsChangedBus()
        self.listen_handler = ListenHandler(self.bus)
        self._sessions: dict[object, ServerSession] = {}  # one per connection (see ``connection_of``)
        self._scheduled = False

    def __len__(self) -> int:
        """How many 2025-era connections get ``tools/list_changed`` (one each, however often they said so)."""
        return len(self._sessions)

    async def on_initialized(self, ctx: Any, params: Any) -> None:
        """``notifications/initialized`` handler: remember the connection until it closes.

        Keyed by connection: a client repeating ``initialized`` (20,000 times: +174 MB, and
        every tool change sent 20,000 times, before) adds nothing after the first.
        """
        session: ServerSession = ctx.session
        key = connection_of(session)
        if key in self._sessions:
            return
        self._sessions[key] = session
        on_connection_close(session, lambda: self._sessions.pop(key, None))

    def changed(self) -> None:
        """Registry listener: publish to listen streams now, to sessions from a detached task."""
        self.bus.emit(ToolsListChanged())
        if not self._sessions or self._scheduled:
            return
        try:
            anyio.get_current_task()
        except Exception:  # no event loop here: nothing is connected through this thread
            return
        self._scheduled = True
        spawn(self._broadcast, name="fusion-nb tools/list_changed")

    async def _broadcast(self) -> None:
        self._scheduled = False
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:
                log.debug("dropping a closed MCP session from tools/list_changed", exc_info=True)
                self._sessions.pop(key, None)
