"""The activity panel: what an app's callers (MCP clients above all) are doing, at any call rate.

An agent may call a kernel's tools hundreds of times a second. A widget per call
would cost the notebook's front end ~40 comm messages a call and the kernel most of
its time, for rows nobody reads. So the panel is built once and calls cost no widget
unless a person could act on them:

- A **quick call** (settled within ``delay``) only counts: the summary line reads
  "312 calls in the last minute, 0 failed". A failed one is also listed under
  *recent*, with its error in full. A cancelled call (Stop, the client's cancel) is
  counted as cancelled, not failed: a person who pressed Stop did not see a failure.
- A **live row** (progress, elapsed time, Stop) is made for a call once it has run
  longer than ``delay``, as soon as it waits for input, or at once when ``at_once``
  says so (an agent's task). Its widgets are closed, every
  model with its layout and style, when the call settles; the row moves to *recent*.
- **Recent** rows (the last ``history`` finished calls that had a live row or failed)
  are text: tool, arguments (bounded), who called, status, and the result or error
  in full behind a disclosure.

The panel is the summary line (``header``, one HTML widget), the live rows (an HTML
line and a Stop button each) and the recent rows (``board``, one HTML widget). One
coalesced flush redraws them all, paced so the panel sends at most ``max_messages``
comm messages a second in total (10 by default), whatever the call rate: after a flush
that changed ``n`` widgets the next one waits ``n / max_messages`` seconds (never less
than ``interval``).

``delay`` defaults to 1 s for the reason tqdm's ``delay`` exists: a bar that appears
and vanishes within a second is noise, and an agent's quick calls take milliseconds;
a call still running after a second is one a person may want to watch or stop.

The ``text/plain`` of the panel is all of it as text (summary, live calls, recent
calls), so a terminal, nbconvert and an unopened notebook read what the widget shows.

While a person's cell runs, the host's gate holds agents' calls before their bodies
(a bounded share passes): the summary line says how many wait on the running cell.

A 2026-era call that asks its client for input ends with *input required*, and the
client calls again with the answers: two engine calls, one call to a person. A call
that ends input-required keeps its row, and the next call of the same tool with the
same arguments continues it (rounds are counted on the row). The engine's call does not
say which continuation it resumes, so two clients asking the same tool the same thing at
once share a row; at most ``MAX_WAITING`` rounds wait (older ones count as ended).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as w

from fusion_nb.engine import Call, CallResult, CallStatus

from .call_view import images_html, traceback_html
from .closing import close_parts, close_tree
from .coalesce import Coalescer
from .status import (
    BORDER,
    ERROR,
    MUTED,
    SUCCESS,
    TEXT,
    VIEW_WIDTH,
    clock,
    colored,
    error_summary,
    escape,
    face_of,
    shorten,
    snapshot_html,
    status_text,
    tool_name,
)

#: a live row appears for a call still running after this many seconds (see the module docstring)
DELAY = 1.0
#: the window of the summary line
WINDOW = 60.0
#: arguments shown on a row; the full arguments are in the row's details
ARGS_LIMIT = 80
#: calls kept waiting for their client's next round (older ones count as ended)
MAX_WAITING = 20
#: a result or error shown in full up to this many characters (``%fusion inspect`` logs the wire)
DETAIL_LIMIT = 20_000


@dataclass(eq=False)
class Row:
    """One call as a person sees it (a 2026 multi-round call is one row over several engine calls)."""

    call: Call
    origin: str
    started: float
    rounds: int = 1
    ended: float | None = None
    live: LiveRow | None = None
    stop: Callable[[], None] = field(default=lambda: None)
    html: str | None = None  # its line on the board, once it has ended (drawn once)

    @property
    def elapsed(self) -> float:
        """Seconds since the first round started (frozen once it ended)."""
        end = self.ended if self.ended is not None else time.monotonic()
        return end - self.started

    def text(self) -> str:
        """``refund · {"id":"inv-7"} · client · ✔ done · 00:02 (2 rounds)``."""
        face = face_of(self.call)
        parts = [tool_name(self.call), args_text(self.call), self.origin, f"{face.icon} {face.label}"]
        parts.append(clock(self.elapsed) + (f" ({self.rounds} rounds)" if self.rounds > 1 else ""))
        if self.call.result is not None and self.call.result.error is not None:
            parts.append(error_summary(self.call.result))
        return " · ".join(parts)


class LiveRow(w.HBox):
    """A live call: its status row (bar, status, elapsed, message, who and what) and Stop."""

    def __init__(self, row: Row) -> None:
        self.row = row
        self.label = w.HTML("")
        self.stop_button = w.Button(
            description="Stop",
            icon="stop",
            tooltip="Cancel this call (its handler's cleanup runs; the client gets CANCELLED)",
            layout=w.Layout(width="auto", flex="0 0 auto"),
        )
        self.stop_button.on_click(lambda _: self.row.call.cancel())
        super().__init__(
            [self.label, self.stop_button],
            layout=w.Layout(align_items="center", flex_flow="row nowrap", overflow="hidden"),
        )
        self.refresh()

    def refresh(self) -> int:
        """Redraw from the call; the number of widget messages that cost (0 or 1)."""
        row = self.row
        who = f"{escape(row.origin)} · {escape(args_text(row.call))}"
        if row.rounds > 1:
            who += f" · round {row.rounds}"
        value = snapshot_html(row.call, round(row.elapsed, 1)) + (
            f'<div style="color:{MUTED};font-size:90%;white-space:nowrap;overflow:hidden;'
            f'text-overflow:ellipsis;max-width:{VIEW_WIDTH}">{who}</div>'
        )
        if value == self.label.value:
            return 0
        self.label.value = value
        return 1

    def close(self) -> None:
        """Close every model of the row: its widgets, their layouts and styles."""
        for child in self.children:
            close_tree(child)
        close_parts(self)
        super().close()


class ActivityPanel(w.VBox):
    """``display(ActivityPanel(app))``: a summary of every call, live rows for long ones, recent results.

    ``origin()`` (called as each call starts) names who started it: ``client`` (an
    MCP client), ``cell``, ``widget``; ``at_once(call, origin)`` says whether a call
    gets its live row as it starts rather than after ``delay`` (the notebook: an agent's
    task, which exists to run long). See the module docstring for the rest.
    """

    def __init__(
        self,
        app: Any,
        *,
        history: int = 5,
        delay: float = DELAY,
        interval: float = 0.2,
        max_messages: float = 10.0,
        origin: Callable[[], str] | None = None,
        at_once: Callable[[Call, str], bool] | None = None,
    ) -> None:
        self.app = app
        self.history = history
        self.delay = delay
        self.interval = interval
        self.max_messages = max_messages
        self.origin = origin or (lambda: "local")
        self.at_once = at_once or (lambda call, origin: False)
        self.header = w.HTML("")
        self.live_box = w.VBox([])
        self.board = w.HTML("")
        super().__init__([self.header, self.live_box, self.board])
        self.add_class("fusion-activity")  # (for the front end's stylesheets and tests)
        #: calls started and not settled, oldest first (no widget until promoted)
        self.running: dict[Call, Row] = {}
        #: calls that ended input-required, waiting for their client's next round, by tool and arguments
        self.continuing: dict[str, Row] = {}
        #: the last ``history`` finished rows worth a line, newest first
        self.recent: deque[Row] = deque(maxlen=history)
        #: the summary window's settled calls, counted per second: ``[second, calls, failed, cancelled]``
        #: (a tuple per call held ~10 MiB at 2,000 calls/s, and the kernel's RSS followed the peak rate)
        self.ended: deque[list[int]] = deque()
        self.total = 0
        self.failed = 0
        self.cancelled = 0
        self._window = [0, 0, 0]  # calls, failed, cancelled in ``ended`` (kept, not recounted per redraw)
        self._timer: asyncio.TimerHandle | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._closed = False
        self.coalescer = Coalescer(self._flush, interval)
        self._unsubscribe = app.on_call(self._started)
        for call in app.active_calls:
            self._started(call)
        self._flush()

    # -- following calls (the fast path: no widget) ---------------------------------------
    def _started(self, call: Call) -> None:
        if call in self.running or self._closed:
            return
        row = self.continuing.pop(continuation_key(call), None) if self.continuing else None
        if row is not None:  # the client's next round of a call that asked for input
            row.call, row.rounds, row.ended, row.html = call, row.rounds + 1, None, None
        else:
            row = Row(call, self.origin(), call.started_at)
        self.running[call] = row
        row.stop = call.watch(self._changed) if not call.settled else (lambda: None)
        if call.settled:
            self._changed(call)
            return
        if row.live is None and self.at_once(call, row.origin):
            self._promote(row)  # started to run long (an agent's task): no delay to wait out
            return
        self._arm()
        self.coalescer.request()

    def _changed(self, call: Call) -> None:
        row = self.running.get(call)
        if row is None:
            return
        if call.settled:
            self._ended(row)
        elif row.live is None and call.status == CallStatus.WAITING:
            self._promote(row)  # a person (or a client) is being asked: show it now
        elif row.live is not None:
            self.coalescer.request()

    def _ended(self, row: Row) -> None:
        call = row.call
        row.stop()
        row.stop = lambda: None
        del self.running[call]
        row.ended = time.monotonic()
        result = call.result
        if result is not None and result.input_required is not None:
            self._retire(row)  # no Stop for a round that has ended; the next round gets its own row rules
            key = continuation_key(call)
            older = self.continuing.pop(key, None)
            if older is not None:  # another client waits on the same tool and arguments: count its row as ended
                self._finished(older, listed=False)
            self.continuing[key] = row  # the client answers by calling again: same row
            while len(self.continuing) > MAX_WAITING:  # clients that never answer cost a bounded memory
                self._finished(self.continuing.pop(next(iter(self.continuing))), listed=False)
            self.coalescer.request()
            return
        self._finished(row, listed=row.live is not None)

    def _finished(self, row: Row, listed: bool) -> None:
        """Count ``row`` as ended; list it under *recent* if it had a live row or failed."""
        result = row.call.result
        cancelled = row.call.status == CallStatus.CANCELLED
        failed = result is not None and result.error is not None and not cancelled
        self.total += 1
        self.failed += failed
        self.cancelled += cancelled
        second = int(row.ended or time.monotonic())
        ended = self.ended
        if ended and ended[-1][0] >= second:  # (a continued row's older end counts in the latest second)
            bucket = ended[-1]
            bucket[1] += 1
            bucket[2] += failed
            bucket[3] += cancelled
        else:
            ended.append([second, 1, int(failed), int(cancelled)])
        window = self._window
        window[0] += 1
        window[1] += failed
        window[2] += cancelled
        self._retire(row)
        if listed or failed or cancelled:
            self.recent.appendleft(row)
        self.coalescer.request()

    def _retire(self, row: Row) -> None:
        if row.live is not None:
            row.live.close()
            row.live = None
            self.live_box.children = [r.live for r in self.running.values() if r.live is not None]

    # -- live rows ---------------------------------------------------------------------
    def _promote(self, row: Row) -> None:
        if row.live is None:
            row.live = LiveRow(row)
            self.live_box.children = [*self.live_box.children, row.live]
        self.coalescer.request()

    def _arm(self) -> None:
        """One timer for the oldest unpromoted call: it is promoted when ``delay`` has passed."""
        if self._timer is not None or self._closed:
            return
        pending = [row for row in self.running.values() if row.live is None]
        if not pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop, no timers: such calls only count
        due = pending[0].call.started_at + self.delay - time.monotonic()  # this round's start
        self._timer = loop.call_later(max(0.0, due), self._promote_due)

    def _promote_due(self) -> None:
        self._timer = None
        now = time.monotonic()
        for row in list(self.running.values()):
            if row.live is None and now - row.call.started_at >= self.delay:
                self._promote(row)
        self._arm()

    # -- drawing -----------------------------------------------------------------------
    def _flush(self) -> None:
        sent = 0
        for row in self.running.values():
            if row.live is not None:
                sent += row.live.refresh()
        for widget, value in ((self.header, self.header_html()), (self.board, self.board_html())):
            if value != widget.value:
                widget.value = value
                sent += 1
        # pace on what was sent: at most ``max_messages`` a second, whatever the call rate
        self.coalescer.interval = max(self.interval, sent / self.max_messages)
        if any(row.live is not None for row in self.running.values()):
            self._tick()

    def _tick(self) -> None:
        """Live rows show elapsed time: redraw at least once a second while one exists (one timer)."""
        if self._ticker is not None or self._closed:
            return
        with contextlib.suppress(RuntimeError):
            self._ticker = asyncio.get_running_loop().call_later(1.0, self._on_tick)

    def _on_tick(self) -> None:
        self._ticker = None
        self.coalescer.request()

    def summary(self) -> str:
        """``312 calls in the last minute, 0 failed, 1 cancelled · 2 live`` (cancelled only when some were)."""
        cutoff = time.monotonic() - WINDOW
        window = self._window
        while self.ended and self.ended[0][0] + 1 <= cutoff:  # a second wholly before the window
            _, calls_, failed_, cancelled_ = self.ended.popleft()
            window[0] -= calls_
            window[1] -= failed_
            window[2] -= cancelled_
        count, failed, cancelled = window
        live = sum(1 for row in self.running.values() if row.live is not None)
        text = f"{count} call{'' if count == 1 else 's'} in the last minute, {failed} failed"
        if cancelled:
            text += f", {cancelled} cancelled"
        if self.total != count:
            text += f" ({self.total} in all, {self.failed} failed" + (
                f", {self.cancelled} cancelled)" if self.cancelled else ")"
            )
        if live:
            text += f" · {live} live"
        waiting = len(self.continuing)
        if waiting:
            text += f" · {waiting} waiting for a client's answer"
        gate = getattr(self.app, "gate", None)  # the host's: calls wait before their bodies while a cell runs
        held = gate.waiting if gate is not None else 0
        if held:
            text += f" · {held} call{'' if held == 1 else 's'} waiting on the running cell"
        return text

    def header_html(self) -> str:
        """The summary line: ``<b>app</b> · 312 calls in the last minute, 0 failed``."""
        name = escape(getattr(self.app, "name", "app"))
        frame = f"max-width:{VIEW_WIDTH};color:{TEXT};border-bottom:1px solid {BORDER};padding-bottom:2px"
        return f'<div style="{frame}"><b>{name}</b> · {escape(self.summary())}</div>'

    def board_html(self) -> str:
        """The recent rows, each with its arguments and its result or error in full (folded)."""
        rows = [*self.continuing.values(), *self.recent]
        if not rows:
            return ""
        lines = [f'<div style="color:{MUTED};font-size:90%;margin-top:4px">recent</div>']
        for row in rows:  # a row there has ended: its HTML is drawn once, not on every redraw
            if row.html is None:
                row.html = recent_html(row)
            lines.append(row.html)
        return f'<div style="max-width:{VIEW_WIDTH}">{"".join(lines)}</div>'

    def text(self) -> str:
        """The panel as plain text: summary, live calls, recent calls."""
        lines = [f"{getattr(self.app, 'name', 'app')}: {self.summary()}"]
        lines += [f"  {status_text(row.call, row.elapsed)}" for row in self.running.values() if row.live is not None]
        lines += [f"  {row.text()}" for row in [*self.continuing.values(), *self.recent]]
        return "\n".join(lines)

    # -- reading and closing -----------------------------------------------------------
    @property
    def live(self) -> dict[Call, LiveRow]:
        """The live rows, by call."""
        return {call: row.live for call, row in self.running.items() if row.live is not None}

    def close(self) -> None:
        """Unsubscribe from the app and the calls; close every widget model of the panel."""
        self._closed = True
        self._unsubscribe()
        self.coalescer.close()
        for timer in (self._timer, self._ticker):
            if timer is not None:
                timer.cancel()
        self._timer = self._ticker = None
        for row in self.running.values():
            row.stop()
            if row.live is not None:
                row.live.close()
                row.live = None
        self.running.clear()
        self.continuing.clear()
        self.recent.clear()
        for part in (self.header, self.live_box, self.board):
            close_tree(part)
        close_parts(self)
        super().close()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """The widget, with the panel as text (read where widgets cannot render)."""
        bundle: dict[str, Any] | None = super()._repr_mimebundle_(**kwargs)
        if bundle is not None:
            bundle["text/plain"] = self.text()
        return bundle

    def __repr__(self) -> str:
        live = sum(1 for row in self.running.values() if row.live is not None)
        return f"<ActivityPanel {getattr(self.app, 'name', 'app')}: {live} live, {len(self.recent)} recent>"


def args_text(call: Call, limit: int = ARGS_LIMIT) -> str:
    """The call's arguments as compact JSON, bounded."""
    return shorten(compact_json(call.arguments or {}), limit)


