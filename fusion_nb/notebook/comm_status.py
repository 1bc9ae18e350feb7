"""The idle status ipykernel leaves out for widget messages handled while a cell awaits.

Why this exists. ipywidgets' front end (JupyterLab, Notebook 7 and VS Code share it)
throttles each model: after it sends one ``update`` it holds the next one until the
kernel publishes an ``idle`` status whose parent is that update (``_pending_msgs`` in
``@jupyter-widgets/base``). ipykernel 7.4 handles ``comm_open``, ``comm_msg`` and
``comm_close`` that arrive while an async cell awaits right away, with
``dispatch_shell(..., concurrent=True)``, and in that mode publishes no status at all.
So the first keystroke into a form's text box reaches the kernel and every later one
stays in the browser for good: type "Grace Hopper" while ``await onboard()`` waits and
the tool reads ``"G"``. The model is never synced again, even after the cell ends.

The fix is the message that is missing, sent as ipykernel sends it for a message it
does not dispatch concurrently: ``busy`` before the handler, ``idle`` after, both with
the comm message as parent. JupyterLab's kernel indicator follows every status message,
so after that ``idle`` the cell that still runs gets its ``busy`` back (only while it is
still running: its own ``idle`` must stay the last word).

This is the one place fusion-nb touches ipykernel's dispatch: it wraps the public
``Kernel.dispatch_shell`` of one kernel instance, nothing private, and only when that
method has the ``concurrent`` keyword it relies on. ``tests/notebook/test_comm_status.py``
pins the contract on a real kernel: exactly one ``idle`` per concurrent comm message.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["install_comm_status"]

_COMM_TYPES = frozenset({"comm_open", "comm_msg", "comm_close"})


def install_comm_status(kernel: Any, cell_running: Callable[[], bool]) -> Callable[[], None] | None:
    """Publish busy/idle around comm messages ``kernel`` dispatches concurrently.

    ``cell_running()`` says whether the cell holding the shell is still before its
    ``post_execute`` (then its ``busy`` is restored after the comm's ``idle``). Returns
    the undo, or ``None`` when this kernel has no concurrent comm dispatch to mend.
    """
    original = getattr(kernel, "dispatch_shell", None)
    if original is None or "concurrent" not in _parameters(original):
        return None

    async def dispatch_shell(msg: Any, /, subshell_id: str | None = None, *, concurrent: bool = False) -> None:
        if not concurrent:
            return await original(msg, subshell_id=subshell_id)  # type: ignore[no-any-return]
        holder = kernel.get_parent("shell")  # the request holding the shell: the awaiting cell
        header = _header(kernel, msg)
        comm = header is not None and header.get("msg_type") in _COMM_TYPES
        if comm:
            _publish(kernel, "busy", {"header": header})
        try:
            await original(msg, subshell_id=subshell_id, concurrent=True)
        finally:
            if comm:
                _publish(kernel, "idle", {"header": header})
                if subshell_id is None and holder and cell_running():
                    _publish(kernel, "busy", holder)

    kernel.dispatch_shell = dispatch_shell

    def undo() -> None:
        if kernel.__dict__.get("dispatch_shell") is dispatch_shell:
            del kernel.dispatch_shell

    return undo


def _parameters(function: Callable[..., Any]) -> set[str]:
    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def _header(kernel: Any, msg: Any) -> dict[str, Any] | None:
    """The message's header only (its content stays packed), as ``shell_main`` reads it."""
    try:
        _, frames = kernel.session.feed_identities(msg, copy=False)
        header: dict[str, Any] = kernel.session.deserialize(frames, content=False, copy=False)["header"]
    except Exception:
        return None
    return header


def _publish(kernel: Any, state: str, parent: dict[str, Any]) -> None:
    kernel.session.send(
        kernel.iopub_socket,
        "status",
        {"execution_state": state},
        parent=parent,
        ident=f"kernel.{kernel.ident}.status".encode(),
    )
