"""What a ``%%fusion_tool`` cell binds in the notebook: ``await my_tool(arg=...)``.

Calling it from a cell runs the tool on the kernel loop (the host shows the call's
live view in that cell, as for every call a cell starts), asks for input with the
notebook's channel, and returns the response value (or raises ``ToolError``, shown
as one line; a call ended by its Stop button, or by a person dismissing its question,
ends the cell with one plain line as an interrupt does). A handler crash re-raises
the original exception with the traceback cut to the tool cell's own lines. An
interrupted call is cancelled, its cleanup gets to finish (bounded), and the cell ends
with one line saying so.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from .. import widgets  # (its modules, ipywidgets among them, load on first use: see widgets/__init__.py)
from ..engine import CANCELLED, INVALID_INPUT, BoundTool, Call, CallResult, CallStatus, ToolError

#: one preview host per served app: a preview's handles live as long as the kernel's app
_local_hosts: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

#: the file names under which tool cells' bodies are compiled (see magics)
TOOL_CELL_PREFIX = "<fusion-tool-cell-"


class CellTool:
    """Awaitable-callable handle of a tool defined in a cell."""

    def __init__(self, tool: BoundTool, host: Any) -> None:
        self.tool = tool
        self._host = host

    @property
    def name(self) -> str:
        """The tool's MCP name."""
        return self.tool.name

    def start(self, **arguments: Any) -> Call:
        """Start a call in the background and return its ``Call`` (shown live in this cell)."""
        call: Call = self._host.app.start(self.tool.name, arguments)
        return call

    async def __call__(self, **arguments: Any) -> Any:
        """Run the tool to its value; interrupting the cell cancels it."""
        __tracebackhide__ = True  # IPython: this frame is ours, not the person's
        return (await self._run(arguments)).unwrap()

    async def preview(self, **arguments: Any) -> Any:
        """Run an ``.app()`` tool and show its result in its MCP Apps view, as an agent's user sees it.

        The cell's output is the view's own ``ui://`` HTML under a host-side bridge; the view's
        paging and job calls come back to this kernel and run through the engine. Where widgets
        do not render (nbconvert, a saved notebook) the output keeps the result's text and PNG.
        """
        __tracebackhide__ = True
        if self.tool.tool.view is None:
            raise self._host.quiet(
                ToolError(INVALID_INPUT, f"Tool {self.name!r} has no MCP Apps view: build it with .app().")
            )
        result = await self._run(arguments)
        return _shown(self._host.app, self.name, arguments, result)

    async def _run(self, arguments: dict[str, Any]) -> CallResult:
        """The call to its successful result, or the exception the cell shows."""
        __tracebackhide__ = True
        call = self.start(**arguments)
        for view in widgets.views_for(call.id):  # the cell shows the outcome (an error in a line, a value as Out)
            view.leave_outcome_to_the_cell()
        try:
            result = await self._host.wait_for(call)  # (or let go: a page connected while it waits on a person)
        except asyncio.CancelledError:
            await self._host.after_interrupt(call)
            raise
        crash = widgets.crash_of(result)
        if isinstance(crash, Exception):
            raise crash.with_traceback(_tool_cell_frames(crash.__traceback__))
        if result.error is not None and call.status == CallStatus.CANCELLED and result.error.code == CANCELLED:
            raise self._host.quiet(result.error, await self._host.stopped_line(call))
        if result.error is not None:
            raise self._host.quiet(result.error)
        return result

    def __repr__(self) -> str:
        return f"<fusion tool {self.tool.name!r}: await {self._host.binding_name(self.tool)}(...)>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(widgets.describe_tool(self.tool))


async def preview(tool: CellTool | BoundTool, **arguments: Any) -> Any:
    """``await preview(tool, ...)``: ``tool.preview(...)`` for a ``%%fusion_tool`` tool, and the same
    for a decorator tool (``@app.f.query(...).app().handle``), whose ``await tool(...)`` lives in the
    engine and returns the bare value."""
    __tracebackhide__ = True
    if isinstance(tool, CellTool):
        return await tool.preview(**arguments)
    if tool.tool.view is None:
        raise ToolError(INVALID_INPUT, f"Tool {tool.name!r} has no MCP Apps view: build it with .app().")
    result = await tool.app.call(tool.name, arguments)
    result.unwrap()  # (an error is raised as ``await tool(...)`` raises it)
    return _shown(tool.app, tool.name, arguments, result)


def _shown(app: Any, name: str, arguments: dict[str, Any], result: CallResult) -> Any:
    from ..mcp.apps import LocalHost  # (the MCP layer loads only when a preview is asked for)

    local = _local_hosts.get(app)
    if local is None:
        local = _local_hosts[app] = LocalHost(app)
    return widgets.AppPreview(local.shown(name, arguments, result), local.call)


def _tool_cell_frames(tb: Any) -> Any:
    """The traceback from the first frame of a tool cell on (engine frames dropped)."""
    node = tb
    while node is not None:
        if node.tb_frame.f_code.co_filename.startswith(TOOL_CELL_PREFIX):
            return node
        node = node.tb_next
    return tb
