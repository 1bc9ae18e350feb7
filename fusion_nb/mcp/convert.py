"""Engine objects in MCP terms: tool descriptions (SDK models) and call results (wire dicts).

The engine already speaks plain dicts shaped like the MCP wire, so a result needs no
models: the SDK's result sieve validates a dict exactly as it validates a model, and
building then dumping pydantic models would be pure cost on every call.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from ..engine import CallResult, Tool
from .jobs import job_output_schema


def tool_to_mcp(tool: Tool, *, jobs: bool = False, apps: bool = False) -> types.Tool:
    """The ``tools/list`` entry of ``tool``: schemas, description, annotations and task support.

    ``execution.taskSupport`` is set only for task tools (absent means "forbidden").
    With ``jobs`` (job tools on), a task tool's output schema also admits the
    job-started answer, which such a tool gives a client without tasks. With ``apps`` (a client
    that declared MCP Apps) a tool with a view carries ``_meta.ui`` (``apps.tool_meta``).
    """
    output_schema = tool.output_schema
    if jobs and tool.task is not None and output_schema is not None:
        output_schema = job_output_schema(output_schema)
    annotations = types.ToolAnnotations.model_validate(tool.annotations) if tool.annotations else None
    execution = types.ToolExecution(task_support=tool.task.mode) if tool.task is not None else None  # type: ignore[arg-type]
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=output_schema,
        annotations=annotations,
        execution=execution,
        _meta={"ui": {"resourceUri": ui_uri(tool.view), "visibility": list(tool.visibility)}}
        if apps and tool.view is not None
        else None,
    )


def ui_uri(view: str) -> str:
    """The ``ui://`` resource of a built-in MCP Apps view (``fusion_nb.mcp.apps``)."""
    return f"ui://fusion-nb/{view}.html"


def tool_definition(tool: Tool) -> dict[str, Any]:
    """The tool exactly as ``tools/list`` sends it to a client: a JSON-ready dict (``%fusion inspect``)."""
    return tool_to_mcp(tool).model_dump(mode="json", by_alias=True, exclude_none=True)


def result_to_wire(result: CallResult, *, has_output_schema: bool, modern: bool = True) -> dict[str, Any]:
    """The ``CallToolResult`` wire dict for an engine result.

    An error result keeps its ``{"error": {...}}`` structured content unless the tool
    declares an output schema: that shape would not match the schema, and some
    clients validate structured content even on errors (the SDK's does not). The
    text block names the code, message and recovery either way.
    """
    wire: dict[str, Any] = {"content": result.content, "isError": result.is_error}
    if modern:  # required from 2026-07-28 on; on a handshake-era wire it only costs validation
        wire["resultType"] = "complete"
    structured = result.structured_content
    if structured is not None and not (result.is_error and has_output_schema):
        wire["structuredContent"] = structured
    return wire
