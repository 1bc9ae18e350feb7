"""The notebook's preview of an ``.app()`` tool's result: its MCP Apps view as a host shows it (#49).

``AppPreview`` renders what ``fusion_nb.mcp.apps.LocalHost.shown`` gives (the view's ``ui://`` HTML,
the tool, the call's input and result) in an anywidget whose host-side bridge (``app_preview.js``,
shipped in the wheel, offline) answers the view as a host does and relays its ``tools/call`` to
``call`` (the engine runs them). Its mimebundle also carries a fallback for nbconvert and saved
notebooks: the result's text (Markdown) and its PNG when it has one. This module only renders.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

Relay = Callable[[str, Any], Awaitable[dict[str, Any]]]


class AppWidget(anywidget.AnyWidget):  # type: ignore[misc]
    """The iframe and its bridge; the kernel side answers the view's tool calls."""

    _esm = Path(__file__).with_name("app_preview.js")
    html = traitlets.Unicode("").tag(sync=True)
    tool = traitlets.Dict().tag(sync=True)
    input = traitlets.Dict().tag(sync=True)
    result = traitlets.Dict().tag(sync=True)
    height = traitlets.Int(420).tag(sync=True)
    model_context = traitlets.Dict().tag(sync=True)
    """What the view last sent for the model's context (a picked row, brushed points)."""

    def __init__(self, relay: Relay, **traits: Any) -> None:
        super().__init__(**traits)
        self._relay = relay
        self._running: set[asyncio.Task[None]] = set()
        self.on_msg(self._heard)

    def _heard(self, widget: Any, content: Any, buffers: Any) -> None:
        if not isinstance(content, dict) or "n" not in content:
            return
        task = asyncio.get_running_loop().create_task(self._answer(content))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _answer(self, content: dict[str, Any]) -> None:
        try:
            result = await self._relay(str(content.get("name")), content.get("arguments") or {})
        except Exception as error:  # (one sentence back to the view, never a traceback)
            self.send({"n": content["n"], "error": str(error)[:300] or type(error).__name__})
        else:
            self.send({"n": content["n"], "result": result})


class AppPreview:
    """An ``.app()`` call's result: the live view where widgets render, text and PNG elsewhere."""

    def __init__(self, shown: dict[str, Any], relay: Relay) -> None:
        self.shown, self.relay = shown, relay
        self.widget: AppWidget | None = None

    def fallback(self) -> dict[str, Any]:
        """The bundle a frontend without widgets keeps (nbconvert, GitHub, a saved notebook)."""
        content = self.shown["result"].get("content") or []
        text = "\n\n".join(part["text"] for part in content if part.get("type") == "text")
        bundle: dict[str, Any] = {"text/plain": text or f"<{self.shown['tool']['name']} result>"}
        if text:
            bundle["text/markdown"] = text
        image = next((part for part in content if part.get("type") == "image"), None)
        if image is not None and image.get("mimeType") == "image/png":
            bundle["image/png"] = image["data"]
        return bundle

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if self.widget is None:
            shown = self.shown
            self.widget = AppWidget(
                self.relay, html=shown["html"], tool=shown["tool"], input=shown["input"], result=shown["result"]
            )
        view: Any = self.widget._repr_mimebundle_(include=include, exclude=exclude) or {}
        if isinstance(view, tuple):  # (anywidget answers (data, metadata))
            view = view[0]
        return {**self.fallback(), **{k: v for k, v in view.items() if k != "text/plain"}}
