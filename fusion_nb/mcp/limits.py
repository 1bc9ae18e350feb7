"""Limits one client cannot break for the others: quotas per owner, and logs a stranger cannot flood.

``OwnerQuota`` counts what each owner (the bearer token's identity, as sessions are
bound to it) holds of one kind of thing (2025 sessions, 2026 listen streams) and
what all of them hold together. Without a per-owner bound one token holding
``max_sessions`` sessions, or the 1,024 listen streams, locks every other token out.
A refusal names the limit and comes with ``Retry-After``.

``RateLimitedLog`` keeps events a client can cause at will to one line per interval.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter

#: What a refusal over a quota tells the client to wait before trying again (seconds).
RETRY_AFTER = "10"


class OwnerQuota:
    """At most ``per_owner`` of one kind of thing per owner, and ``total`` in all (``None``: no bound)."""

    def __init__(self, what: str, *, per_owner: int | None, total: int | None) -> None:
        for name, value in (("per_owner", per_owner), ("total", total)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be 1 or more (or None), got {value!r}")
        self.what = what
        self.per_owner = per_owner
        self.total = total
        self._held: Counter[object] = Counter()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def refusal(self, owner: object) -> str | None:
        """Why ``owner`` may not take one more (one sentence), or ``None`` when it may."""
        if self.total is not None and self._count >= self.total:
            return f"Too many open {self.what} ({self.total}); retry later."
        if self.per_owner is not None and self._held[_key(owner)] >= self.per_owner:
            return f"Too many open {self.what} for this credential ({self.per_owner}); close one or retry later."
        return None

    def take(self, owner: object) -> None:
        """Count one more for ``owner`` (the caller checked ``refusal`` first)."""
        self._held[_key(owner)] += 1
        self._count += 1

    def release(self, owner: object) -> None:
        """Count one less for ``owner``."""
        key = _key(owner)
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]
        self._count -= 1


def _key(owner: object) -> object:
    """A hashable key for ``owner`` (the SDK's authorization context is a dict: its canonical JSON)."""
    if isinstance(owner, dict):
        return json.dumps(owner, sort_keys=True, default=repr)
    return owner


class RateLimitedLog:
    """At most one line per ``interval`` seconds for one kind of event; the lines dropped are counted.

    Why: an event a stranger can cause at will (a refused connection, a malformed
    message) must not become a log flood, yet an operator must still learn it happens.
    """

    def __init__(self, logger: logging.Logger, interval: float = 10.0) -> None:
        self.logger = logger
        self.interval = interval
        self._next = 0.0
        self._dropped = 0

    def log(self, level: int, message: str, *args: object) -> None:
        """Log ``message`` unless one was logged within ``interval``; say how many were dropped since."""
        now = time.monotonic()
        if now < self._next:
            self._dropped += 1
            return
        self._next = now + self.interval
        if self._dropped:
            message += f" ({self._dropped} more like it in the last {self.interval:g} s not logged)"
            self._dropped = 0
        self.logger.log(level, message, *args)


class OncePerInterval(logging.Filter):
    """A logging filter letting one record with message ``template`` through per ``interval`` seconds.

    For another library's per-event line (uvicorn's "Invalid HTTP request received.",
    the SDK's "dropped %r: malformed params") that a client can repeat at will; every
    other record passes.
    """

    def __init__(self, template: str, interval: float = 10.0) -> None:
        super().__init__()
        self.template = template
        self.interval = interval
        self._next = 0.0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != self.template:
            return True
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.interval
        return True
