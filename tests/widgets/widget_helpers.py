"""Waiting on a call's own notifications (no sleeps) and counting widget messages."""

from __future__ import annotations

import anyio


async def until(call, predicate) -> None:
    """Wait until ``predicate(call)`` holds, woken by the call's own change notifications."""
    if predicate(call):
        return
    event = anyio.Event()

    def listener(changed):
        if predicate(changed):
            event.set()

    undo = call.watch(listener)
    try:
        await event.wait()
    finally:
        undo()


def count_sends(widget) -> list[dict]:
    """Record every state message ``widget`` sends (the comm is a dummy outside a kernel)."""
    sent: list[dict] = []
    original = widget._send

    def send(msg, buffers=None):
        sent.append(msg)
        return original(msg, buffers=buffers)

    widget._send = send
    return sent
