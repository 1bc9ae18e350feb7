"""The in-memory ways to reach a server with the SDK's real ``mcp.Client``."""

from __future__ import annotations

from typing import Any

from mcp import Client
from mcp.client._memory import InMemoryTransport  # the SDK's in-memory JSON-RPC pair (private module)

ERAS = ["2025-memory", "2026-direct", "2026-stream"]


def client_for(server: Any, era: str, **options: Any) -> Client:
    if era == "2025-memory":
        return Client(server, mode="legacy", **options)
    if era == "2026-direct":
        return Client(server, **options)
    if era == "2026-stream":
        return Client(InMemoryTransport(server), **options)  # auto: probes server/discover, then 2026
    raise ValueError(era)
