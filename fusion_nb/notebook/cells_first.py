"""Cells first: the app's ``Gate`` is closed while the kernel executes a person's cell.

Ten agents calling a served kernel in a loop fill every turn of the loop that also
runs the cells (a ``1 + 1`` cell took three times its idle time). In ipykernel 7.4 a cell's
request crosses threads: the shell channel thread reads it from the client and hands it
to the main thread's loop, which handles one ``execute_request`` at a time
(``_main_asyncio_lock``) in ``kernel.shell_handlers["execute_request"]``; the reply goes
back through that thread and the ``idle`` status through the iopub thread. A ``1 + 1``
cell runs within one loop step, so what it waits for is the crossing: the loop's turns
full of agents' work, and each thread's wait for the GIL the busy loop holds.

So the gate closes as the request *arrives* (on the shell channel thread: its stream's
receive callback, wrapped), not only while its handler runs, and opens ``REPLY_GRACE``
after the handler has ended, once the reply and the idle status have left on their
threads; and while the kernel serves, the interpreter's switch interval is ``SWITCH``
(the GIL passes to a thread that asks for it after 0.5 ms of the loop's work, not 5 ms).
Requests of a subshell run on their own thread and loop and leave the gate alone.
Silent requests (a front end's variable inspector) count as cells too. Everything here
wraps public attributes of one kernel instance and is undone by the returned function.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from ..engine.lowlevel import Gate

__all__ = ["REPLY_GRACE", "SWITCH", "close_gate_during_cells", "quick_switch"]

#: seconds the gate stays closed after a cell's handler ends (its reply and idle status leave meanwhile)
REPLY_GRACE = 0.002
#: the interpreter's switch interval while a kernel serves (Python's default: 0.005)
SWITCH = 0.0005


def close_gate_during_cells(kernel: Any, gate: Gate, loop: asyncio.AbstractEventLoop) -> Callable[[], None] | None:
    """Close ``gate`` from a main-shell ``execute_request``'s arrival to just after its reply; the undo.

    ``None`` when ``kernel`` has no shell handlers to wrap (not an ipykernel).
    """
    handlers = getattr(kernel, "shell_handlers", None)
    original = handlers.get("execute_request") if isinstance(handlers, dict) else None
    if original is None:
        return None
    assert handlers is not None
    running = [0, 0]  # handlers running now, handlers started so far (a late reopen checks both)

    def reopen(started: int) -> None:
        if running == [0, started]:  # no cell has started since, none runs
            gate.open()

    async def execute_request(stream: Any, ident: Any, parent: Any) -> Any:
        if parent.get("header", {}).get("subshell_id") is not None:
            return await original(stream, ident, parent)
        running[0] += 1
        running[1] += 1
        gate.close()
        try:
            return await original(stream, ident, parent)
        finally:
            running[0] -= 1  # (an interrupted or failed cell too: then every waiting call passes, in order)
            if not running[0]:
                loop.call_later(REPLY_GRACE, reopen, running[1])

    handlers["execute_request"] = execute_request
    undo_arrival = _close_on_arrival(kernel, gate)

    def undo() -> None:
        if handlers.get("execute_request") is execute_request:
            handlers["execute_request"] = original
        undo_arrival()
        gate.open()

    return undo


def _close_on_arrival(kernel: Any, gate: Gate) -> Callable[[], None]:
    """Close the gate on the shell channel thread as a main-shell ``execute_request`` arrives.

    Only a bool is set there (the loop's thread does the rest); the message goes on unchanged.
    """
    stream = getattr(kernel, "shell_stream", None)
    forward = getattr(kernel, "shell_channel_thread_main", None)
    session = getattr(kernel, "session", None)
    if stream is None or forward is None or session is None or getattr(kernel, "shell_channel_thread", None) is None:
        return _nothing

    def arriving(msg: Any) -> Any:
        try:
            _, frames = session.feed_identities(msg, copy=False)
            header = session.deserialize(frames, content=False, copy=False)["header"]
        except Exception:  # the thread's own handler reports a bad message
            header = {}
        if header.get("msg_type") == "execute_request" and header.get("subshell_id") is None:
            gate.close()
        return forward(msg)

    stream.on_recv(arriving, copy=False)  # (the callback is only swapped: the stream already reads)

    def undo() -> None:
        stream.on_recv(forward, copy=False)

    return undo


def quick_switch() -> Callable[[], None]:
    """Set the switch interval to ``SWITCH`` (if it is longer); the undo puts the old one back."""
    before = sys.getswitchinterval()
    if before <= SWITCH:
        return _nothing
    sys.setswitchinterval(SWITCH)

    def undo() -> None:
        if sys.getswitchinterval() == SWITCH:
            sys.setswitchinterval(before)

    return undo


def _nothing() -> None:
    pass
