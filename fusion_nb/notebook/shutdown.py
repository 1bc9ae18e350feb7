"""Knowing the kernel is about to shut down or restart, while its loop still runs.

A restart or shutdown stops the kernel's loop, and the loop's teardown cancels what
still runs: a served call was answered "cancelled before it finished" with no reason.
(Jupyter interrupts first: an idle kernel's calls end there, see ``interrupts``; a
busy cell takes that interrupt and the served calls run on.) ipykernel awaits
``Kernel.do_shutdown`` (the documented override point) on its control thread before
it stops anything, so wrapping it lets the kernel's own loop end them, saying why.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
from collections.abc import Callable, Coroutine
from typing import Any

#: how long a shutdown waits for the kernel's loop to end its calls (ipykernel's own patience is ~5 s)
END_WAIT = 2.0


def on_kernel_shutdown(
    kernel: Any, loop: asyncio.AbstractEventLoop, ending: Callable[[bool], Coroutine[Any, Any, None]]
) -> Callable[[], None] | None:
    """Run ``await ending(restart)`` on ``loop`` before ``kernel`` shuts down; returns the undo."""
    original = getattr(kernel, "do_shutdown", None)
    if original is None:
        return None

    async def do_shutdown(restart: bool) -> Any:
        with contextlib.suppress(Exception):  # never in the way of the shutdown itself
            if asyncio.get_running_loop() is loop:
                await asyncio.wait_for(ending(restart), END_WAIT)
            else:  # ipykernel 7: the control thread, while the shell's loop runs the calls
                done: concurrent.futures.Future[None] = asyncio.run_coroutine_threadsafe(ending(restart), loop)
                with contextlib.suppress(concurrent.futures.TimeoutError, asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.wrap_future(done), END_WAIT)
        answer = original(restart)  # (IPythonKernel's is a plain function; the base class's a coroutine)
        return await answer if inspect.isawaitable(answer) else answer

    kernel.do_shutdown = do_shutdown

    def undo() -> None:
        if kernel.__dict__.get("do_shutdown") is do_shutdown:
            del kernel.do_shutdown

    return undo
