"""The default presenter: a response value becomes MCP content (as plain dicts)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ._content import Block, sdk_block

#: ``(content, structured_content)``, as ``present`` returns it
Presented = tuple[list[dict[str, Any]], dict[str, Any] | None]
#: presents a value the engine knows nothing about, or declines with ``None``
RichPresenter = Callable[[Any], Presented | None]


@dataclass(frozen=True, slots=True)
class AnswerLimits:
    """How large an app's answers may get: ``max_bytes`` for the whole answer (UTF-8, base64
    counted), ``max_side`` px for an image's longest side (``App(answer_limits=...)``)."""

    max_bytes: int = 1 << 20
    max_side: int = 1568

    def __post_init__(self) -> None:
        for name, least in (("max_bytes", 1024), ("max_side", 16)):
            value = getattr(self, name)
            if type(value) is not int or value < least:
                raise ValueError(f"AnswerLimits {name} must be a whole number of at least {least}, not {value!r}.")


#: the bound of an app that names none: 1 MiB, images at most 1568 px on their longest side
DEFAULT_LIMITS = AnswerLimits()
_current: ContextVar[AnswerLimits] = ContextVar("answer_limits", default=DEFAULT_LIMITS)


def answer_limits() -> AnswerLimits:
    """The bound of the answer being presented (a rich presenter reads it per call)."""
    return _current.get()


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


def bounded(value: str, limit: int, what: str = "answer", bound: int | None = None) -> str:
    """``value`` cut to ``limit`` UTF-8 bytes, ending with a sentence saying what was cut (and the ``bound``)."""
    if len(value) * 4 <= limit:  # (cannot be over: no encoding needed)
        return value
    encoded = value.encode()
    if len(encoded) <= limit:
        return value
    kept = encoded[: max(0, limit - 160)].decode(errors="ignore")
    return (
        f"{kept}\n… (cut: the {what} is {len(encoded)} bytes, over the {bound or limit}-byte answer bound; "
        f"the first {len(kept)} of its {len(value)} characters are shown.)"
    )


def _json(dumped: str, structured: dict[str, Any], limits: AnswerLimits) -> Presented:
    """JSON as text plus structured content, both within the bound; else the text alone, cut."""
    half = limits.max_bytes // 2  # (the text and the structured content are the same JSON)
    if len(dumped) * 4 <= half or len(dumped.encode()) <= half:
        return [text(dumped)], structured
    # (cut to half: a JSON text's quotes are escaped again on the wire)
    return [text(bounded(dumped, half, "JSON answer", limits.max_bytes) + " Its structured content is left out.")], None


def present(value: Any, limits: AnswerLimits = DEFAULT_LIMITS) -> Presented:
    """Return ``(content, structured_content)`` for a response value, within ``limits``."""
    if isinstance(value, str):  # the common answer first (a length check is all it pays)
        if len(value) * 4 <= limits.max_bytes:
            return [text(value)], None
        return [text(bounded(value, limits.max_bytes))], None
    if value is None:
        return [], None
    if isinstance(value, Block):
        return blocks([value], limits), None
    if isinstance(value, BaseModel):  # (its serializer: what model_dump_json/model_dump call, minus their wrapping)
        if sdk_block(value) is not None:
            return blocks([value], limits), None
        serializer = value.__pydantic_serializer__
        return _json(serializer.to_json(value).decode(), serializer.to_python(value, mode="json"), limits)
    if isinstance(value, dict):
        return _json(json.dumps(value, default=str, ensure_ascii=False), value, limits)
    if isinstance(value, (list, tuple)):
        if any(isinstance(item, Block) or sdk_block(item) is not None for item in value):
            return blocks(value, limits), None
        data = list(value)
        return _json(json.dumps(data, default=str, ensure_ascii=False), {"result": data}, limits)
    if isinstance(value, (bytes, bytearray, memoryview)):
        blob = bytes(value)
        if len(blob) * 4 // 3 + 200 > limits.max_bytes:
            kind = image_type(blob) or "binary data"
            said = f"({kind} of {len(blob)} bytes: over the {limits.max_bytes}-byte answer bound, not sent.)"
            return [text(said)], None
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
    if _rich:
        token = _current.set(limits)
        try:
            for rich in reversed(_rich):
                presented = rich(value)
                if presented is not None:
                    return presented
        finally:
            _current.reset(token)
    for method in ("_repr_markdown_", "_repr_html_"):
        render = getattr(value, method, None)
        if callable(render):
            rendered = render()
            if isinstance(rendered, tuple):
                rendered = rendered[0]
            if isinstance(rendered, str):
                return [text(bounded(rendered, limits.max_bytes))], None
    return [text(bounded(str(value), limits.max_bytes))], None


def blocks(values: Any, limits: AnswerLimits) -> list[dict[str, Any]]:
    """Each value as content blocks, in order (a string as text, others by ``present``), within ``limits``:
    a block over what is left of the bound is replaced by a sentence saying so."""
    content: list[dict[str, Any]] = []
    left = limits.max_bytes
    for value in values:
        if isinstance(value, Block):
            made = [value.wire()]
        else:
            made = [wire] if (wire := sdk_block(value)) is not None else present(value, limits)[0]
        for block in made:
            size = len(json.dumps(block, ensure_ascii=False).encode())
            if size > left:
                kind = str(block.get("type", "content"))
                block = text(
                    f"({'an' if kind[0] in 'aeiou' else 'a'} {kind} block of {size} bytes: over the {left} bytes left "
                    f"of the {limits.max_bytes}-byte answer bound, not sent.)"
                )
                size = len(block["text"])
            left -= size
            content.append(block)
    return content
