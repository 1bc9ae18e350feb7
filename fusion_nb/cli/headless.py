"""Running a notebook's code cells headless, safely: the start-up rule of ``fusion-nb serve``.

The rule (docs/deploy.md says it in one paragraph): a notebook's code cells run in
order in a headless IPython shell (``InteractiveShell``, no kernel, no widgets) with
the fusion-nb extension loaded, so ``%load_ext``, ``%%fusion_tool`` and top-level
``await`` work. While they run, **no tool call is performed**: a cell that calls a
tool (``await refund(...)``, ``tool.start(...)``, ``app.call(...)``, an MCP client
against the app or against ``%fusion serve``) stops at that call, before any
handler runs, and is reported as *skipped*; the lines above the call have run, the
lines below it have not. ``%fusion`` line magics (serve, stop, status, list) do
nothing. Cell tags override: ``fusion:skip`` leaves a cell out entirely,
``fusion:run`` runs it with real tool calls (the author's explicit choice). Any other
exception stops start-up with one message naming the cell and the fix.

The guard is the engine's ``gating_calls``: ``App.start`` is the one door every call goes
through (cell handles, ``app.call``, the MCP adapter), and the gate is a context variable,
so it covers apps a notebook creates itself and tasks its cells start.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.lowlevel import gating_calls
from .errors import CliError

SKIP_TAG = "fusion:skip"
RUN_TAG = "fusion:run"


class StartupCallRefused(BaseException):
    """Raised where a cell calls a tool during headless start-up.

    A ``BaseException`` (like ``KeyboardInterrupt``) so that a demo cell's own
    ``except ToolError`` or ``except Exception`` cannot swallow it and carry on.
    """

    def __init__(self, target: str) -> None:
        super().__init__(f"tool calls are not performed during headless start-up ({target})")
        self.target = target

    def _render_traceback_(self) -> list[str]:
        """One line where IPython would format a traceback (it honours this method, and formats
        one to show the error and again to keep it in the history). Formatting those, with their
        source context, cost ``fusion-nb serve`` more start-up than all of fusion-nb's own modules
        for a skipped cell whose output is thrown away."""
        return [f"{type(self).__name__}: {self}"]


@dataclass
class Cell:
    """One code cell: its 1-based position among all the notebook's cells, source and tags."""

    number: int
    source: str
    tags: tuple[str, ...] = ()

    @property
    def first_line(self) -> str:
        """The first non-blank line, shortened: how messages name the cell."""
        line = next((text.strip() for text in self.source.splitlines() if text.strip()), "")
        return line if len(line) <= 60 else line[:57] + "..."


@dataclass
class CellOutcome:
    """What happened to a cell at start-up: ``ran``, ``skipped`` or ``failed``, and why."""

    cell: Cell
    status: str
    reason: str = ""
    output: str = ""


@dataclass
class StartupReport:
    """Every code cell's outcome, in order; ``failed`` is the cell that stopped start-up, if any."""

    path: Path
    outcomes: list[CellOutcome] = field(default_factory=list)

    @property
    def failed(self) -> CellOutcome | None:
        return next((outcome for outcome in self.outcomes if outcome.status == "failed"), None)

    @property
    def ran(self) -> list[Cell]:
        return [outcome.cell for outcome in self.outcomes if outcome.status == "ran"]


def read_cells(path: Path) -> list[Cell]:
    """The code cells of an ``.ipynb`` file (nbformat 4 JSON), numbered by position among all cells."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = notebook["cells"]
    except FileNotFoundError:
        raise CliError(f"{path}: no such notebook") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"{path}: not a readable notebook ({type(exc).__name__}); expected nbformat 4 JSON") from None
    code: list[Cell] = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        tags = tuple((cell.get("metadata") or {}).get("tags") or ())
        code.append(Cell(number, text, tags))
    return code


class StartupGuard:
    """Refuses every tool call while installed, except in cells the author tagged ``fusion:run``."""

    def __init__(self) -> None:
        self.active = False
        self.allow_calls = False
        self.refused: list[str] = []

    def refuse(self, target: str) -> None:
        """Record and refuse a call (also used for the kernel server stub below)."""
        if self.active and not self.allow_calls:
            self.refused.append(target)
            raise StartupCallRefused(target)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Refuse calls started in this context (the cells, and tasks they start) while inside."""
        self.active = True
        try:
            with gating_calls(lambda name: self.refuse(f"tool {name!r}")):
                yield
        finally:
            self.active = False


