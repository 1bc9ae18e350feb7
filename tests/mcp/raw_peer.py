"""A 2025-11-25 JSON-RPC peer on the server's public ``run()``, for messages the SDK client cannot send.

The SDK 2.3 client validates every ``tools/call`` answer as a ``CallToolResult``, so
a ``CreateTaskResult`` cannot come back through it; this peer speaks the raw wire
over the SDK's in-memory streams instead, answers server requests with a callback,
and keeps the notifications it receives.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from mcp.server import Server
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse, jsonrpc_message_adapter


class RawPeer:
    """``await peer.request(method, params)`` returns the result dict or raises ``RawError``."""

    def __init__(self, write: Any, answer: Callable[[str, dict[str, Any]], dict[str, Any]] | None) -> None:
        self._write = write
        self._ids = itertools.count(1)
        self._waiting: dict[Any, tuple[anyio.Event, list[Any]]] = {}
        self.answer = answer
        self.notifications: list[dict[str, Any]] = []
        self.notified = anyio.Event()
        self.initialized: dict[str, Any] = {}

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = next(self._ids)
        done: tuple[anyio.Event, list[Any]] = (anyio.Event(), [])
        self._waiting[request_id] = done
        message = JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)
        await self._write.send(SessionMessage(message))
        await done[0].wait()
        (reply,) = done[1]
        if isinstance(reply, JSONRPCError):
            raise RawError(reply.error.code, reply.error.message)
        return reply.result

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._write.send(SessionMessage(JSONRPCNotification(jsonrpc="2.0", method=method, params=params)))

    async def read(self, read: Any) -> None:
        async for item in read:
            message = item.message if isinstance(item, SessionMessage) else item
            if isinstance(message, JSONRPCResponse | JSONRPCError):
                waiting = self._waiting.pop(message.id, None)
                if waiting is not None:
                    waiting[1].append(message)
                    waiting[0].set()
            elif isinstance(message, JSONRPCRequest):
                result = self.answer(message.method, message.params or {}) if self.answer else {}
                reply = jsonrpc_message_adapter.validate_python({"jsonrpc": "2.0", "id": message.id, "result": result})
                await self._write.send(SessionMessage(reply))
            elif isinstance(message, JSONRPCNotification):
                self.notifications.append({"method": message.method, "params": message.params})
                self.notified.set()
                self.notified = anyio.Event()


class RawError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@contextlib.asynccontextmanager
async def raw_peer(
    server: Server[Any], answer: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None, **capabilities: Any
) -> AsyncIterator[RawPeer]:
    """A handshaken 2025-11-25 peer of ``server`` (``capabilities`` are the client's)."""
    async with (
        create_client_server_memory_streams() as ((client_read, client_write), (server_read, server_write)),
        anyio.create_task_group() as group,
    ):
        group.start_soon(server.run, server_read, server_write, server.create_initialization_options())
        async with handshaken(client_read, client_write, answer, **capabilities) as peer:
            yield peer
        group.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def handshaken(
    read: Any, write: Any, answer: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None, **capabilities: Any
) -> AsyncIterator[RawPeer]:
    """A 2025-11-25 peer on a server's ``(read, write)`` streams (memory, or a stdio process's), initialized."""
    async with anyio.create_task_group() as group:
        peer = RawPeer(write, answer)
        group.start_soon(peer.read, read)
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "raw", "version": "0"},
        }
        with anyio.fail_after(30):
            peer.initialized = await peer.request("initialize", init)
        await peer.notify("notifications/initialized")
        try:
            yield peer
        finally:
            group.cancel_scope.cancel()
