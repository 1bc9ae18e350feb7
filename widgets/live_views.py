"""Which views show each live call: the registry the input channel and a tool cell read.

A form for a call's question goes inside that call's views (``channel.place``); a tool
cell that awaits a call tells them it shows the error itself. Both ask here, and so
need no widget module: where no widget can show (a headless run) the registry is
simply empty and ipywidgets is never imported. ``CallView`` adds itself while its call
is live and leaves once it has settled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .call_view import CallView

#: the views showing each live call, by call id, oldest first
_views: dict[str, list[CallView]] = {}


def views_for(call_id: str) -> list[CallView]:
    """The live ``CallView``s of the call ``call_id``, oldest first (a cell's and a panel's, say)."""
    return list(_views.get(str(call_id), ()))


def show_live(call_id: str, view: CallView) -> None:
    """``view`` shows the live call ``call_id``."""
    _views.setdefault(call_id, []).append(view)


def hide_live(call_id: str, view: CallView) -> None:
    """``view`` no longer shows the call ``call_id`` (it settled, or the view closed)."""
    views = _views.get(call_id)
    if views is not None and view in views:
        views.remove(view)
        if not views:
            del _views[call_id]
