"""Cells first: the app's ``Gate`` is closed while the kernel executes a person's cell.

Ten agents calling a served kernel in a loop fill every turn of the loop that also
runs the cells (a ``1 + 1`` cell took three times its idle time). ipykernel 7.4 runs one
``execute_request`` at a time on the main shell (``_main_asyncio_lock``), dispatched
to ``kernel.shell_handlers["execute_request"]`` after its ``busy`` status and before
its ``execute_input``: wrapping that handler of one kernel instance closes the gate
from the first moment the request is handled to its reply, earlier than IPython's
``pre_execute`` (after parsing) and later than ``post_execute`` (before the reply).
A subshell's request runs on its own thread and loop, and leaves the gate alone.
Silent requests (a front end's variable inspector) count as cells too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine import Gate

__all__ = ["close_gate_during_cells"]


def close_gate_during_cells(kernel: Any, gate: Gate) -> Callable[[], None] | None:
    """Close ``gate`` while ``kernel`` handles each main-shell ``execute_request``; the undo (``None``: no kernel)."""
    handlers = getattr(kernel, "shell_handlers", None)
    original = handlers.get("execute_request") if isinstance(handlers, dict) else None
    if original is None:
        return None
    assert handlers is not None

    async def execute_request(stream: Any, ident: Any, parent: Any) -> Any:
        if parent.get("header", {}).get("subshell_id") is not None:
            return await original(stream, ident, parent)
        gate.close()
        try:
            return await original(stream, ident, parent)
        finally:
            gate.open()  # (an interrupted or failed cell too: every waiting call passes, in order)

    handlers["execute_request"] = execute_request

    def undo() -> None:
        if handlers.get("execute_request") is execute_request:
            handlers["execute_request"] = original
        gate.open()

    return undo
