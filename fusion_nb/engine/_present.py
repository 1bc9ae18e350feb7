"""The default presenter: a response value becomes MCP content (as plain dicts)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

#: ``(content, structured_content)``, as ``present`` returns it
Presented = tuple[list[dict[str, Any]], dict[str, Any] | None]
#: presents a value the engine knows nothing about, or declines with ``None``
RichPresenter = Callable[[Any], Presented | None]

#: installed rich presenters, the latest last (it is asked first)
_rich: list[RichPresenter] = []


def use_presenter(presenter: RichPresenter) -> Callable[[], None]:
    """Let ``presenter`` present the values the engine has no rule for; returns its removal.

    The engine knows strings, models, JSON-like values and bytes; a figure, a table or an
    object with ``_repr_*_`` methods needs a formatter that knows mime bundles, and that
    lives outside the engine (``fusion_nb.mcp.rich``, or IPython's in a kernel). It is asked
    only after those rules, so a quick ``str`` answer never pays for it. The latest
    installed is asked first; one that returns ``None`` passes to the one before.
    """
    _rich.append(presenter)

    def remove() -> None:
        if presenter in _rich:
            _rich.remove(presenter)

    return remove


_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_type(data: bytes) -> str | None:
    """The image mime type ``data`` starts with (PNG, JPEG, GIF, WebP), else ``None``."""
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def present(value: Any) -> Presented:
    """Return ``(content, structured_content)`` for a response value."""
    if isinstance(value, str):  # the common answer first
        return [text(value)], None
    if value is None:
        return [], None
    if isinstance(value, BaseModel):  # (its serializer directly: what model_dump_json/model_dump call, at 40%)
        serializer = value.__pydantic_serializer__
        return [text(serializer.to_json(value).decode())], serializer.to_python(value, mode="json")
    if isinstance(value, dict):
        return [text(json.dumps(value, default=str, ensure_ascii=False))], value
    if isinstance(value, (list, tuple)):
        data = list(value)
        return [text(json.dumps(data, default=str, ensure_ascii=False))], {"result": data}
    if isinstance(value, (bytes, bytearray, memoryview)):
        blob = bytes(value)
        mime = image_type(blob)
        if mime:
            return [{"type": "image", "data": base64.b64encode(blob).decode("ascii"), "mimeType": mime}], None
        return [
            {
                "type": "resource",
                "resource": {
                    "uri": "data:application/octet-stream",
                    "blob": base64.b64encode(blob).decode("ascii"),
                    "mimeType": "application/octet-stream",
                },
            }
        ], None
    if isinstance(value, (bool, int, float)):
        return [text(json.dumps(value))], {"result": value}
    for rich in reversed(_rich):
        presented = rich(value)
        if presented is not None:
            return presented
    for method in ("_repr_markdown_", "_repr_html_"):
        render = getattr(value, method, None)
        if callable(render):
            rendered = render()
            if isinstance(rendered, tuple):
                rendered = rendered[0]
            if isinstance(rendered, str):
                return [text(rendered)], None
    return [text(str(value))], None
