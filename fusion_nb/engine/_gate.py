"""``Gate``: the host's own work first; the calls it holds back pass at a bounded rate meanwhile.

A notebook kernel serves agents on the loop that runs a person's cells: ten agents
calling in a loop fill every turn of it, and a ``1 + 1`` cell takes three times as
long. The host ``close()``s its app's gate as a cell starts and ``open()``s it as the
cell ends. While it is closed, a call the gate ``applies`` to waits before its body
in one FIFO queue (after its mutation serializer, so a mutation's calls keep their
order), and a timer admits ``burst`` waiting calls every ``interval`` seconds: the
agents keep a bounded share of the loop, the cell the rest, and no call is dropped.
An agent's next request waits behind its last answer, so a closed gate soon quiets
the loop. Opening admits every waiting call, in order. A waiter cancelled while it
waits leaves the queue; an admission that reached it in the same instant goes to the
next waiter.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ._backends import Cancellable, Event, current_backend, new_event


class Gate:
    """Holds calls back while the host's own work runs (see the module docstring).

    ``applies()`` (asked in the calling context, only while the gate is closed) says
    whether the gate holds this call: a host lets its own calls through (a cell's).
    ``waiting`` is how many calls wait now (an activity panel shows it).
    """

    __slots__ = ("_timer", "applies", "burst", "closed", "held", "interval", "waiters")

    def __init__(self, *, interval: float = 0.005, burst: int = 1, applies: Callable[[], bool] | None = None) -> None:
        if interval <= 0 or burst < 1:
            raise ValueError("a gate admits at least one call per interval, and the interval must be positive")
        self.interval = interval
        self.burst = burst
        self.applies = applies
        #: whether calls the gate applies to wait (the host's own work runs)
        self.closed = False
        self.waiters: deque[Event] = deque()
        #: how many calls have waited in all (a benchmark reads it)
        self.held = 0
        self._timer: Cancellable | None = None

    @property
    def waiting(self) -> int:
        """How many calls wait to pass."""
        return len(self.waiters)

    def close(self) -> None:
        """The host's work starts: calls the gate applies to wait from now on."""
        self.closed = True

    def open(self) -> None:
        """The host's work has ended: every waiting call passes, in order."""
        self.closed = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._admit(len(self.waiters))

    async def passage(self) -> None:
        """Pass at once, or wait in line while the gate is closed and applies to this call."""
        if not self.closed or (self.applies is not None and not self.applies()):
            return
        turn = new_event()
        self.waiters.append(turn)
        self.held += 1
        if self._timer is None:
            self._timer = current_backend().call_later(self.interval, self._tick)
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():
                if self.closed:
                    self._admit(1)  # our admission goes to the next in line
            else:
                self.waiters.remove(turn)
            raise

    def _tick(self) -> None:
        self._timer = None
        if not self.closed:
            return
        self._admit(self.burst)
        if self.waiters:
            self._timer = current_backend().call_later(self.interval, self._tick)

    def _admit(self, count: int) -> None:
        waiters = self.waiters
        while count > 0 and waiters:
            waiters.popleft().set()
            count -= 1

    def __repr__(self) -> str:
        return f"<Gate {'closed' if self.closed else 'open'} waiting={len(self.waiters)}>"
