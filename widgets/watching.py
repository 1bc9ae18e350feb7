"""Watching a call until it settles, then letting go of it.

``Call.watch`` returns an undo. A listener that undoes itself while the call is
notifying would make the engine skip the next listener (it iterates its own list
while we remove from it), so the undo runs on the next loop turn when a loop runs;
until then the listener is already inert.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fusion_nb.engine import Call


def watch_until_settled(call: Call, listener: Callable[[Call], None]) -> Callable[[], None]:
    """Run ``listener(call)`` on every change, the settling one included, then unsubscribe.

    Returns ``stop()`` to unsubscribe early (idempotent). For an already settled
    call ``listener`` runs once now and nothing is subscribed.
    """
    if call.settled:
        listener(call)
        return lambda: None
    live = True

    def stop() -> None:
        nonlocal live
        if live:
            live = False
            _soon(undo)

    def on_change(changed: Call) -> None:
        if live:
            listener(changed)
            if changed.settled:
                stop()

    undo = call.watch(on_change)
    return stop


def _soon(fn: Callable[[], None]) -> None:
    try:
        asyncio.get_running_loop().call_soon(fn)
    except RuntimeError:
        fn()
