"""The MCP adapter: a Fusion app served by the official SDK's low-level ``Server``.

``mcp_server(app)`` (in-memory, stdio, HTTP), ``http_app(app, ...)`` (Streamable
HTTP ASGI app with token, DNS-rebinding and size checks), ``serve_stdio(app)``.
"""

from typing import Any

from ..engine import Tool
from .convert import tool_to_mcp
from .http import http_app
from .server import FusionServer, RequestInfo, build_server
from .stdio import serve_stdio


def mcp_server(app, **options):
    """``Fusion.mcp_server()``: the SDK low-level server for ``app``."""
    return build_server(app, **options)


def tool_definition(tool: Tool) -> dict[str, Any]:
    """The tool exactly as ``tools/list`` sends it to a client: a JSON-ready dict (``%fusion inspect``)."""
    return tool_to_mcp(tool).model_dump(mode="json", by_alias=True, exclude_none=True)


__all__ = ["FusionServer", "RequestInfo", "build_server", "http_app", "mcp_server", "serve_stdio", "tool_definition"]
