"""While a kernel serves, engine errors reach the serving cell as short, rate-limited lines."""

from __future__ import annotations

import logging

from fusion_nb.notebook.served_log import LOGGER, CompactErrors, compact_errors_while_serving


def crash_record(message: str) -> logging.LogRecord:
    try:
        raise SystemExit(3)
    except SystemExit as exc:
        return logging.getLogger(LOGGER).makeRecord(
            LOGGER, logging.ERROR, __file__, 1, message, (), (type(exc), exc, exc.__traceback__)
        )


def test_one_short_line_per_second_with_a_count_of_the_rest(capsys):
    handler = CompactErrors(every=3600)
    for number in range(5):
        handler.handle(crash_record(f"tool exits (call {number}) failed (error id x)"))
    handler.every = 0
    handler.handle(crash_record("tool exits (call 5) failed (error id y)"))
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "fusion-nb: tool exits (call 0) failed (error id x): SystemExit (its traceback is in the activity panel)",
        "fusion-nb: tool exits (call 5) failed (error id y): SystemExit (its traceback is in the activity panel);"
        " 4 more error line(s) left out",
    ]


def test_configured_logging_is_left_alone(monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # as in a kernel (pytest's own capture handlers aside)
    mine = logging.NullHandler()
    root.addHandler(mine)
    try:
        undo = compact_errors_while_serving()
        assert logging.getLogger(LOGGER).handlers == []
        undo()
    finally:
        root.removeHandler(mine)
    undo = compact_errors_while_serving()
    assert [type(h) for h in logging.getLogger(LOGGER).handlers] == [CompactErrors]
    undo()
    assert logging.getLogger(LOGGER).handlers == []
