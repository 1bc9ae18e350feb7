"""A tool as a person reads it: the summary every rendering of its card starts from, and the card as text.

``tool_summary`` reads the tool once (name, verb, kind, description, hints, arguments);
``describe_tool`` prints it (``%fusion list``, terminals, a headless run, the card's text
fallback). Text only: where no widget can show, nothing here imports ipywidgets
(``tool_card.ToolCard`` draws the same summary with a Run form).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_nb.engine import Tool

_HINTS = {
    "readOnlyHint": "read-only",
    "destructiveHint": "destructive",
    "idempotentHint": "idempotent",
    "openWorldHint": "open-world",
}


@dataclass(frozen=True)
class Argument:
    """One argument as a person reads it."""

    key: str
    kind: str
    required: bool
    description: str
    default: str | None = None  # the default as Python shows it (``2``, ``'EUR'``), when it has one


@dataclass(frozen=True)
class ToolSummary:
    """What a card shows about a tool."""

    name: str
    verb: str
    kind: str
    description: str
    hints: tuple[str, ...]
    arguments: tuple[Argument, ...]


def tool_summary(tool: Tool) -> ToolSummary:
    """Read ``tool`` once for every rendering."""
    schema = tool.input_schema
    required = set(schema.get("required", ()))
    arguments = []
    for key, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or "/".join(p.get("type", "?") for p in prop.get("anyOf", ()) if p.get("type"))
        enum = prop.get("enum") or next((p["enum"] for p in prop.get("anyOf", ()) if "enum" in p), None)
        if enum:
            kind = " | ".join(map(repr, enum))
        default = repr(prop["default"]) if prop.get("default") is not None else None
        arguments.append(Argument(key, kind or "value", key in required, prop.get("description") or "", default))
    return ToolSummary(
        name=tool.name,
        verb=tool.verb,
        kind=tool.kind.replace("_", " "),
        description=(tool.description or "").strip(),
        hints=tuple(label for key, label in _HINTS.items() if tool.annotations.get(key)),
        arguments=tuple(arguments),
    )


def describe_tool(tool: Tool) -> str:
    """The card as text: name, verb and kind, first line of the description, hints, arguments."""
    card = tool_summary(tool)
    lines = [f"{card.name} ({card.verb}, {card.kind})"]
    if card.description:
        lines.append(f"  {card.description.splitlines()[0]}")
    if card.hints:
        lines.append("  hints: " + ", ".join(card.hints))
    for arg in card.arguments:
        mark = "" if arg.required else f" (optional, default {arg.default})" if arg.default else " (optional)"
        desc = f" - {arg.description}" if arg.description else ""
        lines.append(f"  {arg.key}: {arg.kind}{mark}{desc}")
    return "\n".join(lines)
