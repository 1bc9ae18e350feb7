"""``fusion_nb.Fusion``: the engine's app plus its MCP faces.

The engine stays free of the SDK; this subclass is where the layers meet, so
``app.mcp_server()`` and ``app.http_app()`` import the adapter only when used.
"""

from __future__ import annotations

from typing import Any

from .engine import Fusion as EngineFusion


class Fusion(EngineFusion):
    def mcp_server(self, **options: Any) -> Any:
        """The SDK's low-level ``Server`` serving this app (in-memory ``mcp.Client``, stdio, HTTP)."""
        from .mcp import mcp_server

        return mcp_server(self, **options)

    def http_app(self, **options: Any) -> Any:
        """The Streamable HTTP ASGI app (token, DNS-rebinding and size checks; see ``fusion_nb.mcp.http_app``)."""
        from .mcp import http_app

        return http_app(self, **options)
