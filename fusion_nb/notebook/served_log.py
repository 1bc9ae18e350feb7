"""While a kernel serves, the engine's error log reaches the serving cell as short lines, rate-limited.

The engine logs an unexpected exception with its traceback under an error id (the
client only learns the class and the id). A plain process sends that to its log. In a
kernel where nobody configured logging, Python's last-resort handler prints it to
stderr, which is the output of the cell that started serving: an agent calling a failing
tool in a loop would fill that cell with tracebacks. The activity panel shows each
failed call with its traceback folded, so while it does, the cell gets one line per
error, at most one a second, with a count of the lines left out. Logging configured by
the user (a handler on ``fusion_nb`` or on the root logger) is left alone.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

LOGGER = "fusion_nb"


class CompactErrors(logging.Handler):
    """One line per record (no traceback), at most one per ``every`` seconds."""

    def __init__(self, every: float = 1.0) -> None:
        super().__init__(logging.WARNING)
        self.every = every
        self._last = float("-inf")
        self.skipped = 0

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``fusion-nb: <message>: <exception class>`` unless one was written under ``every`` s ago."""
        now = time.monotonic()
        if now - self._last < self.every:
            self.skipped += 1
            return
        self._last = now
        line = record.getMessage()
        if record.exc_info and record.exc_info[0] is not None:
            line += f": {record.exc_info[0].__name__} (its traceback is in the activity panel)"
        if self.skipped:
            line += f"; {self.skipped} more error line(s) left out"
            self.skipped = 0
        try:
            sys.stderr.write(f"fusion-nb: {line}\n")
        except Exception:  # a closed stream must not fail the call that logged
            self.handleError(record)


class ShownCrashes(logging.Filter):
    """Drops the log record of a crash whose call a view shows (with its traceback, or its cell raises it).

    In a kernel nobody configured logging for, Python's last-resort handler printed that
    traceback to stderr under the call's own view: the one failure shown two or three
    times. Logging configured by the user still gets every record.
    """

    def __init__(self, shown: Callable[[str], bool]) -> None:
        super().__init__()
        self.shown = shown

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a shown call's crash while only fusion-nb's own handlers (or none) listen."""
        call_id = getattr(record, "call_id", None)
        if call_id is None or not self.shown(str(call_id)):
            return True
        own = all(isinstance(h, CompactErrors) for h in logging.getLogger(LOGGER).handlers)
        return not (own and not logging.getLogger().handlers)


def drop_shown_crashes(shown: Callable[[str], bool]) -> Callable[[], None]:
    """Install ``ShownCrashes`` on the ``fusion_nb`` logger; returns undo."""
    logger = logging.getLogger(LOGGER)
    crashes = ShownCrashes(shown)
    logger.addFilter(crashes)
    return lambda: logger.removeFilter(crashes)


def compact_errors_while_serving() -> Callable[[], None]:
    """Install ``CompactErrors`` on the ``fusion_nb`` logger unless logging is configured; returns undo."""
    logger = logging.getLogger(LOGGER)
    if logger.handlers or logging.getLogger().handlers:
        return lambda: None
    handler = CompactErrors()
    logger.addHandler(handler)
    return lambda: logger.removeHandler(handler)
