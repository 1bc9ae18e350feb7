"""``%fusion inspect``: what an agent sees, next to the notebook (as MCP Inspector shows it).

Left to right: the tool definitions exactly as ``tools/list`` sends them (JSON), and
the live log of recent traffic (requests, progress, elicitation, responses and
errors, with timings), filterable by tool. The log is any object with
``entries(tool)`` returning entries with ``.line()`` and ``listen(fn)``; the view
redraws at most ten times a second however fast entries arrive, and ``close()``
lets go of the log.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from .coalesce import Coalescer
from .status import BORDER, MUTED, colored, escape

# long lines wrap (a cut line hides the end of a description or an error); the box scrolls down
_PRE = (
    "margin:0;font-size:12px;line-height:16px;white-space:pre-wrap;overflow-wrap:anywhere;"
    "overflow:auto;max-height:320px"
)


class InspectorView(w.VBox):
    """Definitions and a live traffic log; the filter box narrows both to matching tool names."""

    def __init__(
        self,
        definitions: Callable[[], list[dict[str, Any]]],
        log: Any,
        *,
        tool: str | None = None,
        limit: int = 60,
    ) -> None:
        super().__init__(layout=w.Layout(border=f"1px solid {BORDER}", padding="4px 8px", max_width="100%"))
        self.definitions = definitions
        self.traffic = log
        self.limit = limit
        self.filter = w.Text(
            value=tool or "", placeholder="filter by tool name", description="Tool", continuous_update=True
        )
        self.definition_html = w.HTML("")
        self.traffic_html = w.HTML("")
        self.children = [
            self.filter,
            w.HTML(colored("<b>Tool definitions</b> (as <code>tools/list</code> sends them)", MUTED)),
            self.definition_html,
            w.HTML(colored("<b>Traffic</b> (newest last; → to the tool, ← from it)", MUTED)),
            self.traffic_html,
        ]
        self.coalescer = Coalescer(self._draw_traffic, 0.1)
        self.filter.observe(lambda _: self.redraw(), names="value")
        self._stop = log.listen(lambda _entry: self.coalescer.request())
        self.redraw()

    @property
    def tool(self) -> str | None:
        """The filter, or ``None`` for every tool."""
        return self.filter.value.strip() or None

    def redraw(self) -> None:
        """Draw both parts for the current filter."""
        self.definition_html.value = f'<pre style="{_PRE}">{escape(self.definitions_text())}</pre>'
        self.coalescer.now()

    def definitions_text(self) -> str:
        """The shown definitions as JSON, exactly as ``tools/list`` sends them."""
        shown = [d for d in self.definitions() if self.tool is None or self.tool in d.get("name", "")]
        return json.dumps(shown if len(shown) != 1 else shown[0], indent=2, ensure_ascii=False)

    def traffic_lines(self) -> list[str]:
        """The newest ``limit`` lines of traffic for the current filter."""
        return [entry.line() for entry in self.traffic.entries(self.tool)[-self.limit :]]

    def _draw_traffic(self) -> None:
        lines = self.traffic_lines()
        body = escape("\n".join(lines)) if lines else colored("no traffic yet", MUTED)
        self.traffic_html.value = f'<pre style="{_PRE}">{body}</pre>'

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """The widget, with the definitions and the traffic as text (terminals, nbconvert)."""
        bundle: dict[str, Any] | None = super()._repr_mimebundle_(**kwargs)
        if bundle is not None:
            traffic = self.traffic_lines()
            bundle["text/plain"] = (
                "Tool definitions (as tools/list sends them):\n"
                + self.definitions_text()
                + "\n\nTraffic (newest last):\n"
                + ("\n".join(traffic) if traffic else "no traffic yet")
            )
        return bundle

    def close(self) -> None:
        """Stop following the log and close the widgets."""
        self._stop()
        self.coalescer.close()
        for widget in (self.filter, self.definition_html, self.traffic_html):
            widget.close()
        super().close()
