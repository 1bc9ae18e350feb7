"""The activity panel: every call an app starts (external MCP clients included), live.

Live calls are listed with their ``CallView`` (so they can be cancelled from the
notebook); settled ones move to a short history and the oldest drop off.
``close()`` lets go of the app and every call.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w

from fusion_nb.engine import App, Call

from .call_view import CallView
from .watching import watch_until_settled


class ActivityPanel(w.VBox):
    """``display(ActivityPanel(app))``: live calls on top, the last ``history`` below."""

    def __init__(self, app: App, *, history: int = 5) -> None:
        super().__init__()
        self.app = app
        self.history = history
        self.title = w.HTML("")
        self.live_box = w.VBox([])
        self.history_box = w.VBox([])
        self.live: dict[Call, CallView] = {}
        self.recent: list[CallView] = []
        self._stops: dict[Call, Callable[[], None]] = {}
        self.children = [self.title, self.live_box, w.HTML("<small>recent</small>"), self.history_box]
        self._refresh()
        self._unsubscribe = app.on_call(self._started)
        for call in app.active_calls:
            self._started(call)

    def _started(self, call: Call) -> None:
        if call in self.live:
            return
        self.live[call] = CallView(call)
        self._refresh()
        self._stops[call] = watch_until_settled(call, self._changed)

    def _changed(self, call: Call) -> None:
        if not call.settled or call not in self.live:
            return
        self._stops.pop(call, None)
        self.recent.insert(0, self.live.pop(call))
        for old in self.recent[self.history :]:
            old.close()
        del self.recent[self.history :]
        self._refresh()

    def _refresh(self) -> None:
        self.live_box.children = list(self.live.values())
        self.history_box.children = list(self.recent)
        self.title.value = f"<b>{self.app.name}</b>: {len(self.live)} live call{'s' if len(self.live) != 1 else ''}"

    def close(self) -> None:
        """Unsubscribe from the app and the calls, and close every view."""
        self._unsubscribe()
        for stop in self._stops.values():
            stop()
        self._stops.clear()
        for view in [*self.live.values(), *self.recent]:
            view.close()
        self.live.clear()
        self.recent.clear()
        super().close()

    def __repr__(self) -> str:
        return f"<ActivityPanel {self.app.name}: {len(self.live)} live, {len(self.recent)} recent>"
