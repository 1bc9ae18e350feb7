"""What a ``%%fusion_tool`` cell binds in the notebook: ``await my_tool(arg=...)``.

Calling it from a cell runs the tool on the kernel loop, shows the call's live view
in that cell, asks for input with the notebook's channel, and returns the response
value (or raises ``ToolError``). A handler crash re-raises the original exception,
so the cell shows its traceback with the tool cell's own line numbers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..engine import INTERNAL_ERROR, Tool


class CellTool:
    """Awaitable-callable handle of a tool defined in a cell."""

    def __init__(self, tool: Tool, host: Any) -> None:
        self.tool = tool
        self._host = host

    @property
    def name(self) -> str:
        return self.tool.name

    def start(self, **arguments: Any):
        """Start a call in the background and return its ``Call`` (shown live in this cell)."""
        return self._host.start_call(self.tool, arguments)

    async def __call__(self, **arguments: Any) -> Any:
        call = self.start(**arguments)
        try:
            result = await call.wait()
        except asyncio.CancelledError:
            # interrupted: the call is settled; give its handler's cleanup one loop turn
            # before IPython spends its time rendering this cell's traceback
            await asyncio.sleep(0)
            raise
        error = result.error
        if error is not None and error.code == INTERNAL_ERROR and isinstance(error.__cause__, Exception):
            raise error.__cause__
        return result.unwrap()

    def __repr__(self) -> str:
        return f"<fusion tool {self.tool.name!r}: await {self._host.binding_name(self.tool)}(...)>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(describe(self.tool))


def describe(tool: Tool) -> str:
    """A plain-text card: name, description, annotations and fields."""
    lines = [f"{tool.name} ({tool.verb}, {tool.kind.replace('_', ' ')})"]
    if tool.description:
        lines.append(f"  {tool.description.splitlines()[0]}")
    hints = [key.removesuffix("Hint") for key, value in tool.annotations.items() if value]
    if hints:
        lines.append("  hints: " + ", ".join(hints))
    props = tool.input_schema.get("properties", {})
    required = set(tool.input_schema.get("required", ()))
    for key, prop in props.items():
        kind = prop.get("type") or "/".join(p.get("type", "?") for p in prop.get("anyOf", ()))
        if "enum" in prop:
            kind = " | ".join(map(repr, prop["enum"]))
        mark = "" if key in required else " (optional)"
        desc = f" - {prop['description']}" if prop.get("description") else ""
        lines.append(f"  {key}: {kind}{mark}{desc}")
    return "\n".join(lines)
