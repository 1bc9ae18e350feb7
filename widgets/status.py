"""How a call looks, in one place: per-status icon, label and colour, and the texts about a call.

Every colour is a JupyterLab CSS variable with a fallback (so the dark theme, Notebook 7
and an unopened notebook's HTML all read right); no other module spells a colour. Icons
are BMP symbols from the Geometric Shapes and Dingbats blocks that DejaVu and Liberation
fonts carry (Debian's chromium has no emoji font): no emoji.
Seven statuses, seven icon/label/colour triples; only ``running`` is blue, and a call that
ended early (cancelled, timed out, failed) is never blue.
"""

from __future__ import annotations

import html
from typing import Literal, NamedTuple

from fusion_nb.engine import DECLINED, INTERNAL_ERROR, Call, CallResult, CallStatus


class Look(NamedTuple):
    """The face of one status: bar style, icon, label, CSS colour (used for the bar too)."""

    bar_style: str
    icon: str
    label: str
    color: str


def css_var(name: str, fallback: str) -> str:
    """A JupyterLab theme colour, with the light theme's value where no theme is loaded."""
    return f"var(--jp-{name}, {fallback})"


def paint(prop: str, color: str) -> str:
    """``prop:plain;prop:var(...)``: JupyterLab's sanitiser drops a ``var()`` declaration in an
    untrusted (freshly cloned) notebook's HTML, so the plain colour comes first and stays."""
    if not (color.startswith("var(") and color.endswith(")")):
        return f"{prop}:{color}"
    plain = color[4:-1].partition(",")[2].strip()
    return f"{prop}:{plain};{prop}:{color}" if plain else f"{prop}:{color}"


#: the palette: JupyterLab's semantic colours (they switch with the theme)
INFO = css_var("info-color1", "#0288d1")
SUCCESS = css_var("success-color1", "#388e3c")
WARN = css_var("warn-color1", "#f57c00")
ERROR = css_var("error-color1", "#d32f2f")
MUTED = css_var("ui-font-color2", "#616161")
CANCEL = css_var("ui-font-color1", "#424242")
TIMEOUT = css_var("error-color0", "#b71c1c")
DECLINE = css_var("ui-font-color3", "#757575")
TEXT = css_var("content-font-color1", "rgba(0, 0, 0, 0.87)")
BORDER = css_var("border-color2", "#e0e0e0")
LINK = css_var("content-link-color", "#1976d2")
TRACK = css_var("layout-color3", "#bdbdbd")

LOOKS: dict[CallStatus | Literal["declined"], Look] = {
    CallStatus.QUEUED: Look("", "◌", "queued", MUTED),
    CallStatus.RUNNING: Look("info", "▶", "running", INFO),
    CallStatus.WAITING: Look("warning", "◆", "waiting for input", WARN),
    CallStatus.DONE: Look("success", "✔", "done", SUCCESS),
    CallStatus.FAILED: Look("danger", "✖", "failed", ERROR),
    CallStatus.CANCELLED: Look("", "■", "cancelled", CANCEL),
    CallStatus.TIMED_OUT: Look("danger", "◷", "timed out", TIMEOUT),
    # not a status of its own: a call the person's Decline ended (see face_of)
    "declined": Look("", "⊘", "declined", DECLINE),
}

#: prompt outcomes, by answer (the prompt's own buttons say Submit / Decline / Dismiss)
ANSWERED: dict[str, tuple[str, str, str]] = {
    "accept": ("✔", "Submitted", SUCCESS),
    "decline": ("✖", "Declined", ERROR),
    "cancel": ("■", "Dismissed", CANCEL),
}

#: the one-line status row never wraps: it takes the cell's width, its message is the elastic
#: part (ellipsised, the whole line on hover); a failed call's full error is shown below it
VIEW_WIDTH = "100%"
BAR_WIDTH = "160px"
NAME_WIDTH = "220px"
STATUS_WIDTH = "100%"


def look(status: CallStatus) -> Look:
    """The face of ``status`` (an unknown status gets a neutral one)."""
    return LOOKS.get(status) or Look("", "?", str(status), MUTED)


def declined(call: Call) -> bool:
    """Whether the call ended on the person's Decline (failed with ``DECLINED``): their answer, not a fault."""
    error = call.result.error if call.result is not None else None
    return call.status == CallStatus.FAILED and error is not None and error.code == DECLINED


def face_of(call: Call) -> Look:
    """The face of the call's status; a declined call reads as declined, not as failed."""
    return LOOKS["declined"] if declined(call) else look(call.status)


def percent_of(call: Call) -> float:
    """The bar value: last progress, 100 once done (a finished call is complete)."""
    if call.status == CallStatus.DONE:
        return 100.0
    return call.progress.percent if call.progress is not None else 0.0


def clock(seconds: float) -> str:
    """tqdm's clock: ``00:07``, ``12:34``, ``1:02:03``."""
    seconds = max(0, int(seconds))
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def timing(percent: float, elapsed: float, live: bool) -> str:
    """tqdm's ``[elapsed<remaining, rate]``, in percent: ``00:03<00:05, 12.3%/s``.

    Rate and ETA need some progress to estimate from; a settled call shows its
    elapsed time only.
    """
    if not live or percent <= 0 or elapsed <= 0:
        return clock(elapsed)
    rate = percent / elapsed
    remaining = (100.0 - percent) / rate if percent < 100 else 0.0
    return f"{clock(elapsed)}<{clock(remaining)}, {rate:.3g}%/s"


