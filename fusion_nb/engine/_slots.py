"""FIFO slots whose aborted waiters leave the queue without handing anything on.

One mechanism serves two stages: a tool's concurrency limit (``max_active`` slots,
``max_queue`` waiters) and a mutation's serializer (one slot, unbounded queue).
A released slot is handed straight to the first waiter, so nobody can overtake the
queue; a waiter cancelled while waiting removes itself, and if the slot reached it
in the same instant it passes the slot on rather than dropping it.
"""

from __future__ import annotations

from collections import deque

from ._background import Event, new_event
from ._errors import server_busy


class Slots:
    """``max_active`` slots handed out FIFO, with at most ``max_queue`` waiters (``None``: no bound)."""

    __slots__ = ("active", "max_active", "max_queue", "name", "waiters")

    def __init__(self, name: str, max_active: int = 1, max_queue: int | None = None) -> None:
        if max_active < 1:
            raise ValueError("max_active must be at least 1")
        if max_queue is not None and max_queue < 0:
            raise ValueError("max_queue must not be negative")
        self.name = name
        self.max_active = max_active
        self.max_queue = max_queue
        self.active = 0
        self.waiters: deque[Event] = deque()

    @property
    def queued(self) -> int:
        """How many wait for a slot."""
        return len(self.waiters)

    def reserve(self) -> Event | None:
        """Take a slot now (``None``) or a place in the queue (an event set on our turn).

        Synchronous, so calls queue in the order they were made on every backend;
        raises ``SERVER_BUSY`` when the queue is full.
        """
        if self.active < self.max_active and not self.waiters:
            self.active += 1
            return None
        if self.max_queue is not None and len(self.waiters) >= self.max_queue:
            raise server_busy(self.name, self.active, len(self.waiters))
        turn = new_event()
        self.waiters.append(turn)
        return turn

    def leave(self, turn: Event) -> None:
        """Give up a reserved place; a slot that already reached us is passed on."""
        if turn.is_set():
            self.release()
        else:
            self.waiters.remove(turn)

    async def acquire(self) -> None:
        """Take a slot, waiting FIFO; raises ``SERVER_BUSY`` when the queue is full."""
        turn = self.reserve()
        if turn is None:
            return
        try:
            await turn.wait()
        except BaseException:
            self.leave(turn)
            raise

    def release(self) -> None:
        """Give a slot back: straight to the first waiter, else back to the pool."""
        if self.waiters:
            self.waiters.popleft().set()  # hand over: ``active`` is unchanged
        else:
            self.active -= 1

    @property
    def idle(self) -> bool:
        """No slot taken and nobody waiting."""
        return self.active == 0 and not self.waiters

    def __repr__(self) -> str:
        return f"<Slots {self.name!r} active={self.active} queued={len(self.waiters)}>"
