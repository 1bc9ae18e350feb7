"""The stdio transport's bytes out: whole lines written in order on the event loop (``PipeWriter``).

Why apart from the connection (``pipe``): as h11 keeps ``_writers`` apart from
``_connection``, how a message becomes a line (lone surrogates replaced, NaN as
``null``, a list page's bytes reused) and how lines reach a pipe a client may not
read know nothing of MCP's exchanges.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from pydantic_core import PydanticSerializationError, to_json

from ..engine.lowlevel import current_backend
from .wire import preencoded, response_with

#: bytes waiting for a client that does not read before writers (and the reader) wait
HIGH_WATER = 1 << 20


class PipeWriter:
    """Whole lines written to a descriptor in order, on the event loop.

    The first line of a loop turn goes straight to ``os.write``; lines written later
    in the same turn (the answers of calls that ended together) wait and go out in
    one write as the turn ends: a burst costs the server and the client one system
    call and one wake-up instead of one per line, and a lone answer is not delayed
    (``benchmarks/stdio.py`` measures both). A line written with ``gather=False``
    (the answer of the only call running, with no line read and still unserved:
    nothing else can end in its turn) goes out without arming the turn's end, which
    would cost the loop one more turn. What the pipe does not take waits here and
    ``run`` (the connection's flusher) writes it as the pipe drains. ``write``
    waits while more than ``HIGH_WATER`` bytes wait. A broken pipe (the client
    closed its end) calls ``on_gone`` once; later writes are dropped.
    """

    def __init__(self, fd: int, on_gone: Callable[[], None]) -> None:
        self.fd = fd
        self.gone = False
        self.released = False  # the connection ended: nobody waits for room any more (``drain`` bounds the rest)
        self._on_gone = on_gone
        self._pending = bytearray()
        self.flushed = 0  # bytes that went out after waiting (what a client behind took)
        self._in_turn = False  # a line went out this loop turn: the next ones wait for its end
        self._blocked = False  # the pipe is full: ``run`` writes once it is writable
        self._work = anyio.Event()
        self._room: anyio.Event | None = None
        self._drained: anyio.Event | None = None

    @property
    def waiting(self) -> int:
        """Bytes written but not yet taken by the pipe."""
        return len(self._pending)

    @property
    def backed_up(self) -> bool:
        """Whether the client is behind: more than ``HIGH_WATER`` bytes wait for it."""
        return len(self._pending) > HIGH_WATER

    def write_nowait(self, line: bytes, *, gather: bool = True) -> None:
        """Queue ``line`` (ending in a newline) after every line written before it; never waits.

        ``gather=False``: no other line is expected in this loop turn (see the class).
        """
        if self.gone:
            return
        if self._pending or self._in_turn:
            self._pending += line  # out at the turn's end, or by ``run`` once the pipe drains
            return
        try:
            written = os.write(self.fd, line)
        except BlockingIOError:
            written = 0
        except (BrokenPipeError, ConnectionResetError):
            self._broke()
            return
        if gather:
            self._in_turn = True
            current_backend().call_soon(self._end_turn)
        if written < len(line):
            self._pending += line[written:]
            self._block()

    async def write(self, line: bytes, *, gather: bool = True) -> None:
        """``write_nowait``, then wait while the client is behind."""
        self.write_nowait(line, gather=gather)
        if self._pending:
            await self.wait_for_room()

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until every queued line has been written."""
        with anyio.move_on_after(timeout, shield=True):
            while self._pending and not self.gone:
                if self._drained is None:
                    self._drained = anyio.Event()
                await self._drained.wait()

    async def wait_for_room(self) -> None:
        """Return once no more than ``HIGH_WATER`` bytes wait (at once if the client keeps up; after ``release``)."""
        while self.backed_up and not self.gone and not self.released:
            if self._room is None:
                self._room = anyio.Event()
            await self._room.wait()

    async def run(self) -> None:
        """Write what waits as the pipe takes it, until the connection ends."""
        while not self.gone:
            await self._work.wait()
            self._work = anyio.Event()
            while self._blocked and not self.gone:
                await anyio.wait_writable(self.fd)
                self._blocked = False
                self._flush()

    def release(self) -> None:
        """The connection has ended: writers waiting for room go on (what they queued waits for ``drain``)."""
        self.released = True
        self._wake()

    def _end_turn(self) -> None:
        """The loop turn that wrote a line has ended: what the turn's other lines queued goes out at once."""
        self._in_turn = False
        if self._pending and not self._blocked and not self.gone:
            self._flush()

    def _flush(self) -> None:
        """Write what waits (the pipe is writable or may be); what it does not take waits for ``run``."""
        try:
            written = os.write(self.fd, self._pending)
        except BlockingIOError:
            written = 0
        except (BrokenPipeError, ConnectionResetError):
            self._broke()
            return
        del self._pending[:written]
        self.flushed += written
        if self._pending:
            self._block()
        if not self.backed_up:
            self._wake()
        if not self._pending and self._drained is not None:
            self._drained.set()
            self._drained = None

    def _block(self) -> None:
        self._blocked = True
        self._work.set()

    def _broke(self) -> None:
        if not self.gone:
            self.gone = True
            self._pending.clear()
            self._wake()
            self._work.set()
            if self._drained is not None:
                self._drained.set()
            self._on_gone()

    def _wake(self) -> None:
        if self._room is not None:
            self._room.set()
            self._room = None


def encode_line(message: Mapping[str, Any]) -> bytes:
    """One message as a line of UTF-8 JSON; lone surrogates (UTF-8 cannot carry them) become U+FFFD.

    pydantic-core writes it, as the SDK's own transports do: quicker than ``json.dumps``
    (whose keyword arguments build an encoder per call), and NaN or infinity, which
    JSON has none of, as ``null`` (never a bare ``NaN`` no client can parse).
    """
    try:
        return to_json(message, inf_nan_mode="null") + b"\n"
    except PydanticSerializationError:  # a lone surrogate (or what is not JSON data at all)
        return to_json(without_surrogates(message), inf_nan_mode="null") + b"\n"


def answer_line(method: str, answer: dict[str, Any]) -> bytes:
    """``answer``'s line; a list page's result is written from the bytes it was encoded to once (``pages``)."""
    result = answer.get("result")
    if result is not None and method.endswith("/list"):
        body = preencoded(result, ascii=False)
        if body is not None:
            return response_with(answer["id"], body, ascii=False) + b"\n"
    return encode_line(answer)


def without_surrogates(value: Any) -> Any:
    """``value`` (JSON data) with every lone surrogate in its strings replaced by U+FFFD.

    A walk with a stack of its own, not recursion: a message nests as deep as its
    sender likes (a parser's limit is far above Python's recursion limit).
    """
    copies: list[tuple[Any, Any]] = []
    root = _shell(value, copies)
    while copies:
        source, copy = copies.pop()
        if type(copy) is dict:
            for key, inner in source.items():
                copy[_replaced(key) if isinstance(key, str) else key] = _shell(inner, copies)
        else:
            copy.extend(_shell(inner, copies) for inner in source)
    return root


def _shell(value: Any, copies: list[tuple[Any, Any]]) -> Any:
    """A string made safe, an empty copy of a container (filled later, from ``copies``), anything else as is."""
    if isinstance(value, str):
        return _replaced(value)
    if isinstance(value, dict | list):
        copy: Any = {} if isinstance(value, dict) else []
        copies.append((value, copy))
        return copy
    return value


def _replaced(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
