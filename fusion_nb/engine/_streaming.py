"""What a streaming handler yields: progress events (the side channel) and its response."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: MCP's log levels (RFC 5424), least severe first
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """Progress of one call, in percent (0 to 100), with an optional message."""

    percent: float
    message: str | None = None


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One ``ctx.log(level, message, **data)`` line of a call: a ``LOG_LEVELS`` level, the text, any data."""

    level: str
    message: str
    data: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Respond:
    """Wraps the response of an async generator (Python forbids ``return value`` there)."""

    value: Any


def progress(percent: float, message: str | None = None) -> ProgressEvent:
    """Yield this from a handler to report progress; it is clamped to 0..100."""
    return ProgressEvent(min(100.0, max(0.0, float(percent))), message)


def respond(value: Any) -> Respond:
    """``yield respond(value)`` ends a streaming handler with ``value`` as its response."""
    return Respond(value)
