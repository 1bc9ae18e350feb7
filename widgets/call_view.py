"""The live view of one call: one fixed-width row (name, bar, status, timing, message, Stop), then input.

The row never wraps: widths are fixed, the message is ellipsised and the full line
is the row's hover text. The view shows the call's status; its value is the cell's
``Out[n]`` (shown once). A handler crash keeps its traceback folded under the row
(unless a cell awaiting the call raises the crash itself: shown once).

Progress may arrive thousands of times a second; the view only marks itself dirty
and a ``Coalescer`` flushes at most every ``interval`` (two widgets change per
flush, so about 20 state messages a second at the default 0.1 s). Settling
flushes at once, so the final state is exact, then drops every timer and the
call's watch: nothing of the view stays attached to a finished call.

The text/plain and text/html of the view's display are its current state, so an
output refreshed once the call settled (``show_call`` does) reads right in a
notebook opened without widget state (GitHub, nbviewer). A live call's HTML says
where to find it when the widget cannot come back (a page reloaded from an
untrusted file shows the HTML): ``%fusion calls``.

A call queued behind another (a mutation runs one call at a time: ``blocker``
names the call ahead) says so under its row, with a Stop for that call and the
question it waits on: a re-run never sits silently behind a form nobody sees.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import time
import traceback
from collections.abc import Callable
from typing import Any

import ipywidgets as w

import fusion_nb.engine
from fusion_nb.engine import Call, CallResult

from .closing import close_parts, close_tree
from .coalesce import Coalescer
from .live_views import asking, hide_live, show_live
from .prompt import Prompt
from .status import (
    BAR_WIDTH,
    MUTED,
    NAME_WIDTH,
    STATUS_WIDTH,
    VIEW_WIDTH,
    call_label,
    crash_of,
    error_html,
    escape,
    face_of,
    percent_of,
    row_html,
    snapshot_html,
    status_cells,
    status_text,
    tool_name,
)
from .watching import watch_until_settled


class CallView(w.VBox):
    """``display(CallView(call))``: a progress row that follows the call to its end."""

    def __init__(
        self,
        call: Call,
        *,
        interval: float = 0.1,
        tick: float = 1.0,
        blocker: Callable[[Call], Call | None] | None = None,
    ) -> None:
        super().__init__(layout=w.Layout(width=VIEW_WIDTH, max_width="100%"))
        self.call = call
        self._blocker = blocker
        self.ahead: Call | None = None  # the call this one queues behind, while it does
        self._ahead_shown: tuple[str, str, Any] | None = None
        self.key = str(call.id)
        self.started = call.started_at
        self.ended: float | None = None
        self.prompt: Prompt | None = None
        self.prompts: list[Prompt] = []
        self.name_label = w.HTML(
            f'<b title="{escape(tool_name(call))}">{escape(tool_name(call))}</b>',
            layout=w.Layout(max_width=NAME_WIDTH, overflow="hidden", flex="0 0 auto"),
        )
        self.bar = w.FloatProgress(value=0.0, min=0.0, max=100.0, layout=w.Layout(width=BAR_WIDTH, flex="0 0 auto"))
        # a fixed width: the row's message is cut with an ellipsis inside it, never wrapped
        self.status_line = w.HTML("", layout=w.Layout(width=STATUS_WIDTH, flex="1 1 auto", min_width="0"))
        self.stop_button = w.Button(
            description="Stop",
            icon="stop",
            tooltip="Cancel this call (its handler's cleanup runs)",
            layout=w.Layout(width="auto", flex="0 0 auto"),
        )
        self.stop_button.on_click(lambda _: self.call.cancel())
        self.details = w.HTML("")
        self.outcome_below = True  # see leave_outcome_to_the_cell
        self.input_box = w.VBox([])
        self.row = w.HBox(
            [self.name_label, self.bar, self.status_line, self.stop_button],
            layout=w.Layout(width="100%", align_items="center", flex_flow="row nowrap", overflow="hidden"),
        )
        self.ahead_row: w.HBox | None = None  # made when a call is ahead: its line and its Stop
        self.ahead_box = w.VBox([])  # that row, then the question the call ahead waits on
        self.children = [self.row, self.ahead_box, self.details, self.input_box]
        self._tick_every = tick
        self._tick: asyncio.TimerHandle | None = None
        self._shown_status = ""
        self.coalescer = Coalescer(self._flush, interval)
        self._flush()
        if call.settled:
            self._settled()
            self._stop = lambda: None
        else:
            show_live(self.key, self)
            open_question = asking(self.key)
            if open_question is not None:  # a view made while the call waits (%fusion calls, a re-run)
                self.host(open_question)
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
        self.stop_button.layout.display = "none"
        self.ahead, self._ahead_shown, self.ahead_box.children = None, None, []
        if self.call.result is not None:
            # the row cuts long errors; below it the whole error (a Stop needs no explaining,
            # and a cell that awaits the call shows the error itself)
            below = self.outcome_below and self.call.status != "cancelled"
            shown = error_html(self.call.result) if below else ""
            images = images_html(self.call.result) if self.outcome_below else ""  # else the cell's Out[n] draws it
            folded = traceback_html(self.call.result) if self.outcome_below else ""  # else the cell raises it
            self.details.value = shown + folded + images
        if self.prompt is not None:
            self.prompt.abandon(self.call.status)

    def _release(self) -> None:
        self.coalescer.close()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        hide_live(self.key, self)

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
        face = face_of(call)
        elapsed = self.elapsed
        with self.bar.hold_sync():  # one message for all three traits
            self.bar.value = percent_of(call)
            self.bar.bar_style = face.bar_style
            self.bar.style.bar_color = face.color
        self.status_line.value = row_html(status_cells(call, elapsed), status_text(call, elapsed))
        self._show_ahead()

    def _show_ahead(self) -> None:
        """Under the row: the call this one queues behind, its Stop, and the question it waits on."""
        ahead = self._blocker(self.call) if self._blocker is not None and not self.call.settled else None
        self.ahead = ahead if ahead is not None and not ahead.settled else None
        if self.ahead is None:
            if self._ahead_shown is not None:
                self._ahead_shown = None
                self.ahead_box.children = []
            return
        question = asking(self.ahead.id)
        line = ahead_text(self.ahead)
        if self._ahead_shown == (self.ahead.id, line, question):
            return
        self._ahead_shown = (self.ahead.id, line, question)
        if self.ahead_row is None:
            stop = w.Button(icon="stop", layout=w.Layout(width="auto", flex="0 0 auto"))
            stop.on_click(lambda _: self.ahead.cancel() if self.ahead is not None else None)
            self.ahead_row = w.HBox([w.HTML(""), stop], layout=w.Layout(align_items="center"))
        text, stop = self.ahead_row.children
        text.value = f'<span style="color:{MUTED}">{escape(line)}</span>'
        stop.description = f"Stop {tool_name(self.ahead)}"
        stop.tooltip = f"Cancel {call_label(self.ahead)}: this call runs next"
        self.ahead_box.children = [self.ahead_row, *([question] if question is not None else [])]

    def leave_outcome_to_the_cell(self) -> None:
        """The cell awaiting this call shows its outcome: the view does not repeat it.

        Its error is raised as one line, and its value (a figure, say) is the cell's
        ``Out[n]``, drawn by the notebook; the view drawing the image too showed it twice.
        """
        self.outcome_below = False

    # -- hosting input prompts --------------------------------------------------------
    def host(self, prompt: Prompt) -> None:
        """Show ``prompt`` under the row; earlier rounds of the call stay above it, compact.

        One prompt may live in several views of the same call: they are views of one
        widget model, so an answer given in any of them is the answer.
        """
        if prompt in self.prompts:
            return
        for earlier in self.prompts:
            earlier.compact()
        self.prompts.append(prompt)
        self.prompt = prompt
        self.input_box.children = list(self.prompts)
        if self.call.settled:
            prompt.abandon(self.call.status)

    # -- reading ----------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        """Seconds since the call started (frozen once it settled)."""
        end = self.ended if self.ended is not None else time.monotonic()
        return round(end - self.started, 1)

    @property
    def live(self) -> bool:
        """True until the call settles (or the view is closed)."""
        return not self.coalescer.closed

    def close(self) -> None:
        """Stop following the call and close every model the view made (layouts and styles too).

        The prompts it hosts are not closed: one prompt may live in several views of
        the same call (it is the form the person answered, and the other views show it).
        """
        self._stop()
        self._release()
        close_tree(self.row)
        if self.ahead_row is not None:
            close_tree(self.ahead_row)
        for widget in (self.details, self.input_box, self.ahead_box):  # the input box, not the prompts in it
            close_parts(widget)
            widget.close()
        close_parts(self)
        super().close()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """The widget, plus text and HTML of its current state (read where widgets cannot render)."""
        bundle: dict[str, Any] | None = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        bundle["text/plain"] = status_text(self.call, self.elapsed)
        # the questions asked and their answers too: a stored notebook shows its forms
        bundle["text/html"] = snapshot_html(self.call, self.elapsed) + "".join(p.snapshot_html() for p in self.prompts)
        if not self.call.settled:  # what a page that cannot show the widget (reloaded, untrusted) reads
            bundle["text/html"] += LIVE_HINT
        return bundle

    def __repr__(self) -> str:
        return f"<CallView {status_text(self.call, self.elapsed)}>"


#: under a live call's HTML picture: what to do when the widget did not come back
LIVE_HINT = (
    f'<div style="color:{MUTED}">This call was live in the kernel when this was shown: if it shows as text '
    "(a reloaded page), <code>%fusion calls</code> shows it with its form and Stop.</div>"
)


def ahead_text(ahead: Call) -> str:
    """``waiting for billing.refund (inv-7), which waits for an answer``."""
    doing = "which waits for an answer" if ahead.status == "waiting" else f"which is {ahead.status}"
    return f"waiting for {call_label(ahead)}, {doing}"


#: where fusion-nb's own frames live (the engine, the MCP layer, the host): not the person's code
_FRAMEWORK = os.path.dirname(os.path.dirname(os.path.abspath(fusion_nb.engine.__file__)))


_IMAGE_STYLE = "max-width:100%;max-height:320px;display:block"


def images_html(result: CallResult) -> str:
    """The images an agent received (a figure, a picture), drawn as it sees them; ``""`` when none.

    The content is already bounded by the presenter (``fusion_nb.mcp.rich``), so what the
    person sees here is exactly what went to the client, not the original value. Each is
    captioned with what it is on the wire (type, pixels, bytes): the row's text does not
    spell the image out, and the caption says what the agent's budget paid for it.
    """
    if result.is_error:
        return ""
    tags = [
        f'<figure style="margin:4px 0"><img src="data:{escape(block["mimeType"])};base64,'
        f'{escape(str(block["data"]))}" alt="{escape(image_caption(block))}" style="{_IMAGE_STYLE}">'
        f'<figcaption style="color:{MUTED};font-size:90%">{escape(image_caption(block))}</figcaption></figure>'
        for block in result.content
        if isinstance(block, dict) and block.get("type") == "image"
    ]
    return "".join(tags)


def image_caption(block: dict[str, Any]) -> str:
    """``image/png · 600x300 px · 24 KB``: an image block as a person reads it (pixels for a PNG)."""
    data = str(block.get("data", ""))
    size = len(data) * 3 // 4 - data[-2:].count("=")
    parts = [str(block.get("mimeType", "image"))]
    head = _png_head(data)
    if head is not None:
        parts.append(f"{head[0]}x{head[1]} px")
    parts.append(f"{size / 1024:.0f} KB" if size >= 1024 else f"{size} bytes")
    return " · ".join(parts)


def _png_head(data: str) -> tuple[int, int] | None:
    """A base64 PNG's width and height, from its header (the first 24 bytes), or ``None``."""
    try:
        head = base64.b64decode(data[:32])
    except (ValueError, binascii.Error):
        return None
    if len(head) < 24 or not head.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def traceback_html(result: CallResult) -> str:
    """A folded traceback for a handler crash (the client only ever sees one sentence).

    It starts at the first frame of the tool's own code: the frames of fusion-nb that
    ran the handler (the runner, the worker thread's hop) say nothing about the crash.
    A crash with no frame outside fusion-nb (a bug of ours) keeps every frame.
    """
    cause = crash_of(result)
    if cause is None:
        return ""
    shown = traceback.TracebackException.from_exception(cause)
    own = [frame for frame in shown.stack if not frame.filename.startswith(_FRAMEWORK + os.sep)]
    if own:
        first = next(i for i, frame in enumerate(shown.stack) if frame in own)
        shown.stack = traceback.StackSummary.from_list(shown.stack[first:])
    text = "".join(shown.format())
    return f"<details><summary>traceback</summary><pre>{escape(text)}</pre></details>"
