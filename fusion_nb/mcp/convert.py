"""Engine objects in MCP SDK types: tool descriptions and call results.

The engine speaks plain dicts already shaped like the MCP wire; this module is the
one place that turns them into ``mcp_types`` models.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from ..engine import CallResult, Tool

_TextContent = types.TextContent
_CallToolResult = types.CallToolResult
_validate_block = types.CallToolResult.model_fields["content"].annotation  # list[ContentBlock]


def tool_to_mcp(tool: Tool) -> types.Tool:
    """The ``tools/list`` entry of ``tool``: schemas, description and annotations."""
    annotations = types.ToolAnnotations.model_validate(tool.annotations) if tool.annotations else None
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=annotations,
    )


def _content(blocks: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for block in blocks:
        if block.get("type") == "text" and len(block) == 2:
            out.append(_TextContent(text=block["text"]))
        else:  # image, resource, audio, annotated text: let the SDK's models validate the wire shape
            out.append(types.CallToolResult.model_validate({"content": [block]}).content[0])
    return out


def result_to_mcp(result: CallResult, *, has_output_schema: bool) -> types.CallToolResult:
    """A ``CallToolResult`` for an engine result.

    An error result keeps its ``{"error": {...}}`` structured content unless the tool
    declares an output schema: that shape would not match the schema, and some
    clients validate structured content even on errors (the SDK's does not). The
    text block names the code, message and recovery either way.
    """
    structured = result.structured_content
    if result.is_error and has_output_schema:
        structured = None
    return _CallToolResult(content=_content(result.content), structured_content=structured, is_error=result.is_error)


def result_to_wire(result: CallResult, *, has_output_schema: bool, modern: bool = True) -> dict[str, Any]:
    """``result_to_mcp`` as the wire dict the SDK would dump it to (same rules).

    The hot path returns this: the SDK's result sieve validates a dict exactly as it
    validates a model, so building and dumping the pydantic models would be pure cost.
    """
    wire: dict[str, Any] = {"content": result.content, "isError": result.is_error}
    if modern:  # required from 2026-07-28 on; on a handshake-era wire it only costs validation
        wire["resultType"] = "complete"
    structured = result.structured_content
    if structured is not None and not (result.is_error and has_output_schema):
        wire["structuredContent"] = structured
    return wire
