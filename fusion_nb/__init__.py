"""fusion-nb: host MCP tools in a Jupyter kernel.

``fnb.f`` builds tools on ``fnb.default_app``, the app the notebook extension serves.
"""

from .engine import (
    Call, CallResult, Context, Fusion, ProgressEvent, Tool, ToolError, progress, respond,
)

default_app = Fusion("fusion-nb")
f = default_app.f

__version__ = "0.1.0"

__all__ = [
    "Call", "CallResult", "Context", "Fusion", "ProgressEvent", "Tool", "ToolError",
    "default_app", "f", "progress", "respond",
]
