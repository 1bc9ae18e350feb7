"""The engine's event-loop seam, for transports and hosts (as ``anyio.lowlevel`` is for anyio's).

A tool's author never needs these: the loop backends (asyncio, trio, a kernel's loop),
watching a file descriptor, detached work counted per app, and holding calls back.
"""

from ._app import gating_calls
from ._backends import Backend, Cancellable, Event, Interruptible, ReadWatch, current_backend
from ._background import spawn
from ._gate import Gate

__all__ = [
    "Backend",
    "Cancellable",
    "Event",
    "Gate",
    "Interruptible",
    "ReadWatch",
    "current_backend",
    "gating_calls",
    "spawn",
]
