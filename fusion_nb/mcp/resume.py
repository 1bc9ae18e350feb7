"""Resumable 2025-11-25 event streams: every event has an id, and a bounded log replays what a client missed.

Why: a 2025 call's answer rides the event stream of the POST that asked for it, and
a long call outlives many a connection (a proxy's idle cut, a laptop changing
networks). That era's client (the TypeScript SDK does) reconnects with ``GET`` and
``Last-Event-ID``; without ids and a log to replay from, everything sent while it
was away, the result included, would be lost although the call itself ran on.

The wire is the SDK transport's with an ``EventStore`` (``EventStore.store_event``,
``replay_events_after``): each event carries ``id:``; a ``GET`` naming an event gets,
on a new event stream, the events of that event's stream after it and then the rest
of that stream as it comes. An id older than what the log still holds gets what the
SDK's transport gives for an id its store no longer knows: an event stream that
ends at once, empty. An id this session never issued is refused (the endpoint
answers 400, one sentence). No priming event (an empty event with an id) opens a
stream here: a POST's stream only begins with its call's first message, which
carries an id itself, so there is never a stretch without a point to resume from.

Bounded memory: each log keeps its latest ``MAX_EVENTS`` events within
``MAX_BYTES``; an ended stream's log is kept ``RETENTION`` seconds for a late
reconnect (at most ``MAX_ENDED`` of them per session), then freed. A session
therefore holds at most (its streaming calls + ``MAX_ENDED`` + its ``GET`` stream) x
``MAX_BYTES`` of events, and usually far less: a quick call answered with plain JSON
opens no log at all.
"""

from __future__ import annotations

import re
import secrets
from collections import deque
from collections.abc import AsyncIterator

import anyio

from .wire import KEEPALIVE, event

MAX_EVENTS = 256
"""Events a stream's log keeps for a reconnecting client (the oldest go first)."""
MAX_BYTES = 256 << 10
"""Bytes a stream's log keeps (the latest event is always kept, however large)."""
RETENTION = 60.0
"""Seconds an ended stream's log waits for a reconnect before it is freed."""
MAX_ENDED = 8
"""Ended logs a session keeps at most (the oldest are freed first)."""

_EVENT_ID = re.compile(r"([0-9a-f]{16})-([0-9]{1,18})")


class EventLog:
    """One event stream's events, numbered from 1: appended as they are sent, replayed from any of them."""

    def __init__(self, key: str, *, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        self.key = key
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.ended_at: float | None = None
        self._events: deque[tuple[int, bytes]] = deque()
        self._bytes = 0
        self._next = 1
        self._grown: anyio.Event | None = None

    def __len__(self) -> int:
        return len(self._events)

    @property
    def size(self) -> int:
        """The bytes the log holds now."""
        return self._bytes

    def append(self, payload: bytes) -> tuple[int, bytes]:
        """Number ``payload`` and frame it as an SSE event with its id; returns the number and the frame."""
        number = self._next
        self._next += 1
        frame = event(payload, f"{self.key}-{number}")
        self._events.append((number, frame))
        self._bytes += len(frame)
        while len(self._events) > self.max_events or (self._bytes > self.max_bytes and len(self._events) > 1):
            self._bytes -= len(self._events.popleft()[1])
        self._wake()
        return number, frame

    def end(self) -> None:
        """The stream has sent its last event; followers stop once they have it."""
        if self.ended_at is None:
            self.ended_at = anyio.current_time()
            self._wake()

    def issued(self, number: int) -> bool:
        """Whether event ``number`` was ever sent on this stream (held or not)."""
        return 0 <= number < self._next

    def after(self, number: int) -> list[bytes] | None:
        """The frames after event ``number``; ``None`` when some of them are no longer held."""
        oldest = self._events[0][0] if self._events else self._next
        if number + 1 < oldest:
            return None
        return [frame for held, frame in self._events if held > number]

    async def follow(self, number: int, *, quiet: float) -> AsyncIterator[bytes]:
        """The frames after event ``number``, then each new one, until the stream ends.

        Yields a keepalive comment after ``quiet`` seconds without an event. Stops
        early if the log drops events this follower has not read yet (a reader far
        slower than the call): it cannot be given a gapless stream any more.
        """
        while True:
            frames = self.after(number)
            if frames is None:
                return
            for frame in frames:
                yield frame
            number += len(frames)
            if self.ended_at is not None:
                return
            if self._grown is None:
                self._grown = anyio.Event()
            with anyio.move_on_after(quiet) as silence:
                await self._grown.wait()
            if silence.cancelled_caught:
                yield KEEPALIVE

    def _wake(self) -> None:
        if self._grown is not None:
            self._grown.set()
            self._grown = None


class EventLogs:
    """A session's event logs by key: one per streamed POST, one for its ``GET`` stream; ended ones expire."""

    def __init__(self, *, retention: float = RETENTION, max_ended: int = MAX_ENDED) -> None:
        self.retention = retention
        self.max_ended = max_ended
        self._logs: dict[str, EventLog] = {}

    def __len__(self) -> int:
        return len(self._logs)

    def open(self) -> EventLog:
        """A new log under a fresh random key (freeing expired ones first)."""
        self._expire()
        log = EventLog(secrets.token_hex(8))
        self._logs[log.key] = log
        return log

    def find(self, event_id: str) -> tuple[EventLog, int] | None:
        """The log that issued ``event_id`` and the event's number, or ``None`` (not issued here, or freed)."""
        self._expire()
        match = _EVENT_ID.fullmatch(event_id)
        if match is None:
            return None
        log = self._logs.get(match[1])
        number = int(match[2])
        return (log, number) if log is not None and log.issued(number) else None

    def clear(self) -> None:
        """Free every log (the session has ended)."""
        for log in self._logs.values():
            log.end()
        self._logs.clear()

    def _expire(self) -> None:
        ended = [log for log in self._logs.values() if log.ended_at is not None]
        if not ended:
            return
        horizon = anyio.current_time() - self.retention
        ended.sort(key=lambda log: log.ended_at or 0.0)
        surplus = len(ended) - self.max_ended
        for position, log in enumerate(ended):
            if position < surplus or (log.ended_at or 0.0) <= horizon:
                del self._logs[log.key]