def message_of(call: Call) -> str:
    """The call's current line: the pending question, else its newest progress message or log line."""
    if call.status == CallStatus.WAITING and call.request is not None:
        return call.request.message
    return call.line or ""


def status_text(call: Call, elapsed: float) -> str:
    """The whole status row as text (the text view and the fallbacks use it).

    ``billing.refund: ▶ running  42% · 00:03<00:05, 12.3%/s · rows loaded``; a
    failed call ends with its error (a value goes to ``Out[n]``, not here).
    """
    face = face_of(call)
    live = not call.settled
    percent = percent_of(call)
    parts = [f"{tool_name(call)}: {face.icon} {face.label} {percent:3.0f}%", timing(percent, elapsed, live)]
    tail = tail_of(call)
    if tail:
        parts.append(tail)
    return " · ".join(parts)


def tail_of(call: Call) -> str:
    """The row's last part: the error of a failed call, else the current (or last) message.

    A cancelled call's error only repeats its status (a person stopped it): its last message stays.
    """
    if declined(call) and call.result is not None and call.result.error is not None:
        return shorten(call.result.error.message, 200)  # the person's answer: no error code
    if call.result is not None and call.result.error is not None and call.status != CallStatus.CANCELLED:
        return error_summary(call.result)
    return message_of(call)


def error_summary(result: CallResult, limit: int = 200) -> str:
    """One line about a failed call: the error's code and message."""
    error = result.error
    if error is None:
        return ""
    return shorten(f"{error.code}: {error.message}", limit)


def crash_of(result: CallResult) -> BaseException | None:
    """The handler's own exception when it crashed (``INTERNAL_ERROR``), else ``None``."""
    if result.error is None or result.error.code != INTERNAL_ERROR:
        return None
    return result.exception  # the engine keeps it in this process only: never on the wire


def error_html(result: CallResult) -> str:
    """A failed call's whole error, wrapped, under its row: code, sentence and what to do."""
    error = result.error
    if error is None:
        return ""
    text = f"{error.code}: {error.message}"
    if error.recovery:
        text += f" Recovery: {error.recovery}"
    return f'<div style="white-space:pre-wrap;overflow-wrap:anywhere">{colored(escape(text), ERROR)}</div>'


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_name(call: Call) -> str:
    """The called tool's name (``?`` for an unknown tool)."""
    return call.tool.name if call.tool is not None else "?"


def call_label(call: Call) -> str:
    """``billing.refund (inv-7)``: a call named by its tool and its arguments' values."""
    values = ", ".join(str(value) for value in (call.arguments or {}).values())
    return f"{tool_name(call)} ({shorten(values, 40)})" if values else tool_name(call)


def escape(text: object) -> str:
    """HTML-escape anything shown in a widget's HTML."""
    return html.escape(str(text), quote=True)


def colored(text: str, color: str, *, bold: bool = False) -> str:
    """``text`` (already escaped) in ``color``."""
    weight = ";font-weight:600" if bold else ""
    return f'<span style="{paint("color", color)}{weight}">{text}</span>'


def row_html(parts: list[tuple[str, str]], title: str, width: str = STATUS_WIDTH) -> str:
    """One line that never wraps: each ``(html, css)`` part a fixed cell, the last one elastic.

    ``title`` (plain text) is the full line, shown on hover.
    """
    cells = "".join(f'<span style="{css}">{part}</span>' for part, css in parts)
    return (
        f'<div title="{escape(title)}" style="display:flex;align-items:baseline;gap:8px;white-space:nowrap;'
        f'overflow:hidden;width:{width};max-width:100%;{paint("color", TEXT)};line-height:22px">{cells}</div>'
    )


#: CSS of the row's cells: fixed widths for icon+label and percent/time; the message is elastic
FIXED = "flex:none"
ELLIPSIS = "flex:1 1 auto;min-width:0;overflow:hidden;text-overflow:ellipsis"


def snapshot_html(call: Call, elapsed: float) -> str:
    """A self-contained HTML picture of the view (for notebooks opened without widget state)."""
    face = face_of(call)
    percent = percent_of(call)
    bar = (
        f'<span style="{FIXED};display:inline-block;width:{BAR_WIDTH};height:10px;{paint("background", TRACK)};'
        f'border-radius:2px;overflow:hidden"><span style="display:block;height:100%;width:{percent:.0f}%;'
        f'{paint("background", face.color)}"></span></span>'
    )
    return row_html(
        [
            (f"<b>{escape(tool_name(call))}</b>", f"{FIXED};max-width:{NAME_WIDTH};overflow:hidden"),
            (bar, FIXED),
            *status_cells(call, elapsed),
        ],
        status_text(call, elapsed),
        VIEW_WIDTH,
    )


def status_cells(call: Call, elapsed: float) -> list[tuple[str, str]]:
    """The row after the bar: icon and label, percent and timing, then the message."""
    face = face_of(call)
    percent = percent_of(call)
    live = not call.settled
    tail = tail_of(call)
    return [
        (colored(f"{face.icon} {escape(face.label)}", face.color, bold=True), f"{FIXED};width:10em"),
        (f"{percent:3.0f}%", f"{FIXED};width:3em;text-align:right;font-variant-numeric:tabular-nums"),
        (escape(timing(percent, elapsed, live)), f"{FIXED};font-variant-numeric:tabular-nums;{paint('color', MUTED)}"),
        (escape(tail), ELLIPSIS),
    ]
