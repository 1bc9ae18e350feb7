"""The MCP adapter: a Fusion app served by the official SDK's low-level ``Server``.

``mcp_server(app)`` (in-memory, stdio, HTTP), ``http_app(app, ...)`` (Streamable
HTTP ASGI app with token, DNS-rebinding and size checks), ``serve_stdio(app)``.

Submodules load on first use: ``python -m fusion_nb.mcp.stdio`` must not find
``fusion_nb.mcp.stdio`` already imported by its package (runpy warns), and
importing the package should not pull in uvicorn or the HTTP stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .convert import tool_definition
    from .http import connect, http_app, tokens_from_env
    from .server import FusionServer, RequestInfo, mcp_server
    from .stdio import serve_stdio

_HOMES = {
    "FusionServer": ".server",
    "RequestInfo": ".server",
    "mcp_server": ".server",
    "http_app": ".http",
    "connect": ".http",
    "tokens_from_env": ".http",
    "serve_stdio": ".stdio",
    "tool_definition": ".convert",
}

__all__ = [
    "FusionServer",
    "RequestInfo",
    "connect",
    "http_app",
    "mcp_server",
    "serve_stdio",
    "tokens_from_env",
    "tool_definition",
]


def __getattr__(name: str) -> Any:
    """Import the submodule defining ``name`` on first access (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value
