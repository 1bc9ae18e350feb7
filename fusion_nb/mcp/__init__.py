"""The MCP adapter: a Fusion app served by the official SDK's low-level ``Server``.

``mcp_server(app)`` (in-memory, stdio, HTTP), ``http_app(app, ...)`` (Streamable
HTTP ASGI app with token, DNS-rebinding and size checks), ``serve_stdio(app)``; their
options are defined once, in ``ServerOptions`` and ``HttpOptions``.

Submodules load on first use: ``python -m fusion_nb.mcp.stdio`` must not find
``fusion_nb.mcp.stdio`` already imported by its package (runpy warns), and
importing the package should not pull in uvicorn or the HTTP stack.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._lazy import lazy_attributes as _lazy_attributes

if _TYPE_CHECKING:
    from .convert import tool_definition
    from .http import HttpApp, connect, http_app, tokens_from_env
    from .jobs import enable_job_tools
    from .options import HttpOptions, OAuthSettings, ServerOptions
    from .server import FusionServer, RequestInfo, mcp_server
    from .stdio import serve_stdio

_HOMES = {
    "FusionServer": ".server",
    "RequestInfo": ".server",
    "mcp_server": ".server",
    "HttpApp": ".http",
    "HttpOptions": ".options",
    "OAuthSettings": ".options",
    "ServerOptions": ".options",
    "http_app": ".http",
    "connect": ".http",
    "tokens_from_env": ".http",
    "serve_stdio": ".stdio",
    "tool_definition": ".convert",
    "enable_job_tools": ".jobs",
}

__all__ = [
    "FusionServer",
    "HttpApp",
    "HttpOptions",
    "OAuthSettings",
    "RequestInfo",
    "ServerOptions",
    "connect",
    "enable_job_tools",
    "http_app",
    "mcp_server",
    "serve_stdio",
    "tokens_from_env",
    "tool_definition",
]


__getattr__ = _lazy_attributes(__name__, _HOMES)
