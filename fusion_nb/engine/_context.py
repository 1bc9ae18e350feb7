"""What a handler receives besides its input."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .signal import AbortSignal

if TYPE_CHECKING:
    from .app import Fusion
    from .call import Call
    from .tool import Tool


class Context:
    """Per-call context: the abort ``signal``, ids, and a ``state`` dict middleware may enrich."""

    __slots__ = ("_call", "app", "call_id", "input", "signal", "state", "tool")

    def __init__(self, call: Call, tool: Tool, app: Fusion, state: dict[str, Any], input: Any) -> None:
        self._call = call
        self.signal: AbortSignal = call.signal
        self.call_id: str = call.id
        self.tool = tool
        self.app = app
        self.state = state
        self.input = input

    def __repr__(self) -> str:
        return f"<Context {self.tool.name} call={self.call_id}>"
