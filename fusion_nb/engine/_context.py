"""What a handler receives besides its input."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._signal import AbortSignal

if TYPE_CHECKING:
    from ._app import App
    from ._tool import Tool


class Context:
    """Per-call context: the abort ``signal``, ids, and a ``state`` dict middleware may enrich.

    ``ctx.signal.aborted`` is how a body that runs in a thread notices an abort;
    ``ctx.state`` starts with what the app's ``context_factory`` returned.
    """

    __slots__ = ("_state", "app", "call_id", "input", "signal", "tool")

    def __init__(
        self, call_id: str, tool: Tool, app: App, signal: AbortSignal, state: dict[str, Any] | None, input: Any
    ) -> None:
        self.call_id = call_id
        self.tool = tool
        self.app = app
        self.signal = signal
        self._state = state  # (made on first use: most calls never touch it, and each in-flight call holds it)
        self.input = input

    @property
    def state(self) -> dict[str, Any]:
        """What middleware and the app's ``context_factory`` put here for the handler."""
        state = self._state
        if state is None:
            state = self._state = {}
        return state

    def __repr__(self) -> str:
        return f"<Context {self.tool.name} call={self.call_id}>"
