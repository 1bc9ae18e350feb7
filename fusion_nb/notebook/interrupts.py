"""The kernel's interrupt button, made to reach tool calls promptly.

Two fixes to ipykernel 7.4 behaviour (see the kernel facts):

* On SIGINT ipykernel cancels the awaiting cell with a plain ``call_soon`` from the
  signal handler, which does not wake the selector: the cancel lands when the loop
  next wakes (seconds later). Setting the loop's wakeup fd (done by registering any
  asyncio signal handler) makes every Python-level signal wake the loop.
* While idle the kernel ignores SIGINT, so calls running in the background (widget
  Run buttons, MCP clients) could not be interrupted. While such calls live we
  install our own SIGINT handler. ipykernel swaps handlers around every shell
  message and restores them afterwards, so install and remove only from
  ``loop.call_soon`` scheduled after a message is done (``post_execute``, a call
  starting or settling), never from inside a handler.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from ..engine import CANCELLED, App, Call

_WAKE_SIGNALS = ("SIGUSR2", "SIGRTMAX")
#: why a call the interrupt cancelled ended, as its client reads it (Jupyter interrupts before a restart too)
INTERRUPTED = "the notebook's kernel was interrupted (■ Interrupt, or a restart, which interrupts first)"


def wake_loop_on_signals(loop: asyncio.AbstractEventLoop) -> int | None:
    """Register a no-op asyncio handler for a spare signal; returns it (or None)."""
    for name in _WAKE_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None or signal.getsignal(signum) not in (signal.SIG_DFL, None):
            continue
        try:
            loop.add_signal_handler(signum, lambda: None)
        except (RuntimeError, ValueError, NotImplementedError):
            return None
        return signum
    return None


class IdleInterrupts:
    """Cancels an app's live calls when SIGINT arrives while no cell runs."""

    def __init__(self, app: App, loop: asyncio.AbstractEventLoop) -> None:
        self.app = app
        self.loop = loop
        self.previous: Any = None
        #: while a cell runs, ipykernel's own handler stops it: we stay out of the way
        self.cell_running = False
        self._watching: dict[str, Any] = {}
        self._undo_on_call = app.on_call(self._call_started)

    # -- scheduling: always after ipykernel's own handler swap ----------------------
    def schedule(self) -> None:
        self.loop.call_soon(self.ensure)

    def cell_started(self) -> None:
        self.cell_running = True

    def cell_finished(self) -> None:
        self.cell_running = False
        self.schedule()

    def _call_started(self, call: Call) -> None:
        self._watching[call.id] = call.watch(self._call_changed)
        self.schedule()

    def _call_changed(self, call: Call) -> None:
        if call.settled:
            undo = self._watching.pop(call.id, None)
            if undo is not None:
                undo()
            self.schedule()

    def ensure(self) -> None:
        """Install while calls live; restore the previous handler once none do."""
        current = signal.getsignal(signal.SIGINT)
        installed = current is self  # a bool, so mypy does not narrow ``self`` to the handler's type
        if self.cell_running:
            return
        if self.app.active_calls:
            if not installed:
                self.previous = current
                signal.signal(signal.SIGINT, self)
        elif installed:
            signal.signal(signal.SIGINT, self.previous if self.previous is not None else signal.SIG_IGN)

    # -- the handler ----------------------------------------------------------------
    def __call__(self, signum: int, frame: Any) -> None:
        live = self.app.active_calls
        for call in live:
            self.loop.call_soon_threadsafe(call.cancel, CANCELLED, INTERRUPTED)  # threadsafe also wakes the loop
        if not live and callable(self.previous):
            self.previous(signum, frame)

    def close(self) -> None:
        self._undo_on_call()
        installed = signal.getsignal(signal.SIGINT) is self
        if installed:
            self.loop.call_soon(
                signal.signal, signal.SIGINT, self.previous if self.previous is not None else signal.SIG_IGN
            )
