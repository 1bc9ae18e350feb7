"""The kernel-side host: one per IPython shell, created by ``%load_ext fusion_nb``.

It owns the app the magics register into, the notebook's input channel, the
interrupt wiring and the MCP server started by ``%fusion serve``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

from fusion_nb.widgets import ToolCard, WidgetInputChannel, has_widget_frontend, show_call

from ..engine import Call, Fusion, ScriptedAnswers, Tool
from .cell_compiler import python_name
from .interrupts import IdleInterrupts, wake_loop_on_signals

log = logging.getLogger("fusion_nb")

#: set to a JSON object of field answers to run notebooks unattended (nbval, CI)
ANSWERS_ENV = "FUSION_NB_ANSWERS"


class Host:
    def __init__(self, shell: Any, app: Fusion) -> None:
        self.shell = shell
        self.app = app
        self.server: Any = None
        self.panel: Any = None  # the activity panel shown by %fusion serve and %fusion status
        self.interrupts: IdleInterrupts | None = None
        self.wake_signal: int | None = None
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None  # terminal IPython between cells: no loop to wire
        self.notebook_channel = WidgetInputChannel()  # inline forms; fails fast without a frontend
        scripted = os.environ.get(ANSWERS_ENV)
        self.script_answers(json.loads(scripted) if scripted else None)
        if self.loop is not None:
            self.wake_signal = wake_loop_on_signals(self.loop)
            self.interrupts = IdleInterrupts(app, self.loop)
            shell.events.register("pre_execute", self.interrupts.cell_started)
            shell.events.register("post_execute", self.interrupts.cell_finished)

    def script_answers(self, answers: Any) -> None:
        """Answer input requests from a mapping or callable (``None``: ask in the notebook)."""
        self.app.input_channel = ScriptedAnswers(answers) if answers is not None else self.notebook_channel

    def binding_name(self, tool: Tool) -> str:
        return python_name(tool.name)

    def start_call(self, tool: Tool, arguments: dict[str, Any]) -> Call:
        call = self.app.start(tool.name, arguments)
        self.show(call)
        return call

    def show(self, call: Call) -> None:
        """Render the call in the current cell: a live widget, or text where there is none."""
        show_call(call)

    def card(self, bound: Any) -> Any:
        """What a ``%%fusion_tool`` cell shows: the tool card widget, or its text."""
        return ToolCard(bound.tool) if has_widget_frontend() else bound

    def serve(self, host: str, port: int, auth: bool) -> Any:
        """Start serving (once); print the URL, token and client configuration."""
        from .serve import KernelServer

        if self.server is not None and self.server.running:
            print(f"Already serving at {self.server.url}; %fusion stop first to change settings.")
            return None
        self.server = KernelServer(self.app, host=host, port=port, auth=auth)
        print(self.server.snippets())
        if has_widget_frontend():
            from fusion_nb.widgets import ActivityPanel

            self.panel = ActivityPanel(self.app)
        return self.panel

    def stop(self) -> Any:
        if self.server is None or not self.server.running:
            print("Not serving.")
            return None
        self.server.stop_soon()
        print(f"Stopped serving {self.server.url}.")
        self.server = None
        self._close_panel()
        return None

    def _close_panel(self) -> None:
        if self.panel is not None:
            self.panel.close()  # lets go of the app's call listener
            self.panel = None

    def status(self) -> str:
        calls = self.app.active_calls
        lines = [f"{len(self.app.tools)} tool(s); {len(calls)} call(s) running"]
        lines += [f"  {call.tool.name}: {call.status}" for call in calls]
        lines.append("not serving" if self.server is None else f"serving at {self.server.url}")
        return "\n".join(lines)

    def close(self) -> None:
        if self.interrupts is not None:
            self.shell.events.unregister("pre_execute", self.interrupts.cell_started)
            self.shell.events.unregister("post_execute", self.interrupts.cell_finished)
            self.interrupts.close()
        if self.loop is not None and self.wake_signal is not None:
            self.loop.remove_signal_handler(self.wake_signal)
        if self.server is not None:
            self.server.stop_soon()
        self._close_panel()
