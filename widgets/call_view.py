"""The live view of one call: bar, status, message, elapsed time, Cancel, result, input.

Progress may arrive thousands of times a second; the view only marks itself dirty
and a ``Coalescer`` flushes at most every ``interval`` (two widgets change per
flush, so about 20 state messages a second at the default 0.1 s). Settling
flushes at once, so the final state is exact, then drops every timer and the
call's watch: nothing of the view stays attached to a finished call.
"""

from __future__ import annotations

import asyncio
import time
import traceback

import ipywidgets as w

from fusion_nb.engine import Call

from .coalesce import Coalescer
from .prompt import Prompt
from .status import elapsed_text, escape, look, percent_of, summary, tool_name
from .watching import watch_until_settled

#: the views showing each live call, so the input channel can put its form inside them
_views: dict[Call, list[CallView]] = {}


def views_for(call: Call) -> list[CallView]:
    """The live ``CallView``s of ``call``, oldest first (a cell's and a panel's, say)."""
    return list(_views.get(call, ()))


class CallView(w.VBox):
    """``display(CallView(call))``: a progress bar that follows the call to its end."""

    def __init__(self, call: Call, *, interval: float = 0.1, tick: float = 1.0) -> None:
        super().__init__()
        self.call = call
        self.started = call.started_at
        self.ended: float | None = None
        self.prompt: Prompt | None = None
        self.bar = w.FloatProgress(
            value=0.0, min=0.0, max=100.0, description=tool_name(call), style={"description_width": "initial"}
        )
        self.status_line = w.HTML("")
        self.cancel_button = w.Button(
            description="Cancel", button_style="warning", icon="stop", tooltip="Abort this call"
        )
        self.cancel_button.on_click(lambda _: self.call.cancel())
        self.result_line = w.HTML("")
        self.input_box = w.VBox([])
        self.children = [w.HBox([self.bar, self.status_line, self.cancel_button]), self.result_line, self.input_box]
        self._tick_every = tick
        self._tick: asyncio.TimerHandle | None = None
        self._shown_status = ""
        self.coalescer = Coalescer(self._flush, interval)
        self._flush()
        if call.settled:
            self._settled()
            self._stop = lambda: None
        else:
            _views.setdefault(call, []).append(self)
            self._stop = watch_until_settled(call, self._changed)
            self._schedule_tick()

    # -- following the call -----------------------------------------------------------
    def _changed(self, call: Call) -> None:
        if call.settled:
            self._settled()
        elif call.status != self._shown_status:
            self.coalescer.now()  # a status change is rare and worth showing at once
        else:
            self.coalescer.request()

    def _settled(self) -> None:
        self.ended = self.ended or time.monotonic()
        self.coalescer.now()  # exact final state, at once
        self._release()
        self.cancel_button.layout.display = "none"
        result = self.call.result
        if result is not None:
            color = "#c62828" if result.is_error else "#2e7d32"
            self.result_line.value = f'<span style="color:{color}">{escape(summary(result))}</span>' + traceback_html(
                result
            )
        if self.prompt is not None:
            self.prompt.abandon(self.call.status)

    def _release(self) -> None:
        self.coalescer.close()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        views = _views.get(self.call)
        if views is not None and self in views:
            views.remove(self)
            if not views:
                del _views[self.call]

    def _schedule_tick(self) -> None:
        """Keep the elapsed time moving while nothing else changes (one message a tick)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._tick = loop.call_later(self._tick_every, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        if not self.coalescer.closed:
            self.coalescer.request()
            self._schedule_tick()

    def _flush(self) -> None:
        call = self.call
        self._shown_status = call.status
        shape = look(call.status)
        with self.bar.hold_sync():  # one message for both traits
            self.bar.value = percent_of(call)
            self.bar.bar_style = shape.bar_style
        message = call.progress.message if call.progress is not None and call.progress.message else ""
        if call.status == "waiting" and call.request is not None:
            message = call.request.message
        text = (
            f'<span style="color:{shape.color}"><b>{shape.icon} {escape(shape.label)}</b></span> {self.bar.value:.0f}%'
        )
        if message:
            text += f" · {escape(message)}"
        self.status_line.value = text + f" · {elapsed_text(self.elapsed)}"

    # -- hosting an input prompt ------------------------------------------------------
    def host(self, prompt: Prompt) -> None:
        """Show ``prompt`` inside the view (it replaces an earlier round's prompt).

        One prompt may live in several views of the same call: they are views of one
        widget model, so an answer given in any of them is the answer.
        """
        self.prompt = prompt
        self.input_box.children = [prompt]
        if self.call.settled:
            prompt.abandon(self.call.status)

    # -- reading ----------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        end = self.ended if self.ended is not None else time.monotonic()
        return round(end - self.started, 1)

    @property
    def live(self) -> bool:
        return not self.coalescer.closed

    def close(self) -> None:
        """Stop following the call and close the widgets."""
        self._stop()
        self._release()
        for widget in (self.bar, self.status_line, self.cancel_button, self.result_line, self.input_box):
            widget.close()
        super().close()

    def __repr__(self) -> str:
        call = self.call
        text = f"<CallView {tool_name(call)}: {look(call.status).label} {percent_of(call):.0f}%"
        if call.status not in ("queued",):
            text += f" {elapsed_text(self.elapsed)}"
        if call.result is not None and call.result.error is not None:
            text += f" {call.result.error.code}"
        return text + ">"


def traceback_html(result) -> str:
    """A folded traceback for a handler crash (the client only ever sees one sentence)."""
    cause = result.error.__cause__ if result.error is not None else None
    if not isinstance(cause, BaseException):
        return ""
    text = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
    return f"<details><summary>traceback</summary><pre>{escape(text)}</pre></details>"
