"""fusion-nb: host MCP tools in a Jupyter kernel.

``fnb.f`` builds tools on ``fnb.default_app``, the app the notebook extension serves.
``fnb.Fusion`` is the app: the engine's registry and runner plus its two MCP faces,
``mcp_server()`` and ``http_app()``, which import the MCP adapter only when used (the
engine itself never imports the SDK).
"""

import importlib.metadata as _metadata
from pathlib import Path as _Path
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._checkout import map_checkout_widgets as _map_checkout_widgets
from .engine import (
    AnswerLimits,
    Audio,
    Call,
    CallResult,
    Context,
    EmbeddedResource,
    Image,
    InputResponse,
    ProgressEvent,
    ResourceLink,
    Tool,
    ToolError,
    ask,
    input_response,
    progress,
    read_input,
    read_request_state,
    require_input,
    respond,
)
from .engine import App as _App
from .mcp.options import HttpOptions as _HttpOptions
from .mcp.options import ServerOptions as _ServerOptions
from .mcp.options import with_options as _with_options

if _TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from .mcp import FusionServer
    from .mcp.http import HttpApp


class Fusion(_App):
    """An app: a registry of tools (``app.f``), the engine running their calls, and its MCP faces.

    ``Fusion(name, version=..., instructions=..., middleware=..., context_factory=...,
    grace=..., max_rounds=..., input_channel=..., answer_limits=AnswerLimits(max_bytes=..., max_side=...))``;
    see the engine for each option (every answer is bounded: 1 MiB and 1568 px by default).
    """

    @_with_options(_ServerOptions)
    def mcp_server(self, options: _ServerOptions) -> "FusionServer":
        """The SDK's low-level ``Server`` serving this app: ``mcp.Client(server)``, stdio or HTTP.

        Same as ``fusion_nb.mcp.mcp_server(app, ...)``; the options are ``ServerOptions``'.
        """
        from .mcp.server import FusionServer

        return FusionServer(self, options)

    @_with_options(_HttpOptions)
    def http_app(self, options: _HttpOptions) -> "HttpApp":
        """The Streamable HTTP ASGI app serving this app (token, DNS-rebinding, size and time limits).

        Same as ``fusion_nb.mcp.http_app(app, ...)``; the options are ``HttpOptions``'.
        """
        from .mcp.http import HttpApp

        return HttpApp(self, options)


# Run from a source checkout (e.g. a notebook at the repository root), ``fusion_nb.widgets``
# is the checkout's top-level ``widgets/`` folder, as pyproject maps it for an installed copy.
_map_checkout_widgets(_Path(__file__).resolve().parent)

default_app = Fusion("fusion-nb")
f = default_app.f

__version__ = _metadata.version("fusion-nb")

__all__ = [
    "AnswerLimits",
    "Audio",
    "Call",
    "CallResult",
    "Context",
    "EmbeddedResource",
    "Fusion",
    "Image",
    "InputResponse",
    "ProgressEvent",
    "ResourceLink",
    "Tool",
    "ToolError",
    "ask",
    "default_app",
    "f",
    "input_response",
    "load_ipython_extension",
    "progress",
    "read_input",
    "read_request_state",
    "require_input",
    "respond",
    "unload_ipython_extension",
]


def load_ipython_extension(shell: "InteractiveShell") -> None:
    """``%load_ext fusion_nb``: the cell magics, ``%fusion`` and interrupt wiring (see ``fusion_nb.notebook``)."""
    from .notebook import load_ipython_extension as load

    load(shell)


def unload_ipython_extension(shell: "InteractiveShell") -> None:
    """``%unload_ext fusion_nb``: undo what loading did."""
    from .notebook import unload_ipython_extension as unload

    unload(shell)
