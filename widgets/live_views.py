"""Which views show each live call: the registry the input channel and a tool cell read.

A form for a call's question goes inside that call's views (``channel.place``); a tool
cell that awaits a call tells them it shows the error itself. Both ask here, and so
need no widget module: where no widget can show (a headless run) the registry is
simply empty and ipywidgets is never imported. ``CallView`` adds itself while its call
is live and leaves once it has settled.

It also keeps the question each call is asking now: a view made later (``%fusion calls``,
the view of a call queued behind it, a page reloaded without the form) shows the same
form, one widget model, so an answer given in any of them is the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .call_view import CallView
    from .prompt import Prompt

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


#: the open question of each call waiting for an answer, by call id
_asking: dict[str, Prompt] = {}


def asking(call_id: str) -> Prompt | None:
    """The prompt the call ``call_id`` waits on now, or ``None``."""
    prompt = _asking.get(str(call_id))
    return prompt if prompt is not None and not prompt.finished else None


def ask_in(call_id: str, prompt: Prompt | None) -> None:
    """The call ``call_id`` now waits on ``prompt`` (``None``: it waits on nothing any more)."""
    if prompt is None:
        _asking.pop(str(call_id), None)
    else:
        _asking[str(call_id)] = prompt
