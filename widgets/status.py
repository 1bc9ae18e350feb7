"""How each call status looks, and short texts about a call (shared by views and text).

Seven statuses but only five bar styles, so each status also gets its own icon,
label and colour: no two look alike.
"""

from __future__ import annotations

import html
from typing import NamedTuple

from fusion_nb.engine import Call, CallResult


class Look(NamedTuple):
    bar_style: str
    icon: str
    label: str
    color: str


LOOKS: dict[str, Look] = {
    "queued": Look("", "⏳", "queued", "#757575"),
    "running": Look("info", "▶", "running", "#1976d2"),
    "waiting": Look("warning", "✋", "waiting for input", "#ef6c00"),
    "done": Look("success", "✔", "done", "#2e7d32"),
    "failed": Look("danger", "✖", "failed", "#c62828"),
    "cancelled": Look("", "⊘", "cancelled", "#424242"),
    "timed out": Look("danger", "⌛", "timed out", "#6a1b9a"),
}


def look(status: str) -> Look:
    return LOOKS.get(status, Look("", "?", status, "#757575"))


def percent_of(call: Call) -> float:
    """The bar value: last progress, 100 once done (a finished call is complete)."""
    if call.status == "done":
        return 100.0
    return call.progress.percent if call.progress is not None else 0.0


def elapsed_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s"


def summary(result: CallResult, limit: int = 200) -> str:
    """One line about a settled call: the error's code and message, else its response."""
    if result.error is not None:
        return f"{result.error.code}: {result.error.message}"
    if result.input_required is not None:
        return "waiting for the client to answer an input request"
    texts = [block.get("text", "") for block in result.content if block.get("type") == "text"]
    text = texts[0] if texts else repr(result.value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_name(call: Call) -> str:
    return call.tool.name if call.tool is not None else "?"


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)
