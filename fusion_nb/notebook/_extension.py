"""``%load_ext fusion_nb``: one ``Host`` per shell, its magics registered; what ``fusion_nb.notebook`` exports."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..engine import InputRequest
from .host import Host

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from .serve import KernelServer

_hosts: dict[int, Host] = {}


def load_ipython_extension(shell: InteractiveShell) -> None:
    """Idempotent: loading twice keeps the first host."""
    if id(shell) in _hosts:
        return
    import fusion_nb

    from .magics import FusionMagics

    host = _hosts[id(shell)] = Host(shell, fusion_nb.default_app)
    shell.register_magics(FusionMagics(shell, host))


def unload_ipython_extension(shell: InteractiveShell) -> None:
    """``%unload_ext fusion_nb``: stop serving, close the host and remove its magics.

    Unloading a kernel that never loaded the extension does nothing.
    """
    host = _hosts.pop(id(shell), None)
    if host is None:
        return
    host.close()
    for kind, name in (("cell", "fusion_tool"), ("line", "fusion")):
        shell.magics_manager.magics[kind].pop(name, None)


def current_host() -> Host:
    """The host ``%load_ext fusion_nb`` made in this kernel (its traffic log, server, answers).

    Raises ``RuntimeError`` naming the fix when the extension is not loaded.
    """
    from IPython import get_ipython

    shell = get_ipython()
    host = _hosts.get(id(shell)) if shell is not None else None
    if host is None:
        raise RuntimeError("fusion-nb is not loaded in this kernel: run %load_ext fusion_nb first")
    return host


def script_answers(answers: Mapping[str, Any] | Callable[[InputRequest], Any] | None) -> None:
    """Answer the notebook's input requests from a mapping or callable, for unattended runs.

    ``script_answers({"confirm": True})``; ``script_answers(None)`` goes back to the default
    (``FUSION_NB_ANSWERS`` in an unattended run, else forms). Each scripted answer still
    shows its form in the notebook, filled in and marked "answered by script".
    """
    current_host().script_answers(answers)


def server() -> KernelServer:
    """The server started by ``%fusion serve`` (``async with server().client() as c`` connects to it)."""
    running = current_host().server
    if running is None:
        raise RuntimeError("not serving: run %fusion serve first")
    return running  # type: ignore[no-any-return]  # (Host.server is duck-typed: the CLI swaps in a stand-in)
