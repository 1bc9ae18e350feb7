"""What an agent sees, recorded: a bounded log of every call of the app, in MCP terms.

Every call the app runs (from an MCP client, a cell or a tool card's Run button) is
logged as the messages it is on the wire: the ``tools/call`` request with its
arguments, ``notifications/progress``, ``elicitation/create`` (the question and its
schema), and the response or error, each with its time since the request. Progress
is compacted (the latest event of a run of progress replaces the previous one), and
the log keeps the last ``size`` entries, so a progress flood costs nothing. Listeners
(``%fusion inspect``'s live view) are told when an entry is added.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..engine import App, Call, CallStatus


@dataclass
class Entry:
    """One logged message: ``direction`` is ``→`` (to the tool) or ``←`` (from it)."""

    at: float  # time.monotonic()
    call_id: str
    tool: str
    origin: str
    direction: str
    kind: str
    detail: str
    since_start_ms: float

    def line(self, width: int = 160) -> str:
        """``12:00:01.234  #7 slow (client) ← notifications/progress +15 ms 40% loading``."""
        stamp = time.strftime("%H:%M:%S", time.localtime(time.time() - (time.monotonic() - self.at)))
        millis = int((time.time() - (time.monotonic() - self.at)) % 1 * 1000)
        text = (
            f"{stamp}.{millis:03d}  #{self.call_id} {self.tool} ({self.origin}) {self.direction} {self.kind}"
            f" +{self.since_start_ms:.0f} ms {self.detail}"
        ).rstrip()
        return text if len(text) <= width else text[: width - 1] + "…"


class TrafficLog:
    """Records the app's calls; ``entries(tool)`` reads them, ``listen(fn)`` follows them live."""

    def __init__(self, app: App, *, size: int = 300, origin: Callable[[], str] | None = None) -> None:
        self.app = app
        self.entries_: deque[Entry] = deque(maxlen=size)
        self.origin = origin or (lambda: "local")
        self._listeners: list[Callable[[Entry], None]] = []
        self._watching: dict[str, Callable[[], None]] = {}
        self._undo = app.on_call(self._started)

    def _started(self, call: Call) -> None:
        origin = self.origin()
        tool = call.tool.name if call.tool is not None else "?"
        state: dict[str, Any] = {"request": None, "progress": None}

        def add(direction: str, kind: str, detail: str) -> None:
            now = time.monotonic()
            entry = Entry(now, str(call.id), tool, origin, direction, kind, detail, (now - call.started_at) * 1000)
            last = self.entries_[-1] if self.entries_ else None
            if last is not None and kind == last.kind == "notifications/progress" and last.call_id == entry.call_id:
                self.entries_.pop()  # a run of progress keeps its latest event only
            self.entries_.append(entry)
            for listener in list(self._listeners):
                listener(entry)

        add("→", "tools/call", _compact(call.arguments or {}))

        def changed(changed_call: Call) -> None:
            if changed_call.progress is not None and changed_call.progress is not state["progress"]:
                state["progress"] = changed_call.progress
                event = changed_call.progress
                add("←", "notifications/progress", f"{event.percent:.0f}% {event.message or ''}".rstrip())
            request = changed_call.request
            if request is not None and request is not state["request"]:
                state["request"] = request
                if request.kind == "url":
                    add("←", "elicitation/create", f"url {request.url} {request.message!r}")
                elif request.kind == "sample":
                    add("←", "sampling/createMessage", repr(request.message))
                elif request.kind == "roots":
                    add("←", "roots/list", "")
                else:
                    add("←", "elicitation/create", f"{request.message!r} {_compact(request.schema)}")
            elif request is None and state["request"] is not None and changed_call.status == CallStatus.RUNNING:
                state["request"] = None
                add("→", "elicitation answer", "answered")
            if changed_call.settled:
                self._watching.pop(str(changed_call.id), lambda: None)()
                result = changed_call.result
                if result is None:
                    return
                if result.error is not None:
                    add("←", "error", f"{result.error.code}: {result.error.message}")
                elif result.input_required is not None:
                    add("←", "input required", "the client answers by calling again")
                else:
                    add("←", "result", _compact(result.structured_content or result.content))

        if not call.settled:
            self._watching[str(call.id)] = call.watch(changed)
        else:
            changed(call)

    def entries(self, tool: str | None = None) -> list[Entry]:
        """The logged entries, oldest first; only ``tool``'s when given (substring match)."""
        return [e for e in self.entries_ if tool is None or tool in e.tool]

    def text(self, tool: str | None = None, limit: int = 40) -> str:
        """The last ``limit`` entries as lines (what ``%fusion inspect`` prints without widgets)."""
        lines = [entry.line() for entry in self.entries(tool)[-limit:]]
        return "\n".join(lines) if lines else "(no traffic yet)"

    def listen(self, listener: Callable[[Entry], None]) -> Callable[[], None]:
        """Call ``listener(entry)`` for each new entry; returns ``stop()``."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def close(self) -> None:
        """Stop recording (every watch is let go)."""
        self._undo()
        for undo in self._watching.values():
            undo()
        self._watching.clear()
        self._listeners.clear()


def _compact(value: Any, limit: int = 200) -> str:
    try:
        text = json.dumps(value, separators=(",", ":"), default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
