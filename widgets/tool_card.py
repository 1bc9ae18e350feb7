"""The card of one tool (what ``%%fusion_tool`` shows): what it is, and a Run form.

A Run click arrives as a ``comm_msg``; work started from it would carry that
message's parent header, and its output would vanish (the frontend drops the
message's future once it is idle). The card therefore keeps a copy of the context
it was created in (the defining cell's) and starts every call inside a copy of it:
the engine's worker copies the current context at spawn, so the handler's prints,
progress and forms land under the cell that shows the card.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from fusion_nb.engine import Call, InputChannel, Tool

from .call_view import CallView
from .channel import WidgetInputChannel
from .fields import FieldInput, schema_fields
from .status import escape

_BADGES = {
    "readOnlyHint": "read-only",
    "destructiveHint": "destructive",
    "idempotentHint": "idempotent",
    "openWorldHint": "open-world",
}


class ToolCard(w.VBox):
    """Name, verb, description, annotations, one input per argument, Run, and call views.

    Blank optional arguments are left out (the tool's defaults apply). The last
    ``keep`` settled calls stay visible; live ones always do.
    """

    def __init__(self, tool: Tool, *, keep: int = 3, channel: Callable[[], InputChannel] | None = None) -> None:
        super().__init__()
        self.tool = tool
        self.keep = keep
        self.channel = channel or WidgetInputChannel
        self.context = contextvars.copy_context()  # the defining cell's: see the module docstring
        self.inputs = {key: FieldInput(key, field) for key, field in schema_fields(tool.input_schema).items()}
        self.run_button = w.Button(description="Run", button_style="primary", icon="play", tooltip=f"Call {tool.name}")
        self.run_button.on_click(lambda _: self.run())
        self.calls = w.VBox([])
        self.views: list[CallView] = []
        self.children = [
            w.HTML(self._header()),
            *(field.box for field in self.inputs.values()),
            self.run_button,
            self.calls,
        ]

    def _header(self) -> str:
        tool = self.tool
        badges = "".join(
            f' <span style="border:1px solid #999;border-radius:3px;padding:0 3px;font-size:85%">{label}</span>'
            for key, label in _BADGES.items()
            if tool.annotations.get(key)
        )
        text = f"<b>{escape(tool.name)}</b> <code>{escape(tool.verb)}</code>{badges}"
        if tool.description:
            text += f"<br>{escape(tool.description)}"
        if not self.inputs:
            text += "<br><i>no arguments</i>"
        return text

    def arguments(self) -> dict[str, Any] | None:
        """The filled-in arguments, or ``None`` after showing what is wrong."""
        args: dict[str, Any] = {}
        ok = True
        for key, field in self.inputs.items():
            problem = field.problem()
            field.show(problem)
            if problem is not None:
                ok = False
                continue
            value = field.read()
            if value is not None:
                args[key] = value
        return args if ok else None

    def run(self) -> Call | None:
        """Start the tool with the form's arguments (in the defining cell's context)."""
        args = self.arguments()
        if args is None:
            return None
        return self.context.copy().run(self._start, args)

    def _start(self, args: dict[str, Any]) -> Call:
        call = self.tool.app.start(self.tool.name, args, channel=self.channel())
        view = CallView(call)
        self.views.append(view)
        settled = [v for v in self.views if not v.live]
        for old in settled[: max(0, len(settled) - self.keep)]:
            self.views.remove(old)
            old.close()
        self.calls.children = list(self.views)
        return call

    def __repr__(self) -> str:
        return f"<ToolCard {self.tool.name} ({self.tool.verb}) args={list(self.inputs)} runs={len(self.views)}>"
