"""Knowing when a page connects to this kernel: a reload, a reopened notebook, a second tab.

A page's widget manager (JupyterLab, Notebook 7) opens ipywidgets' control comm to
fetch every live widget model as it loads. That ``comm_open`` is handled even while a
cell awaits (ipykernel dispatches comm messages concurrently), so it is the one moment
the kernel learns that a page may have lost a form its running cell waits on: an
unsaved page reloads with that cell's output empty, and every later cell would queue
behind it in the kernel, silently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: ipywidgets' control comm target (``@jupyter-widgets/base``'s ``jupyter.widget.control``)
CONTROL_TARGET = "jupyter.widget.control"


def on_page_connected(callback: Callable[[], None]) -> Callable[[], None] | None:
    """Call ``callback()`` each time a page's widget manager connects; returns the undo (``None``: no comms here)."""
    try:
        import ipywidgets  # noqa: F401  (registers its comm targets in a kernel)
        from comm import get_comm_manager
    except ImportError:  # pragma: no cover - ipywidgets requires comm
        return None
    manager = get_comm_manager()
    original = getattr(manager, "targets", {}).get(CONTROL_TARGET)
    if original is None:
        return None

    def opened(comm: Any, msg: Any) -> Any:
        try:
            return original(comm, msg)  # the page gets its widgets first
        finally:
            callback()

    manager.register_target(CONTROL_TARGET, opened)

    def undo() -> None:
        if manager.targets.get(CONTROL_TARGET) is opened:
            manager.register_target(CONTROL_TARGET, original)

    return undo