def compact_json(value: Any) -> str:
    """``value`` as compact JSON (``repr`` for what JSON cannot say)."""
    try:
        return json.dumps(value, separators=(",", ":"), default=repr, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def continuation_key(call: Call) -> str:
    """What ties a client's next round to the call that asked it for input: tool and arguments."""
    return f"{tool_name(call)}\x00{compact_json(call.arguments or {})}"


def outcome_text(result: CallResult | None) -> str:
    """A finished call's result or error in full (bounded by ``DETAIL_LIMIT``)."""
    if result is None:
        return ""
    if result.error is not None:
        error = result.error
        text = f"{error.code}: {error.message}"
        if error.recovery:
            text += f"\n{error.recovery}"
        return shorten(text, DETAIL_LIMIT)
    if result.input_required is not None:
        return "input required: the client answers by calling again"
    shown: Any = result.structured_content
    if shown is None:  # the blocks as the agent reads them, one after the other; images are drawn below
        blocks = [_block_text(block) for block in result.content or [] if not _is_image(block)]
        shown = blocks[0] if len(blocks) == 1 else "\n".join(b if isinstance(b, str) else _json(b) for b in blocks)
    text = shown if isinstance(shown, str) else _json(shown)
    return shorten(text, DETAIL_LIMIT)


def _json(value: Any) -> str:
    return json.dumps(value, indent=1, default=repr, ensure_ascii=False)


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "image"


def _block_text(block: Any) -> Any:
    """A content block as the row's text: its text, or the block itself (a resource, say)."""
    return block.get("text", block) if isinstance(block, dict) else block


def recent_html(row: Row) -> str:
    """A finished row: one line (tool, arguments, caller, status, time), its outcome folded under it."""
    face = face_of(row.call)
    result = row.call.result
    color = ERROR if result is not None and result.error is not None else SUCCESS
    if row.call.status not in (CallStatus.DONE, CallStatus.FAILED):
        color = face.color
    line = (
        f"{colored(escape(face.icon), color, bold=True)} <b>{escape(tool_name(row.call))}</b>"
        f" <code>{escape(args_text(row.call))}</code> · {escape(row.origin)} · {escape(face.label)}"
        f" · {clock(row.elapsed)}" + (f" · {row.rounds} rounds" if row.rounds > 1 else "")
    )
    if row.ended is not None and row.call.result is not None and row.call.result.input_required is not None:
        line += " · waiting for the client's answer"
    outcome = escape(outcome_text(result))
    crash = traceback_html(result) + images_html(result) if result is not None else ""
    return (
        f'<details style="color:{TEXT}"><summary style="white-space:nowrap;overflow:hidden;'
        f'text-overflow:ellipsis">{line}</summary>'
        f'<div style="color:{MUTED};font-size:90%">arguments: <code>{escape(compact_json(row.call.arguments or {}))}'
        f'</code></div><pre style="white-space:pre-wrap;word-break:normal;overflow-wrap:anywhere;margin:2px 0">'
        f"{outcome}</pre>{crash}</details>"
    )
