"""fusion-nb: host MCP tools in a Jupyter kernel.

``fnb.f`` builds tools on ``fnb.default_app``, the app the notebook extension serves.
"""

from pathlib import Path

from ._checkout import map_checkout_widgets
from .app import Fusion
from .engine import (
    Call,
    CallResult,
    Context,
    InputResponse,
    ProgressEvent,
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

# Run from a source checkout (e.g. a notebook at the repository root), ``fusion_nb.widgets``
# is the checkout's top-level ``widgets/`` folder, as pyproject maps it for an installed copy.
map_checkout_widgets(Path(__file__).resolve().parent)

default_app = Fusion("fusion-nb")
f = default_app.f

__version__ = "0.1.0"

__all__ = [
    "Call",
    "CallResult",
    "Context",
    "Fusion",
    "InputResponse",
    "ProgressEvent",
    "Tool",
    "ToolError",
    "ask",
    "default_app",
    "f",
    "input_response",
    "progress",
    "read_input",
    "read_request_state",
    "require_input",
    "respond",
]


def load_ipython_extension(shell):  # ``%load_ext fusion_nb``
    from .notebook import load_ipython_extension as load

    load(shell)


def unload_ipython_extension(shell):
    from .notebook import unload_ipython_extension as unload

    unload(shell)
