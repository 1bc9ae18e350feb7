"""Watching a call until it settles, then letting go of it (nothing stays attached)."""

from __future__ import annotations

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

    def on_change(changed: Call) -> None:
        listener(changed)
        if changed.settled:
            undo()

    undo = call.watch(on_change)
    return undo
