"""Terminal IPython: a tool that asks for input gets a text prompt, and ``%fusion serve`` works.

Without a widget frontend a form could never be shown, so the notebook channel answers
``None`` (``ELICITATION_UNSUPPORTED``). At a terminal a person can still answer: one
line per field, read in a worker thread so the cell's loop keeps running (progress,
other calls). The thread reads with ``select`` and a short timeout rather than a blocking
``input()``: when the call is cancelled (Ctrl-C), the reader stops at once instead of
lingering and eating the next line typed at IPython's prompt.

Terminal IPython runs no event loop between cells, so ``%fusion serve`` cannot live on
the cells' loop as it does in a kernel: ``serve_in_thread`` gives the server a loop of
its own on a daemon thread. Calls from clients then run on that thread's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import select
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

import anyio

from ..engine import AskField, InputChannel, InputQuestion, InputRequest, InputResponse

#: how often the reader thread looks whether the question was dropped (seconds)
POLL = 0.1
YES = ("y", "yes", "true", "1")
NO = ("n", "no", "false", "0")
DECLINE_WORD, DISMISS_WORD = "!decline", "!dismiss"


class Dropped(Exception):
    """The question was taken back (the call was cancelled) while the person was typing."""


class TerminalInputChannel(InputChannel):
    """Ask at the terminal: the message, then one prompt per field; Enter keeps a default.

    ``!decline`` declines; ``!dismiss`` or Ctrl-D dismisses. A refused answer is asked
    again with its problems shown (``can_reask``). Only when both streams are a TTY:
    elsewhere (a pipe, a service) nobody is there to type, and ``ask`` returns ``None``.
    """

    can_reask = True

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.stdin = stdin
        self.stdout = stdout

    @property
    def available(self) -> bool:
        """Whether a person sits at this terminal (stdin and stdout are TTYs)."""
        return all(_isatty(stream) for stream in (self._in, self._out))

    @property
    def _in(self) -> TextIO:
        return self.stdin or sys.stdin

    @property
    def _out(self) -> TextIO:
        return self.stdout or sys.stdout

    async def ask(self, question: InputQuestion) -> InputResponse | None:
        """Prompt in a worker thread (the loop lives on); a cancelled call stops the prompt."""
        if not self.available or not question.request.for_person:
            return None  # (sampling and roots: only an MCP client answers those)
        dropped = threading.Event()
        try:
            return await anyio.to_thread.run_sync(self._ask, question, dropped, abandon_on_cancel=True)
        finally:
            dropped.set()  # the reader gives up within POLL seconds

    def _ask(self, question: InputQuestion, dropped: threading.Event) -> InputResponse:
        request = question.request
        # the call's signal too: in a terminal the loop may not run again (to cancel the
        # waiting task) until a later cell awaits, and meanwhile the reader must not eat lines
        gone = _Gone(dropped, question.signal)
        self._say(f"\n{question.tool} asks: {request.message}")
        for problem in question.problems:
            self._say(f"  ! {problem}")
        try:
            if request.kind == "url":
                return self._ask_url(request, gone)
            return self._ask_form(request, gone)
        except EOFError:
            self._say("  (dismissed)")
            return InputResponse("cancel")

    def _ask_url(self, request: InputRequest, dropped: Any) -> InputResponse:
        self._say(f"  open: {request.url}")
        while True:
            answer = self._line("  Done? [y/n] ", dropped).strip().lower()
            if answer in YES or answer in NO:
                return InputResponse("accept" if answer in YES else "decline")
            if answer in (DECLINE_WORD, DISMISS_WORD):
                return InputResponse("decline" if answer == DECLINE_WORD else "cancel")

    def _ask_form(self, request: InputRequest, dropped: Any) -> InputResponse:
        fields = request.fields or {}
        self._say(f"  (Enter keeps the [default]; {DECLINE_WORD} declines; {DISMISS_WORD} or Ctrl-D dismisses)")
        content: dict[str, Any] = {}
        for key, field in fields.items():
            while True:
                text = self._line(f"  {_prompt(key, field)}: ", dropped).strip()
                if text in (DECLINE_WORD, DISMISS_WORD):
                    return InputResponse("decline" if text == DECLINE_WORD else "cancel")
                try:
                    value = _parse(text, key, field)
                except ValueError as error:
                    self._say(f"  ! {error}")
                    continue
                if value is not None:
                    content[key] = value
                break
        return InputResponse("accept", content)  # the engine checks it, and asks again with any problems

    def _line(self, prompt: str, dropped: Any) -> str:
        """One line from stdin, giving up once ``dropped.is_set()``; ``EOFError`` on Ctrl-D.

        Reads without blocking after ``select`` says stdin is readable: a blocking read
        could outlast a cancel (a tty reports readiness on Ctrl-C too), and then take the
        next line typed at IPython's own prompt. It reads through a descriptor of its own
        (``_own_descriptor``): stdin's non-blocking flag is shared with IPython's prompt,
        whose next read would see an end of input while it is set.
        """
        out = self._out
        out.write(prompt)
        out.flush()
        typed = b""
        with _own_descriptor(self._in.fileno()) as (fd, own):
            while True:
                if dropped.is_set():
                    raise Dropped()
                ready, _, _ = select.select([fd], [], [], POLL)
                if not ready:
                    continue
                if dropped.is_set():  # taken back during the wait: what is ready now is typed at IPython's prompt
                    raise Dropped()
                try:
                    chunk = os.read(fd, 4096) if own else _read_switched(fd)
                except BlockingIOError:
                    continue
                if not chunk:
                    raise EOFError
                typed += chunk
                if b"\n" in typed:
                    return typed.split(b"\n", 1)[0].decode(errors="replace")

    def _say(self, text: str) -> None:
        print(text, file=self._out, flush=True)


@contextlib.contextmanager
def _own_descriptor(fd: int) -> Iterator[tuple[int, bool]]:
    """``(view, True)``: the terminal ``fd`` reads, opened again non-blocking (a new open file, its flags its own).

    ``(fd, False)`` where it cannot be opened (the channel asks only at a terminal, so
    hardly ever): then each read switches ``fd`` itself, for that read only.
    """
    try:
        view = os.open(os.ttyname(fd), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        yield fd, False
        return
    try:
        yield view, True
    finally:
        os.close(view)


def _read_switched(fd: int) -> bytes:
    """One read of ``fd`` without blocking, its shared mode switched for just that read."""
    blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 4096)
    finally:
        os.set_blocking(fd, blocking)


class _Gone:
    """Set when the question was taken back: its task was cancelled, or its call aborted."""

    def __init__(self, dropped: threading.Event, signal: Any) -> None:
        self.dropped = dropped
        self.signal = signal

    def is_set(self) -> bool:
        """Polled by the reader thread (``AbortSignal.aborted`` is a plain attribute for this)."""
        return self.dropped.is_set() or bool(self.signal.aborted)


def _prompt(key: str, field: AskField) -> str:
    """``Approve the refund [y/n]``, ``Plan (free/pro) [free]``, ``Seats (1 to 50) [1]``,
    ``Toppings (cheese, ham, olives; 1 to 2, separated by commas)``."""
    label = field.description or key
    low, high = field.minimum, field.maximum
    bounds = ""
    if low is not None and high is not None:
        bounds = f"{low:g} to {high:g}"
    elif low is not None:
        bounds = f"at least {low:g}"
    elif high is not None:
        bounds = f"at most {high:g}"
    if field.type == "array":
        picks = ", ".join(filter(None, [bounds, "separated by commas"]))
        label += " (" + ", ".join(map(field.label, field.values or ())) + f"; {picks})"
    elif bounds:
        label += f" ({bounds})"
    if field.values is not None and field.type != "array":
        label += " (" + "/".join(map(field.label, field.values)) + ")"
    elif field.type == "boolean":
        label += " [y/n]"
    if not field.required and not field.has_default:
        label += " (optional)"
    if field.has_default:
        default = field.default_value
        if field.type == "boolean":
            shown = "y" if default else "n"
        elif field.type == "array":
            shown = ", ".join(map(field.label, default))
        else:
            shown = field.label(default)
        label += f" [{shown}]"
    return label


def _parse(text: str, key: str, field: AskField) -> Any:
    """The typed ``text`` as the field's value (``None``: blank, the default or nothing applies)."""
    if not text:
        if field.required and not field.has_default:
            raise ValueError(f"{field.description or key} needs an answer")
        return None
    value: Any = text
    if field.type == "boolean":
        if text.lower() not in YES + NO:
            raise ValueError("answer y or n")
        value = text.lower() in YES
    elif field.type == "integer":
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
    elif field.type == "number":
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
    elif field.type == "array":
        value = [_choice(part.strip(), field) for part in text.split(",") if part.strip()]
    if field.values is not None and field.type != "array":
        value = _choice(text, field)
    return field.check(value, field.description or key)


def _choice(text: str, field: AskField) -> Any:
    """The choice ``text`` names: its value or its label (any case), else ``text`` for the check to refuse."""
    for choice in field.values or ():
        if text == str(choice) or text.lower() in (str(choice).lower(), field.label(choice).lower()):
            return choice
    return text


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def serve_in_thread(start: Any) -> Any:
    """Run ``start()`` (which makes a server on the running loop) on a new loop in a daemon thread.

    Returns what ``start`` returned once it did (its exception if it raised); the
    thread's loop runs until the server's ``serving()`` ends, then closes.
    """
    made: concurrent.futures.Future[Any] = concurrent.futures.Future()

    async def main() -> None:
        try:
            server = start()
        except BaseException as error:
            made.set_exception(error)
            return
        made.set_result(server)
        await server.serving()

    def run() -> None:
        with contextlib.suppress(Exception):  # the server logs its own failures
            asyncio.run(main())

    threading.Thread(target=run, name="fusion-nb http server", daemon=True).start()
    return made.result(timeout=60)
