"""The one rendering of a tool as a widget: its card (what ``%%fusion_tool`` shows).

``ToolCard`` draws the tool's summary (``tool_summary``: the same reading
``describe_tool`` prints as text) with a Run form.

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

from fusion_nb.engine import App, Call, InputChannel, Tool

from .call_view import CallView
from .channel import WidgetInputChannel
from .closing import close_parts, close_tree
from .fields import FieldInput, flat_fields
from .status import BORDER, MUTED, colored, escape
from .tool_summary import ToolSummary, describe_tool, tool_summary
from .watching import watch_until_settled


def _header_html(card: ToolSummary, has_form: bool) -> str:
    badges = "".join(
        f' <span style="border:1px solid {BORDER};border-radius:3px;padding:0 4px;font-size:85%">{escape(h)}</span>'
        for h in card.hints
    )
    text = f"<b>{escape(card.name)}</b> <code>{escape(card.verb)}</code>{badges}"
    if card.description:
        text += f"<br>{escape(card.description)}"
    if not card.arguments:
        text += "<br>" + colored("<i>no arguments</i>", MUTED)
    elif not has_form:
        signature = ", ".join(f"{arg.key}=…" for arg in card.arguments)
        text += "<br>" + colored(
            f"structured arguments: call it from a cell, <code>await {escape(card.name)}({escape(signature)})</code>",
            MUTED,
        )
    return text


class ToolCard(w.VBox):
    """Name, verb, description, hints, one input per argument, Run, and the runs' views.

    Blank optional arguments are left out (the tool's defaults apply). The last
    ``keep`` settled calls stay visible; live ones always do. ``app`` runs the calls.
    """

    def __init__(
        self, tool: Tool, app: App, *, keep: int = 3, channel: Callable[[], InputChannel] | None = None
    ) -> None:
        super().__init__()
        self.tool = tool
        self.app = app
        self.keep = keep
        self.channel = channel or WidgetInputChannel
        self.context = contextvars.copy_context()  # the defining cell's: see the module docstring
        fields = flat_fields(tool.input_schema)
        self.inputs = {key: FieldInput(key, field) for key, field in (fields or {}).items()}
        for field in self.inputs.values():
            field.on_enter(self.run)  # Enter in a box runs the tool, as Submit does in a form
        self.run_button = w.Button(
            layout=w.Layout(width="auto", align_self="flex-start"),
            description=f"Run {tool.name}",
            button_style="primary",
            icon="play",
            tooltip=f"Call {tool.name} with these arguments",
        )
        self.run_button.on_click(lambda _: self.run())
        if fields is None:
            self.run_button.layout.display = "none"
        self.calls = w.VBox([])
        self.runs: list[RunView] = []
        self.children = [
            w.HTML(_header_html(tool_summary(tool), fields is not None)),
            *(field.box for field in self.inputs.values()),
            self.run_button,
            self.calls,
        ]

    @property
    def views(self) -> list[CallView]:
        """The call view of each run shown, oldest first."""
        return [run.view for run in self.runs]

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
        call = self.app.start(self.app.request(self.tool.name, args, channel=self.channel()))
        view = CallView(call)
        run = RunView(view)
        self.runs.append(run)
        settled = [r for r in self.runs if not r.view.live]
        for old in settled[: max(0, len(settled) - self.keep)]:
            self.runs.remove(old)
            old.close()
        self.calls.children = list(self.runs)
        return call

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """The widget, with the card as text for places that cannot render it."""
        bundle: dict[str, Any] | None = super()._repr_mimebundle_(**kwargs)
        if bundle is not None:
            bundle["text/plain"] = describe_tool(self.tool)
        return bundle

    def __repr__(self) -> str:
        return f"<ToolCard {self.tool.name} ({self.tool.verb}) args={list(self.inputs)} runs={len(self.views)}>"


class RunView(w.VBox):
    """One Run of a card: its call view, then its value once it is done (as ``interact`` prints it).

    The value goes through IPython's display formatter into an ``Output`` widget's stored
    outputs (not through a print routed by parent header), so it shows whatever the
    notebook would show for it and survives a page reload with the widget state. A
    failure's whole error is in the call view already; ``None`` shows nothing.
    """

    def __init__(self, view: CallView) -> None:
        self.view = view
        self.value = w.Output()
        super().__init__([view, self.value])
        self._stop = watch_until_settled(view.call, self._changed)

    def _changed(self, call: Call) -> None:
        result = call.result
        if result is None or result.is_error or result.value is None:
            return
        try:
            data, metadata = display_bundle(result.value)
        except Exception:  # a value whose repr fails must not take the card down
            data, metadata = {"text/plain": f"<{type(result.value).__name__}: its display failed>"}, {}
        self.value.outputs += ({"output_type": "display_data", "data": data, "metadata": metadata},)

    def close(self) -> None:
        """Stop watching; close the view and the value, layouts included."""
        self._stop()
        self.view.close()
        close_tree(self.value)
        close_parts(self)
        super().close()


def display_bundle(value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the notebook would show for ``value``: IPython's formatter in a shell, else its repr."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return {"text/plain": repr(value)}, {}
    data, metadata = shell.display_formatter.format(value)
    return dict(data), dict(metadata)
