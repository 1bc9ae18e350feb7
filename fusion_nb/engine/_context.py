"""What a handler receives besides its input."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ._signal import AbortSignal
from ._streaming import LOG_LEVELS, LogEvent
from ._threads import on_loop

if TYPE_CHECKING:
    from ._app import App
    from ._call import Call
    from ._tool import Tool


class Context:
    """Per-call context: the abort ``signal``, ids, and a ``state`` dict middleware may enrich.

    ``ctx.signal.aborted`` is how a body that runs in a thread notices an abort;
    ``ctx.state`` starts with what the app's ``context_factory`` returned.
    """

    # every in-flight call holds one: what its call knows is read from the call
    __slots__ = ("_call", "_state", "app", "input")

    def __init__(self, call: Call, app: App, state: dict[str, Any] | None, input: Any) -> None:
        self._call = call
        self.app = app
        self._state = state  # (made on first use: most calls never touch it, and each in-flight call holds it)
        self.input = input

    @property
    def call_id(self) -> str:
        """The id of the call (the one views, logs and ``app.active_calls`` show)."""
        return self._call.id

    @property
    def tool(self) -> Tool:
        """The tool called."""
        tool = self._call.tool
        assert tool is not None  # a context is made only for a call of a registered tool
        return tool

    @property
    def signal(self) -> AbortSignal:
        """The call's abort signal: ``aborted``, ``wait()``, ``on_abort``, ``raise_if_aborted()``."""
        return self._call.signal

    @property
    def state(self) -> dict[str, Any]:
        """What middleware and the app's ``context_factory`` put here for the handler."""
        state = self._state
        if state is None:
            state = self._state = {}
        return state

    def log(self, level: str, message: str, **data: Any) -> None:
        """Log a line for the call's client (MCP ``notifications/message``) and the notebook's view.

        ``level`` is one of MCP's (``debug`` ... ``emergency``); ``data`` travels as structured
        fields next to the message. The engine only records it: the transport decides who hears
        it (the client's chosen level filters it).
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"ctx.log: level must be one of {', '.join(LOG_LEVELS)}, not {level!r}.")
        event = LogEvent(level, str(message), data or None)
        schedule = on_loop.get()
        if schedule is None:
            self._call.log(event)
        else:  # a sync body in its worker thread: recorded on the call's loop, in order, before its result
            schedule(functools.partial(self._call.log, event))

    def __repr__(self) -> str:
        return f"<Context {self.tool.name} call={self.call_id}>"
