"""Text fallback for frontends without widgets: throttled progress lines.

Terminal IPython or plain nbconvert cannot render a bar; a line per change would
flood them, so lines are printed at most every ``interval`` seconds, and the final
line always.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from fusion_nb.engine import Call

from .frontend import has_widget_frontend
from .status import look, percent_of, summary, tool_name
from .watching import watch_until_settled


def progress_line(call: Call) -> str:
    """``billing.refund: running 42% rows loaded`` (or the result once settled)."""
    line = f"{tool_name(call)}: {look(call.status).label} {percent_of(call):.0f}%"
    if call.result is not None:
        return f"{line} {summary(call.result)}"
    if call.status == "waiting" and call.request is not None:
        return f"{line} {call.request.message}"
    if call.progress is not None and call.progress.message:
        return f"{line} {call.progress.message}"
    return line


def text_progress(call: Call, *, file: TextIO | None = None, interval: float = 1.0) -> Callable[[], None]:
    """Print ``call``'s progress as throttled lines until it settles; returns ``stop()``."""
    last = [float("-inf"), ""]

    def on_change(changed: Call) -> None:
        now = time.monotonic()
        line = progress_line(changed)
        if line != last[1] and (changed.settled or now - last[0] >= interval):
            last[0], last[1] = now, line
            print(line, file=file or sys.stdout, flush=True)

    return watch_until_settled(call, on_change)


def show_call(call: Call, **options: Any) -> Any:
    """Display a ``CallView`` where widgets render, else fall back to text lines."""
    if has_widget_frontend():
        from IPython.display import display

        from .call_view import CallView

        view = CallView(call, **options)
        display(view)
        return view
    return text_progress(call)
