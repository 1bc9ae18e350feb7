"""The in-memory ways to reach a server with the SDK's real ``mcp.Client``, through public APIs only.

``2026-stream`` needs JSON-RPC framing over streams (the code path stdio takes)
without a subprocess: ``MemoryTransport`` runs the server's public ``run()`` on the
SDK's public memory-stream pair and hands the client the other ends, as any
``mcp.client.Transport`` does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp import Client
from mcp.client import Transport
from mcp.server import Server
from mcp.shared.memory import create_client_server_memory_streams

ERAS = ["2025-memory", "2026-direct", "2026-stream"]


@contextlib.asynccontextmanager
async def memory_transport(server: Server[Any]) -> AsyncIterator[Any]:
    """Serve ``server`` on in-memory streams until the client is done, then end its stream."""
    done = anyio.Event()

    async def run(read: Any, write: Any) -> None:
        try:
            await server.run(read, write, server.create_initialization_options())
        finally:
            done.set()

    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(run, *server_streams)
        try:
            yield client_streams
        finally:
            await client_streams[1].aclose()  # EOF: the server's loop ends and cancels what it still runs
            with anyio.move_on_after(5):
                await done.wait()
            tg.cancel_scope.cancel()


def client_for(server: Any, era: str, **options: Any) -> Client:
    """A client for ``server`` on ``era`` (not yet connected: use ``async with``)."""
    if era == "2025-memory":
        return Client(server, mode="legacy", **options)
    if era == "2026-direct":
        return Client(server, **options)
    if era == "2026-stream":
        transport: Transport = memory_transport(server)  # type: ignore[assignment]
        return Client(transport, **options)  # auto: probes server/discover, then 2026
    raise ValueError(era)


async def refused_for_capability(call: Any, modern: bool, required: dict[str, Any]) -> str:
    """What a caller that cannot answer a tool's question gets, in one sentence: on 2026 a ``-32021``
    error naming ``required`` (SEP-2575), on 2025 an ``ELICITATION_UNSUPPORTED`` result."""
    import pytest
    from mcp import MCPError

    if modern:
        with pytest.raises(MCPError) as raised:
            await call
        assert raised.value.error.code == -32021, raised.value.error
        assert raised.value.error.data == {"requiredCapabilities": required}, raised.value.error.data
        return str(raised.value)
    result = await call
    text = result.content[0].text
    assert result.is_error and text.startswith("[ELICITATION_UNSUPPORTED] "), text
    return text.removeprefix("[ELICITATION_UNSUPPORTED] ")
