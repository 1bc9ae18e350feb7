"""Text view for frontends without widgets: one line per call, like tqdm.

On a terminal (the stream is a TTY) the line is rewritten in place with ``\\r`` and
ended once the call settles. Elsewhere (nbconvert, logs) a line is printed at most
every ``interval`` seconds, and the final line always.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from fusion_nb.engine import Call

from .frontend import has_widget_frontend
from .status import shorten, status_text
from .watching import watch_until_settled


def progress_line(call: Call, elapsed: float | None = None) -> str:
    """``billing.refund: ▶ running  42% · 00:03<00:05, 12.3%/s · rows loaded``."""
    if elapsed is None:
        elapsed = time.monotonic() - call.started_at
    return status_text(call, round(elapsed, 1))


def text_progress(call: Call, *, file: TextIO | None = None, interval: float = 1.0) -> Callable[[], None]:
    """Show ``call``'s progress as text until it settles; returns ``stop()``.

    A TTY gets one line rewritten at most every 0.1 s; anything else throttled lines.
    """
    stream = file or sys.stdout
    tty = _isatty(stream)
    every = min(interval, 0.1) if tty else interval
    last: list[Any] = [float("-inf"), ""]
    ended_at: list[float] = []

    def on_change(changed: Call) -> None:
        now = time.monotonic()
        if changed.settled and not ended_at:
            ended_at.append(now)
        line = progress_line(changed, (ended_at[0] if ended_at else now) - changed.started_at)
        if line == last[1] or not (changed.settled or now - last[0] >= every):
            return
        last[0], last[1] = now, line
        if tty:
            width = shutil.get_terminal_size().columns - 1
            stream.write("\r" + shorten(line, width).ljust(width) + ("\n" if changed.settled else ""))
            stream.flush()
        else:
            print(line, file=stream, flush=True)

    return watch_until_settled(call, on_change)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def show_call(call: Call, **options: Any) -> Any:
    """Display a live ``CallView`` where widgets render (refreshed once settled), else a text line.

    The view's display is updated when the call settles, so the stored output's text
    and HTML are its final state (what a notebook shows before its widgets load).
    """
    if not has_widget_frontend():
        return text_progress(call)
    from IPython.display import display

    from .call_view import CallView

    view = CallView(call, **options)
    handle = display(view, display_id=True)  # type: ignore[no-untyped-call]

    def refresh(changed: Call) -> None:
        if changed.settled and handle is not None:
            handle.update(view)

    if not call.settled:
        watch_until_settled(call, refresh)
    return view
