"""The outcome of one call, in engine terms and in MCP content terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._errors import ELICITATION_UNSUPPORTED, ToolError


@dataclass(slots=True)
class CallResult:
    """``value`` is the handler's response; ``content`` and ``structured_content`` are
    what an MCP client receives; ``error`` is set when ``is_error``.

    For an unexpected exception, ``error`` is an INTERNAL_ERROR that names only the
    exception's class and ``error_id`` (the log holds the traceback under that id);
    ``exception`` keeps the exception itself for the host process (the notebook shows
    the person their own traceback). Neither is ever sent to a client.
    """

    value: Any = None
    content: list[dict[str, Any]] = field(default_factory=list)
    structured_content: dict[str, Any] | None = None
    is_error: bool = False
    error: ToolError | None = None
    #: set when the call ended waiting for a client that answers by calling again:
    #: ``{"request": InputRequest, "continuation": {...}}`` (see ``interactive``)
    input_required: dict[str, Any] | None = None
    error_id: str | None = None
    exception: BaseException | None = field(default=None, repr=False)

    @classmethod
    def failure(
        cls, error: ToolError, *, exception: BaseException | None = None, error_id: str | None = None
    ) -> CallResult:
        """An error result whose text and structured content carry ``error``."""
        return cls(
            content=[{"type": "text", "text": str(error)}],
            structured_content={"error": error.to_dict()},
            is_error=True,
            error=error,
            error_id=error_id,
            exception=exception,
        )

    @property
    def crashed(self) -> bool:
        """Whether the call ended in an unexpected exception (a bug, logged under ``error_id``), not in
        a ``ToolError`` its code raised: MCP tasks tell the two apart (``failed`` versus an error result)."""
        return self.error_id is not None

    def unwrap(self) -> Any:
        """The response value, or the error raised."""
        if self.error is not None:
            raise self.error
        if self.input_required is not None:
            raise ToolError(ELICITATION_UNSUPPORTED, "The call is waiting for input that only its client can give.")
        return self.value
