"""Telling connected clients that the tool, resource or prompt list changed.

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
from mcp.server.subscriptions import (
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)

from ..engine.lowlevel import spawn
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


#: each list's 2026 event and the handshake session's sender of its ``notifications/*/list_changed``
_LISTS: dict[str, tuple[Callable[[], ServerEvent], str]] = {
    "tools": (ToolsListChanged, "send_tool_list_changed"),
    "resources": (ResourcesListChanged, "send_resource_list_changed"),
    "prompts": (PromptsListChanged, "send_prompt_list_changed"),
}


class ToolsChangedNotifier:
    """Fans tool, resource and prompt list changes out to live handshake sessions and 2026 listen streams."""

    def __init__(self) -> None:
        self.bus = ToolsChangedBus()
        self.listen_handler = ListenHandler(self.bus)
        self._sessions: dict[object, ServerSession] = {}  # one per connection (see ``connection_of``)
        self._pending: dict[str, None] = {}  # the lists changed since the last broadcast, in order

    def __len__(self) -> int:
        """How many 2025-era connections get ``tools/list_changed`` (one each, however often they said so)."""
        return len(self._sessions)

    async def on_initialized(self, ctx: Any, params: Any) -> None:
        """``notifications/initialized`` handler: remember the connection until it closes.

        Keyed by connection: a client repeating ``initialized`` adds nothing after the first
        (each repeat once kept one more listener, and every tool change went out once per
        repeat; ``tests/mcp/test_http_sessions.py`` repeats it).
        """
        session: ServerSession = ctx.session
        key = connection_of(session)
        if key in self._sessions:
            return
        self._sessions[key] = session
        on_connection_close(session, lambda: self._sessions.pop(key, None))

    def changed(self, kind: str = "tools") -> None:
        """Registry listener (``kind``: tools, resources or prompts): publish to listen streams now,
        to sessions from a detached task (one notification per list per burst)."""
        event, _ = _LISTS[kind]
        self.bus.emit(event())
        if not self._sessions or kind in self._pending:
            return
        try:
            anyio.get_current_task()
        except Exception:  # no event loop here: nothing is connected through this thread
            return
        scheduled = bool(self._pending)
        self._pending[kind] = None
        if not scheduled:
            spawn(self._broadcast, name="fusion-nb list_changed")

    async def _broadcast(self) -> None:
        kinds = list(self._pending)
        self._pending.clear()
        for key, session in list(self._sessions.items()):
            for kind in kinds:
                try:
                    await getattr(session, _LISTS[kind][1])()
                except Exception:
                    log.debug("dropping a closed MCP session from %s/list_changed", kind, exc_info=True)
                    self._sessions.pop(key, None)
                    break
