"""Tool errors: one exception type carrying a stable code, shown to clients as one sentence."""

from __future__ import annotations

from typing import Any

INVALID_INPUT = "INVALID_INPUT"
UNKNOWN_TOOL = "UNKNOWN_TOOL"
CANCELLED = "CANCELLED"
TIMEOUT = "TIMEOUT"
SERVER_BUSY = "SERVER_BUSY"
ELICITATION_UNSUPPORTED = "ELICITATION_UNSUPPORTED"
ELICITATION_ROUNDS_EXCEEDED = "ELICITATION_ROUNDS_EXCEEDED"
INVALID_ANSWER = "INVALID_ANSWER"
INTERNAL_ERROR = "INTERNAL_ERROR"


class ToolError(Exception):
    """Raise from a handler to return an error result (``isError: true``) to the caller.

    ``code`` is a short stable identifier clients can branch on; ``message`` is one
    sentence for a person; ``recovery`` says what to do about it.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        recovery: str | None = None,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.recovery = recovery
        self.details = details
        self.retry_after = retry_after

    def __str__(self) -> str:
        text = f"[{self.code}] {self.message}"
        if self.recovery:
            text += f" Recovery: {self.recovery}"
        if self.retry_after is not None:
            text += f" Retry after {self.retry_after:g} s."
        return text

    def __repr__(self) -> str:
        return f"ToolError({self.code!r}, {self.message!r})"

    def to_dict(self) -> dict[str, Any]:
        """The JSON-compatible form sent to clients as structured content."""
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.recovery is not None:
            data["recovery"] = self.recovery
        if self.details is not None:
            data["details"] = self.details
        if self.retry_after is not None:
            data["retry_after"] = self.retry_after
        return data


class Aborted(Exception):
    """Raised by ``ctx.signal.raise_if_aborted()`` once the call was aborted.

    It is an ordinary exception (not a cancellation) so that it also works inside
    worker threads running sync handlers.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"call aborted: {reason}")
        self.reason = reason