class _NoKernelServer:
    """Stands in for ``%fusion serve``'s server during start-up: connecting to it is a refused call."""

    running = False
    url = None
    token = None

    def __init__(self, guard: StartupGuard) -> None:
        self._guard = guard

    def client(self, *args: Any, **kwargs: Any) -> Any:
        self._guard.refuse("the %fusion serve server")
        raise RuntimeError("not serving headless")  # reached only in fusion:run cells

    def stop_soon(self) -> None:
        pass


def _fusion_magic_headless(real: Any) -> Any:
    """``%fusion ...`` does nothing headless (the service itself serves the tools), except
    ``share``/``unshare``: what a notebook shares is served headless too."""

    def fusion(line: str) -> Any:
        if line.split()[:1] in (["share"], ["unshare"]):
            return real(line)
        return None

    return fusion


def make_shell() -> Any:
    """A fresh headless ``InteractiveShell`` (no history file, no colours) with fusion-nb loaded.

    Loaded before any event loop runs, so the extension wires no kernel interrupts.
    """
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "nocolor"
    config.InteractiveShell.autocall = 0
    shell: Any = InteractiveShell.instance(config=config)
    with contextlib.redirect_stdout(io.StringIO()):
        shell.extension_manager.load_extension("fusion_nb")
    shell.register_magic_function(_fusion_magic_headless(shell.find_line_magic("fusion")), "line", "fusion")
    return shell


async def run_notebook(path: Path, *, echo: bool = False) -> tuple[Any, StartupReport]:
    """Run ``path``'s code cells under the start-up rule; returns the shell and the report.

    Stops at the first failing cell (the report's ``failed``). Cell output is captured
    (``echo=True`` copies it to stderr); stdout is never written, since it may be the
    MCP wire.
    """
    cells = read_cells(path)
    shell = make_shell()
    from ..notebook import current_host

    host = current_host()
    guard = StartupGuard()
    report = StartupReport(path)
    host.server = _NoKernelServer(guard)
    try:
        with guard.installed():
            for cell in cells:
                outcome = await _run_cell(shell, guard, cell)
                report.outcomes.append(outcome)
                if echo and outcome.output:
                    sys.stderr.write(outcome.output)
                if outcome.status == "failed":
                    break
    finally:
        host.server = None
    return shell, report


async def _run_cell(shell: Any, guard: StartupGuard, cell: Cell) -> CellOutcome:
    if SKIP_TAG in cell.tags:
        return CellOutcome(cell, "skipped", f"tagged {SKIP_TAG}")
    if not cell.source.strip():
        return CellOutcome(cell, "ran", "empty")
    guard.refused.clear()
    guard.allow_calls = RUN_TAG in cell.tags
    buffer = io.StringIO()
    stdin, sys.stdin = sys.stdin, io.StringIO()  # input() gets EOF: stdin may be the MCP wire
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            try:
                transformed, problem = shell.transform_cell(cell.source), None
            except Exception:
                transformed, problem = cell.source, sys.exc_info()
            try:
                result = await shell.run_cell_async(
                    cell.source, store_history=True, transformed_cell=transformed, preprocessing_exc_tuple=problem
                )
            finally:
                # IPython fires post_execute in run_cell (the sync wrapper), not in run_cell_async: without
                # it the host would think the last cell still runs and show client calls as cell output
                shell.events.trigger("post_execute")
    finally:
        sys.stdin = stdin
        guard.allow_calls = False
    output = buffer.getvalue()
    if guard.refused:
        first = guard.refused[0]
        return CellOutcome(cell, "skipped", f"calls {first}; tag it {RUN_TAG} to perform calls at start-up", output)
    error = result.error_before_exec or result.error_in_exec
    if error is not None:
        text = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        reason = f"{type(error).__name__}: {text}" if text else type(error).__name__
        return CellOutcome(cell, "failed", reason, output)
    return CellOutcome(cell, "ran", f"tagged {RUN_TAG}" if RUN_TAG in cell.tags else "", output)


def failure_message(path: Path, outcome: CellOutcome) -> str:
    """The one message for a failing cell: where it is, what it raised, and the fix."""
    return (
        f"{path}: start-up stopped at cell {outcome.cell.number} ({outcome.cell.first_line!r}): {outcome.reason}. "
        f"Fix the cell, or tag it {SKIP_TAG} to leave it out of headless runs."
    )
