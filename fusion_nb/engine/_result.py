"""The outcome of one call, in engine terms and in MCP content terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ToolError


@dataclass(slots=True)
class CallResult:
    """``value`` is the handler's response; ``content`` and ``structured_content`` are
    what an MCP client receives; ``error`` is set when ``is_error``."""

    value: Any = None
    content: list[dict[str, Any]] = field(default_factory=list)
    structured_content: dict[str, Any] | None = None
    is_error: bool = False
    error: ToolError | None = None
    #: set when the call ended waiting for a client that answers by calling again:
    #: ``{"request": InputRequest, "continuation": {...}}`` (see ``interactive``)
    input_required: dict[str, Any] | None = None

    @classmethod
    def failure(cls, error: ToolError) -> CallResult:
        return cls(
            content=[{"type": "text", "text": str(error)}],
            structured_content={"error": error.to_dict()},
            is_error=True,
            error=error,
        )

    def unwrap(self) -> Any:
        """The response value, or the error raised."""
        if self.error is not None:
            raise self.error
        if self.input_required is not None:
            raise ToolError("ELICITATION_UNSUPPORTED", "The call is waiting for input that only its client can give.")
        return self.value
