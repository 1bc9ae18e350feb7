"""The kernel-side host: one per IPython shell, created by ``%load_ext fusion_nb``.

It owns the app the magics register into, the notebook's input channel (inline
forms; a text prompt in terminal IPython, see ``terminal``), the interrupt wiring,
the MCP server started by ``%fusion serve`` (on a thread of its own in a terminal)
and the traffic log ``%fusion inspect`` shows.

One rule for calls started from a cell: every call started while a cell runs, from
that cell (``await tool()``, ``await app.call(...)``, ``tool.start()``,
``app.start(...)``, also from tasks the cell spawned), is shown in that cell by one
live view (a text line where widgets cannot render), and its input forms appear
inside that view. The view shows the status; ``Out[n]`` shows the value, and a
``Call`` handle as a cell's value shows nothing more (its view is already there);
``await app.wait_background()`` ending a cell shows nothing (see ``quiet``).
Calls started elsewhere (MCP clients, a tool card's Run button) are shown where
they started.

Interrupting a cell cancels the cell's own calls first (their cleanup starts at
once), and the cell ends with one line naming them instead of a traceback through
fusion-nb, anyio and asyncio frames.

A page that connects while the running cell awaits a call waiting on a person (a
reload, a second tab: see ``pages``) may not show that call's form, and every later
cell would queue behind the awaiting one, unseen. So the cell lets go of the call (it
keeps running and keeps its form) and ends with one line saying where to answer or
stop it: ``%fusion calls``, or the view of a re-run queued behind it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from fusion_nb.widgets import (
    ShownScriptedAnswers,
    WidgetInputChannel,
    call_label,
    has_widget_frontend,
    progress_line,
    show_call,
    views_for,
)

from ..engine import (
    App,
    Call,
    CallResult,
    CallStatus,
    InputChannel,
    InputRequest,
    ScriptedAnswers,
    Tool,
    Verb,
    did_you_mean,
    use_presenter,
)
from ..engine.lowlevel import Gate
from ..mcp.rich import Presenter
from ..mcp.tasks import TASK_ORIGIN
from .cell_compiler import python_name
from .cell_tool import TOOL_CELL_PREFIX
from .cells_first import close_gate_during_cells, quick_switch
from .comm_status import install_comm_status
from .interrupts import IdleInterrupts, wake_loop_on_signals
from .pages import on_page_connected
from .quiet import QuietWaitBackground
from .served_log import drop_shown_crashes
from .shared import SharedVariables
from .shutdown import on_kernel_shutdown
from .terminal import TerminalInputChannel
from .traffic import TrafficLog

log = logging.getLogger("fusion_nb")

#: set to a JSON object of field answers to run notebooks unattended (nbval, CI)
ANSWERS_ENV = "FUSION_NB_ANSWERS"
#: how long an interrupted cell waits for its calls' cleanup before it ends anyway
CLEANUP_WAIT = 2.0


class LetGo(Exception):
    """The cell stopped waiting for a call that waits on a person (a page connected): the call runs on."""


@dataclass
class Interrupted:
    """A call of the running cell that an interrupt cancelled."""

    tool: str
    cleaned: bool | None  # None: unknown (the call was not awaited by the cell)


class Host:
    """Wires one shell: magics' app, input channel, cell calls, interrupts, serving, inspection."""

    def __init__(self, shell: Any, app: App) -> None:
        self.shell = shell
        self.app = app
        self.server: Any = None
        self._notebook: str | None = None  # the notebook whose port and token the server keeps (fusion_nb.wiring)
        self.panel: Any = None  # the activity panel shown by %fusion serve and %fusion status
        self._undo_log: Callable[[], None] = _nothing  # the compact error lines while the panel shows errors
        self.interrupts: IdleInterrupts | None = None
        self.wake_signal: int | None = None
        self.kernel = getattr(shell, "kernel", None)
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None  # terminal IPython between cells: no loop to wire
        # inline forms (failing fast without a frontend); a text prompt in terminal IPython
        self.notebook_channel: InputChannel = TerminalInputChannel() if _is_terminal(shell) else WidgetInputChannel()
        scripted = os.environ.get(ANSWERS_ENV)
        #: what ``script_answers(None)`` goes back to: the environment's answers, else forms
        self.default_answers: Mapping[str, Any] | None = json.loads(scripted) if scripted else None
        self.script_answers(None)
        # -- the running cell ----------------------------------------------------------
        self.cell_running = False
        self.cell_parent: str | None = None
        self.cell_task: asyncio.Task[Any] | None = None
        self.cell_calls: list[Call] = []
        self.cell_interrupted = False
        self.interrupted: list[Interrupted] = []
        self._cell_loop: asyncio.AbstractEventLoop | None = None
        self._sigint_before: Any = None
        self.traffic = TrafficLog(app, origin=self._origin)
        self.inspector: Any = None  # the live %fusion inspect view
        self._undo_on_call = app.on_call(self._call_started)
        shell.events.register("pre_execute", self._cell_started)
        shell.events.register("post_execute", self._cell_finished)
        # IPython has one custom-exception slot: take it only if nobody else did
        self._owns_custom_exc = not getattr(shell, "custom_exceptions", ())
        if self._owns_custom_exc:
            shell.set_custom_exc((asyncio.CancelledError, SyntaxError), self._render_exception)
        self._quiet_wait = QuietWaitBackground()
        shell.ast_transformers.append(self._quiet_wait)
        formatter = shell.display_formatter
        formatter.ipython_display_formatter.for_type(Call, self._display_call)
        formatter.formatters["text/plain"].for_type(CallResult, _pretty_result)
        if self.loop is not None:
            self.wake_signal = wake_loop_on_signals(self.loop)
            self.interrupts = IdleInterrupts(app, self.loop)
        # cells first: agents' calls wait before their bodies while a cell executes (a bounded share passes)
        self.gate: Gate | None = None
        self._undo_gate: Callable[[], None] | None = None
        self._undo_switch: Callable[[], None] = _nothing  # the quicker GIL hand-over while serving (cells_first)
        if self.kernel is not None and self.loop is not None:
            self.gate = Gate(applies=self._held_back)
            self._undo_gate = close_gate_during_cells(self.kernel, self.gate, self.loop)
            if self._undo_gate is not None:
                app.gate = self.gate
        # typing into a form while its cell awaits: every keystroke must reach the kernel
        self._undo_comm_status = install_comm_status(self.kernel, lambda: self.cell_running) if self.kernel else None
        # what the notebook would show, the agent gets: IPython's formatters (a type registered only here too)
        #: ``%fusion share NAME``: variables served as ``nb://vars/NAME``
        self.shared = SharedVariables(app, shell.user_ns)
        self._undo_presenter = use_presenter(Presenter(ipython_bundle(formatter)))
        # a crash a view shows (folded, or raised by its cell) is not printed again to stderr
        self._undo_shown_crashes = drop_shown_crashes(lambda call_id: bool(views_for(call_id)))
        #: set when a page connects while the cell awaits a call waiting on a person (see wait_for)
        self._let_go: set[anyio.Event] = set()
        self._undo_pages = on_page_connected(self._page_connected) if has_widget_frontend() else None
        # a restart ends the served calls saying so, while the loop still runs to answer them
        self._undo_shutdown = (
            on_kernel_shutdown(self.kernel, self.loop, self._kernel_ending)
            if self.kernel is not None and self.loop is not None
            else None
        )

    def script_answers(self, answers: Mapping[str, Any] | Callable[[InputRequest], Any] | None) -> None:
        """Answer input requests from a mapping or callable.

        ``None`` goes back to the default: ``FUSION_NB_ANSWERS`` when the environment
        sets it (an unattended run), else the notebook's forms.
        """
        if answers is None:
            answers = self.default_answers
        # scripted answers still leave their (answered) forms in the notebook: see ShownScriptedAnswers
        self.app.input_channel = (
            ShownScriptedAnswers(ScriptedAnswers(answers)) if answers is not None else self.notebook_channel
        )

    def binding_name(self, tool: Tool) -> str:
        """The notebook name a tool is bound to (``report.generate`` -> ``report_generate``)."""
        return python_name(tool.name)

    # -- the running cell -------------------------------------------------------------
    def _cell_started(self) -> None:
        self.cell_running = True
        self.cell_calls = []
        self.cell_interrupted = False
        self.interrupted = []
        self.cell_parent = self._parent_id()
        try:
            self._cell_loop = asyncio.get_running_loop()
            self.cell_task = asyncio.current_task()
        except RuntimeError:  # a terminal's synchronous cell: no loop runs it
            self._cell_loop = self.cell_task = None
        # the cell's own SIGINT handler is in place now (ipykernel swaps it per message,
        # and restores its own afterwards): put ours in front of it for this cell only
        self._sigint_before = signal.getsignal(signal.SIGINT)
        try:
            signal.signal(signal.SIGINT, self._on_sigint)
        except ValueError:  # not the main thread
            self._sigint_before = None
        if self.interrupts is not None:
            self.interrupts.cell_started()

    def _cell_finished(self) -> None:
        if self._sigint_before is not None and signal.getsignal(signal.SIGINT) == self._on_sigint:
            signal.signal(signal.SIGINT, self._sigint_before)
        self._sigint_before = None
        self.cell_running = False
        self.cell_task = None
        if self.interrupts is not None:
            self.interrupts.cell_finished()
        self.shared.after_cell()

    def _parent_id(self) -> str | None:
        if self.kernel is None:
            return None
        try:
            return str(self.kernel.get_parent().get("header", {}).get("msg_id"))
        except Exception:
            return None

    def in_running_cell(self) -> bool:
        """True when the code running now belongs to the cell being executed."""
        return self.cell_running and (self.kernel is None or self._parent_id() == self.cell_parent)

    def _origin(self) -> str:
        """Who starts a call now: this ``cell``, a ``widget`` (a Run button), or an MCP client by its name."""
        served = sys.modules.get("fusion_nb.mcp.server")  # loaded once anything serves; not imported here
        client = served.calling_client.get() if served is not None else None
        if client is not None:
            return str(client)
        if self.in_running_cell():
            return "cell"
        if self.kernel is not None:
            try:
                if self.kernel.get_parent().get("header", {}).get("msg_type") == "comm_msg":
                    return "widget"
            except Exception:
                pass
        return "client"

    def _held_back(self) -> bool:
        """Whether the gate holds this call while a cell runs: not the cell's own, nor a widget's."""
        return self._origin() not in ("cell", "widget")

    def _call_started(self, call: Call) -> None:
        if self.in_running_cell():
            self.cell_calls.append(call)
            self.show(call)

    def show(self, call: Call) -> None:
        """Render the call in the current cell: a live widget, or text where there is none."""
        show_call(call, blocker=self.blocker) if has_widget_frontend() else show_call(call)

    def blocker(self, call: Call) -> Call | None:
        """The live call ``call`` queues behind: the oldest earlier call of the same mutation (one runs at a time)."""
        tool = call.tool
        if tool is None or tool.verb != Verb.MUTATION or call.settled:
            return None
        earlier = (c for c in self.app.active_calls if c.tool is tool and c is not call)
        ahead = [c for c in earlier if c.started_at <= call.started_at]
        return min(ahead, key=lambda c: c.started_at, default=None)

    def _waits_on_a_person(self, call: Call) -> bool:
        ahead = self.blocker(call)
        return call.status == CallStatus.WAITING or (ahead is not None and ahead.status == CallStatus.WAITING)

    def _page_connected(self) -> None:
        """A page connected: a cell awaiting a person's answer it may not show lets go (see the module doc)."""
        if self.cell_running and any(self._waits_on_a_person(c) for c in self.cell_calls if not c.settled):
            for let_go in self._let_go:
                let_go.set()

    async def wait_for(self, call: Call) -> CallResult:
        """``call``'s result, as ``call.wait()``; or ``LetGo`` when a page connects while it waits on a person."""
        if self.kernel is None:
            return await call.wait()
        done = anyio.Event()
        self._let_go.add(done)
        undo = call.watch(lambda changed: done.set() if changed.settled else None)
        try:
            if not call.settled:
                await done.wait()
        except BaseException:
            call.cancel()  # cancelling the waiting cell aborts the call, as call.wait() does
            raise
        finally:
            undo()
            self._let_go.discard(done)
        if call.result is not None:
            return call.result
        waits = f"{call_label(call)} still waits" if call.status == CallStatus.WAITING else f"{call_label(call)} waits"
        raise self.quiet(
            LetGo(),
            f"Let go: {waits} for an answer, and a page connected to this kernel (a reload?) may not show its form; "
            "it keeps running: %fusion calls shows it with its form and Stop.",
        )

    def calls(self) -> Any:
        """``%fusion calls``: every live call, with its form and Stop (usable from any cell, any page)."""
        live = [call for call in self.app.active_calls if not call.settled]
        if not live:
            print("No call is running.")
            return None
        if not has_widget_frontend():
            print("\n".join(progress_line(call) for call in live))
            return None
        import ipywidgets

        from fusion_nb.widgets import CallView

        return ipywidgets.VBox([CallView(call, blocker=self.blocker) for call in live])

    def _display_call(self, call: Call) -> None:
        """A ``Call`` as a cell's value: its view is in this cell already, else show one."""
        if not any(shown is call for shown in self.cell_calls):
            self.show(call)

    # -- interrupts -------------------------------------------------------------------
    def _on_sigint(self, signum: int, frame: Any) -> None:
        """Cancel this cell's calls first (their cleanup starts now), then interrupt as before."""
        self.cell_interrupted = True
        live = [call for call in self.cell_calls if not call.settled]
        loop = self._cell_loop
        try:
            if loop is not None and live and self.kernel is None and self.cell_task is not None:
                # terminal IPython has no cancel-on-SIGINT of its own: cancel the cell
                loop.call_soon_threadsafe(self.cell_task.cancel)
            elif callable(self._sigint_before):
                self._sigint_before(signum, frame)  # ipykernel's: cancels the awaiting cell
            elif self._sigint_before != signal.SIG_IGN:
                raise KeyboardInterrupt
        finally:
            # queued after the cell's cancel, so an awaiting cell sees its cancellation
            # (not a settled call), while the calls' cleanup starts in the same loop turn
            if loop is not None:
                for call in live:
                    loop.call_soon_threadsafe(call.cancel)  # threadsafe: also wakes the loop

    async def after_interrupt(self, call: Call) -> None:
        """An awaited call was cancelled: let its cleanup finish (bounded), and note it for the cell."""
        cleaned = False
        try:
            with anyio.move_on_after(CLEANUP_WAIT):
                await call.wait_stopped()
                cleaned = True
        except asyncio.CancelledError:  # interrupted again: stop waiting
            cleaned = False
        self.interrupted.append(Interrupted(call.tool.name if call.tool else "?", cleaned))

    def quiet(self, error: BaseException, line: str | None = None) -> BaseException:
        """An error fusion-nb raises for a cell, shown as one line (its frames are ours, not the person's).

        ``line`` replaces the error's own text (a Stop reads like an interrupt, not like a failure).
        """
        shown = line if line is not None else self._one_line(type(error).__name__, str(error))
        error._render_traceback_ = lambda: [shown]  # type: ignore[attr-defined]
        return error

    async def stopped_line(self, call: Call) -> str:
        """``Stopped: slow was stopped; its cleanup ran.`` for a call a person ended (Stop, Dismiss)."""
        name = call.tool.name if call.tool else "?"
        error = call.result.error if call.result is not None else None
        if not call.signal.aborted and error is not None:  # ended by its handler: a dismissed question
            return f"Cancelled: {error.message}"
        with anyio.move_on_after(CLEANUP_WAIT):
            await call.wait_stopped()
            return f"Stopped: {name} was stopped; its cleanup ran."
        return f"Stopped: {name} was stopped; its cleanup is still running."

    def _one_line(self, name: str, text: str) -> str:
        """An error line as IPython shows one: the name in red (unless colours are off), then the text."""
        if str(getattr(self.shell, "colors", "")).lower() == "nocolor":
            return f"{name}: {text}"
        return f"\x1b[31m{name}\x1b[39m: {text}"

    def _render_exception(self, shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> Any:
        """IPython's custom exception handler: one line for an interrupt; a tool body's syntax error at its line.

        A ``%%fusion_tool`` body that does not parse is shown as a cell's own syntax error
        is (no frames of IPython, the magic or ``ast`` before it); other syntax errors (an
        ``exec``, an import) keep IPython's usual display.
        """
        if isinstance(value, SyntaxError):
            own = str(value.filename or "").startswith(TOOL_CELL_PREFIX)
            return shell.showsyntaxerror(running_compiled_code=not own)
        if not (self.cell_interrupted or self.interrupted):  # not ours: IPython's usual traceback
            return shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
        said = self.interrupt_line()
        # a call interrupted reads as one stopped by its Stop button does (stopped_line): the same words
        lines = [f"Stopped: {said}" if self._stopped_calls() else self._one_line("KeyboardInterrupt", said)]
        # IPython renders (and stores in its history) whatever _render_traceback_ returns
        value._render_traceback_ = lambda: lines  # type: ignore[attr-defined]
        return shell.showtraceback((KeyboardInterrupt, value, None))

    def _stopped_calls(self) -> list[str]:
        """The names of the running cell's calls an interrupt stopped, each once."""
        names = [
            call.tool.name if call.tool else "?" for call in self.cell_calls if call.status == CallStatus.CANCELLED
        ]
        names += [item.tool for item in self.interrupted if item.tool not in names]
        return list(dict.fromkeys(names))

    def interrupt_line(self) -> str:
        """``slow was stopped; its cleanup ran.`` (one sentence per interrupted call of the cell)."""
        waited = {item.tool: item.cleaned for item in self.interrupted}
        idle = not self.app.active_calls and self.app.background_tasks == 0
        names = self._stopped_calls()
        if not names:
            return "the cell was interrupted."
        parts = []
        for name in names:
            cleaned = waited.get(name, idle or None)
            if cleaned:
                parts.append(f"{name} was stopped; its cleanup ran.")
            elif cleaned is None:
                parts.append(f"{name} was stopped; its cleanup finishes in the background.")
            else:
                parts.append(f"{name} was stopped; its cleanup is still running.")
        return " ".join(parts)

    # -- cards, serving, status ---------------------------------------------------------
    def card(self, bound: Any) -> Any:
        """What a ``%%fusion_tool`` cell shows: the tool card widget, or its text."""
        if not has_widget_frontend():
            return bound
        from fusion_nb.widgets import ToolCard  # (ipywidgets: only where a widget can show)

        return ToolCard(bound.tool, self.app)

    def serve(
        self,
        host: str,
        port: int,
        auth: bool,
        token: str | None = None,
        hide_token: bool = False,
        new_token: bool = False,
        register: bool = False,
        page_size: int | None = None,
    ) -> Any:
        """Start serving (once); print the URL, token and client configuration.

        ``token`` None: ``$FUSION_NB_TOKEN`` of the kernel's environment, else the one kept
        for this notebook (``fusion_nb.wiring``; ``new_token`` rotates it), else a new one;
        the port kept for the notebook is reused when ``port`` is 0 and it is free.
        ``hide_token`` prints ``TOKEN`` in its place. ``register`` adds the endpoint to
        jupyter-ai's MCP settings file (``mcp_settings``) until stop or the kernel's end.
        ``page_size``: items per list page (``ServerOptions.page_size``).
        """
        from IPython.core.error import UsageError

        from .. import wiring
        from ..mcp.client_config import TOKEN_ENV
        from ..mcp.client_config import new_token as fresh_token
        from ..mcp.options import HttpOptions
        from .serve import KernelServer
        from .terminal import serve_in_thread

        if self.server is not None and self.server.running:
            print(f"Already serving at {self.server.url}; %fusion stop first to change settings.")
            return None
        chosen = token or os.environ.get(TOKEN_ENV) or None
        notebook = wiring.notebook_path() if auth and self.kernel is not None else None
        kept = wiring.load(notebook) if notebook else None
        if notebook and chosen is None:
            chosen = fresh_token() if new_token or kept is None or kept.token is None else kept.token
        elif new_token:
            raise UsageError(
                "%fusion serve: --new-token rotates the token kept for a notebook; --token or "
                f"{TOKEN_ENV} chose this one."
            )
        bind = port or (kept.port if kept else 0)

        def start() -> KernelServer:
            return KernelServer(self.app, options, port=bind, kept=notebook is not None)

        try:  # the options are http_app's one definition, checked before anything binds
            options = HttpOptions(host=host, auth=auth, token=chosen if auth else None, page_size=page_size)
            # a kernel's loop runs between cells; a terminal's does not, so its server gets a thread
            try:
                self.server = start() if self.kernel is not None else serve_in_thread(start)
            except OSError:
                if port or bind == 0:
                    raise
                print(
                    f"Port {bind}, kept for this notebook, is taken; serving on a new one (pasted configs "
                    "need the new port)."
                )
                bind = 0
                self.server = start()
        except ValueError as refused:
            raise UsageError(f"%fusion serve: {refused}") from None
        except OSError as failed:
            raise UsageError(f"%fusion serve: cannot listen on {host}:{port}: {failed.strerror or failed}") from None
        if notebook is not None:
            wiring.save(wiring.Wiring(notebook, self.server.port, self.server.token, serving=True, pid=os.getpid()))
        if self._undo_gate is not None:
            self._undo_switch = quick_switch()  # a cell's messages cross threads: the GIL passes in 0.5 ms
        self._notebook = notebook
        print(self.server.snippets(hide_token=hide_token))
        route = None
        if notebook is not None:
            from .jupyter_route import jupyter_route, route_configs

            route = jupyter_route(notebook)
            if route is not None:
                print(route_configs(route, hide_token=hide_token))
        if register:
            print(self._register(notebook, route))
        if self.kernel is None:
            print("Serving from a thread of this IPython (no widgets here): %fusion stop ends it.")
        if has_widget_frontend():
            from fusion_nb.widgets import ActivityPanel

            from .served_log import compact_errors_while_serving

            self._close_panel()  # a panel of an earlier serve lets go of the app first
            self.panel = ActivityPanel(self.app, origin=self._origin, at_once=_is_task)
            self._undo_log = compact_errors_while_serving()
        return self.panel

    def stop(self) -> Any:
        """Stop serving (the activity panel lets go of the app)."""
        if self.server is None or not self.server.running:
            print("Not serving.")
            return None
        self.server.stop_soon()
        print(f"Stopped serving {self.server.url}.")
        if self._notebook is not None:
            from .. import wiring

            wiring.forget_serving(self._notebook)
        from . import mcp_settings

        try:
            removed = mcp_settings.unregister()
        except (mcp_settings.SettingsError, OSError) as failed:
            print(f"Could not remove this notebook from jupyter-ai's MCP settings: {failed}")
        else:
            if removed is not None:
                print(f"Removed from jupyter-ai's MCP settings ({removed}).")
        self.server = None
        self._undo_switch()
        self._undo_switch = _nothing
        self._close_panel()
        return None

    def _register(self, notebook: str | None, route: Any) -> str:
        """``--register``: put this endpoint in the MCP settings file jupyter-ai 3 reads; what to print.

        Through the Jupyter server when it has a token (the URL follows the notebook), else the
        loopback URL with the kernel's token (JupyterHub: jupyter-ai runs beside the kernel and
        holds no hub token).
        """
        from . import mcp_settings

        assert self.server is not None
        if route is not None and route.token is not None and not route.url.startswith("/"):
            url, headers, via = route.url, {"Authorization": f"token {route.token}"}, "through the Jupyter server"
        else:
            url, via = self.server.url, "on loopback"
            headers = {"Authorization": f"Bearer {self.server.token}"} if self.server.token else {}
        start = os.path.dirname(notebook) if notebook else os.getcwd()
        path = mcp_settings.settings_file(start, route.root if route is not None else None)
        try:
            name = mcp_settings.register(path, mcp_settings.entry_name(notebook or "ipython"), url, headers)
        except (mcp_settings.SettingsError, OSError) as failed:
            return f"Not registered for jupyter-ai: {failed}"
        return (
            f"Registered for jupyter-ai's agents as {name} ({via}) in {path}: a new chat whose nearest "
            f".jupyter directory is {path.parent} gives its agents this notebook's tools. %fusion stop or "
            "the kernel's end removes it."
        )

    def _close_panel(self) -> None:
        if self.panel is not None:
            self.panel.close()  # lets go of the app's call listener
            self.panel = None
        self._undo_log()
        self._undo_log = _nothing

    def inspect(self, tool: str | None) -> Any:
        """``%fusion inspect [TOOL]``: the tool definitions as a client gets them, and the live traffic log."""
        from ..mcp import tool_definition

        if tool is not None and not any(tool in t.name for t in self.app.tools):
            names = [t.name for t in self.app.tools]
            near = did_you_mean(tool, names)
            hint = f"did you mean {near}? " if near else ""
            print(f"No tool matches {tool!r} ({hint}tools: {', '.join(names) or 'none yet'}).")
            return None

        def definitions() -> list[dict[str, Any]]:
            return [tool_definition(t) for t in self.app.tools]

        offered = self.app.catalog.describe() if tool is None else []
        if offered:  # what an agent can read and ask for, besides the tools
            print("\n".join(offered))
        if has_widget_frontend():
            from fusion_nb.widgets import InspectorView

            if self.inspector is not None:
                self.inspector.close()  # one live inspector at a time: the old one lets go of the log
            self.inspector = InspectorView(definitions, self.traffic, tool=tool)
            return self.inspector
        shown = [d for d in definitions() if tool is None or tool in d["name"]]
        print(json.dumps(shown if len(shown) != 1 else shown[0], indent=2, ensure_ascii=False))
        print()
        print(self.traffic.text(tool))
        return None

    def status(self) -> str:
        """Tools, running calls, serving state: a few lines."""
        calls = self.app.active_calls
        lines = [f"{len(self.app.tools)} tool(s); {len(calls)} call(s) running"]
        lines += [f"  {call.tool.name if call.tool else '?'}: {call.status}" for call in calls]
        lines.append("not serving" if self.server is None else f"serving at {self.server.url}")
        return "\n".join(lines)

    async def _kernel_ending(self, restart: bool) -> None:
        """The kernel shuts down: its calls end saying why, and the server answers them before it stops."""
        because = "the kernel is restarting" if restart else "the kernel is shutting down"
        for call in self.app.active_calls:
            call.cancel(because=because)
        if self.server is not None and self.server.running:
            await self.server.stop()
        if self._notebook is not None:
            from .. import wiring

            # the Jupyter extension forwards (with this kernel's token) only while the record says serving
            wiring.forget_serving(self._notebook)

    def close(self) -> None:
        """Undo everything ``__init__`` wired (``%unload_ext``)."""
        self._undo_on_call()
        if self._undo_shutdown is not None:
            self._undo_shutdown()
        if self._undo_pages is not None:
            self._undo_pages()
        self._undo_presenter()
        self._undo_shown_crashes()
        if self._undo_comm_status is not None:
            self._undo_comm_status()
        self._undo_switch()
        if self._undo_gate is not None:
            self._undo_gate()
            if self.app.gate is self.gate:
                self.app.gate = None
        self.traffic.close()
        self.shell.events.unregister("pre_execute", self._cell_started)
        self.shell.events.unregister("post_execute", self._cell_finished)
        if self._owns_custom_exc:
            self.shell.set_custom_exc((), None)
        if self._quiet_wait in self.shell.ast_transformers:
            self.shell.ast_transformers.remove(self._quiet_wait)
        formatter = self.shell.display_formatter
        formatter.ipython_display_formatter.pop(Call, None)
        formatter.formatters["text/plain"].pop(CallResult, None)
        if self.interrupts is not None:
            self.interrupts.close()
        if self.loop is not None and self.wake_signal is not None:
            self.loop.remove_signal_handler(self.wake_signal)
        if self.server is not None:
            self.server.stop_soon()
        self._close_panel()
        if self.inspector is not None:
            self.inspector.close()


def _is_terminal(shell: Any) -> bool:
    """Whether ``shell`` is terminal IPython (a person at a prompt), not a kernel or a headless shell.

    A terminal shell has imported its module already: importing it here just to ask
    would cost a headless ``fusion-nb serve`` prompt_toolkit (a tenth of its start-up).
    """
    terminal = sys.modules.get("IPython.terminal.interactiveshell")
    return terminal is not None and isinstance(shell, terminal.TerminalInteractiveShell)


def ipython_bundle(formatter: Any) -> Callable[[Any], dict[str, Any]]:
    """IPython's mime bundle of a value, as ``display`` would build it, without displaying anything.

    (``DisplayFormatter.format`` first offers the value to ``_ipython_display_``, which shows
    it in the notebook: a tool's answer must not appear in some cell as a side effect.)
    """

    def bundle(value: Any) -> dict[str, Any]:
        data, _metadata = formatter.mimebundle_formatter(value, include=None, exclude=None)
        data = dict(data or {})
        for mime, format_one in formatter.formatters.items():
            if mime in data:
                continue
            got = format_one(value)  # IPython's formatters catch and report their own errors
            if isinstance(got, tuple) and len(got) == 2:
                got = got[0]
            if got is not None:
                data[mime] = got
        return data

    return bundle


def _nothing() -> None:
    pass


def _pretty_result(result: CallResult, printer: Any, cycle: bool) -> None:
    """``Out[n]`` of ``await app.call(...)``: the value (or the error), not the wire content."""
    if result.error is not None:
        printer.text(f"<CallResult {result.error.code}: {result.error.message}>")
        return
    printer.text("CallResult(value=")
    printer.pretty(result.value)
    printer.text(")")


def _is_task(call: Call, origin: str) -> bool:
    """Whether ``call`` runs an agent's task: the MCP layer's origin for one (``task_origin``).

    A task exists to run long, so the activity panel gives it its live row (progress,
    Stop) as it starts, not after the delay that keeps quick calls out of sight (SPEC 12).
    """
    return origin.startswith(TASK_ORIGIN)
