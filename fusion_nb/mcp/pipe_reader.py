"""The stdio transport's bytes in: lines of at most a limit, read on the event loop (``LineReader``).

Why apart from the connection (``pipe``): as h11 keeps ``_readers`` apart from
``_connection``, what a line is (its bound, an oversized one's id, JSON a strict
parser refuses) knows nothing of MCP, and the protocol knows nothing of descriptors.
"""

from __future__ import annotations

import json
import os
import re
import select
import stat
import sys
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
from mcp_types import RequestId

from ..engine.lowlevel import ReadWatch, current_backend

#: the longest line read as a message (bytes, newline excluded); a longer one is skipped and refused
MAX_LINE_BYTES = 8 * 1024 * 1024
_CHUNK = 1 << 16
#: how much of an oversized line's start and end is kept to find its id
_EDGE = 512
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A JSON escape of a lone surrogate, which strings read from the line then carry (``without_surrogates``)."""
_ID = rb'(-?[0-9]{1,20}|"(?:[^"\\]|\\.){0,200}")'
_ID_AT_START = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
_ID_AT_END = re.compile(rb',\s*"id"\s*:\s*' + _ID + rb"\s*\}\s*$")


class Oversized:
    """A line longer than the limit, skipped as it streamed in: its length and its edges (to find its id)."""

    __slots__ = ("head", "size", "tail")

    def __init__(self, head: bytes) -> None:
        self.head = head
        self.tail = b""
        self.size = 0

    def request_id(self) -> RequestId | None:
        """The id the line's first or last bytes name as the message's own, if any."""
        for pattern, edge in ((_ID_AT_START, self.head), (_ID_AT_END, self.tail)):
            found = pattern.search(edge)
            if found is not None:
                try:
                    value = json.loads(found.group(1))
                except ValueError:
                    continue
                return value if isinstance(value, str | int) else None
        return None


def watchable(fd: int) -> bool:
    """Whether the event loop can wait for ``fd`` (a pipe, a socket, a terminal).

    What it cannot (epoll refuses them: a regular file, ``/dev/null`` and other
    devices that are no terminal, as a service manager or ``< /dev/null`` hands
    over) never makes a read or a write wait: those are done as they are.
    """
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


class LineReader:
    """Lines of at most ``limit`` bytes from a descriptor, read on the event loop.

    A pipe or terminal is read non-blocking (waiting for readiness, cancellable at
    any time); what the loop cannot watch (a regular file, ``/dev/null``) is read
    as it is (it never blocks), with a checkpoint per chunk. A line longer than
    ``limit`` comes back as ``Oversized`` once its end arrives, having held at most
    ``limit`` bytes plus one chunk.

    ``next`` waits for a line; ``take`` and ``read_nowait`` are the same steps
    without waiting, for a reader the loop calls when the descriptor is readable
    (``call_when_readable``).
    """

    def __init__(self, fd: int, limit: int = MAX_LINE_BYTES, *, watch: bool = True) -> None:
        self.fd = fd
        self.watch = watch  # keep the descriptor watched between reads (``close`` stops it)
        self.limit = limit
        self._buffer = bytearray()
        self._scanned = 0
        self._eof = False
        self._oversized: Oversized | None = None
        self._never_waits = not watchable(fd)
        self._watch: ReadWatch | None = None
        self._drained = False  # the last read took less than asked: the pipe was empty then

    @property
    def buffered(self) -> int:
        """Bytes read and held (at most ``limit`` plus one chunk)."""
        return len(self._buffer)

    @property
    def ended(self) -> bool:
        """Whether the input has ended and every line of it has been taken."""
        return self._eof and not self._buffer and self._oversized is None

    async def next(self) -> bytes | Oversized | None:
        """The next line (newline removed), an ``Oversized`` one, or ``None`` at end of input."""
        while (line := self.take()) is None:
            if self._eof:
                return None
            await self.fill()
        return line

    def take(self) -> bytes | Oversized | None:
        """The next line read whole (at end of input, what is left), or ``None`` until more is read."""
        buffer = self._buffer
        end = buffer.find(b"\n", self._scanned)
        if end >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            self._scanned = 0
            if self._oversized is None and end <= self.limit:
                return line
            return self._finish_oversized(line)
        if self._oversized is not None:
            self._skip(buffer)
        elif len(buffer) > self.limit:
            self._oversized = Oversized(bytes(buffer[:_EDGE]))
            self._skip(buffer)
        else:
            self._scanned = len(buffer)
        if self._eof:
            if self._oversized is not None:
                return self._finish_oversized(b"")
            if buffer:
                line = bytes(buffer)
                buffer.clear()
                return line
        return None

    async def fill(self) -> None:
        """Read once more (at least one byte, or the end of input), waiting for the descriptor."""
        if self._drained and not self._never_waits:
            await self._readable()  # a read now would most likely only say "nothing yet": wait for the peer first
        elif self.read_nowait():  # a regular file never blocks; a pipe just read in full may hold more
            await anyio.lowlevel.checkpoint()  # a peer writing faster than it is read takes no more than its turn
            return
        while not self.read_nowait():
            await self._readable()

    def read_nowait(self) -> bool:
        """Read what the descriptor holds now; ``False`` when it holds nothing yet (the readiness was stale)."""
        try:
            chunk = os.read(self.fd, _CHUNK)
        except BlockingIOError:
            return False
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        self._drained = len(chunk) < _CHUNK
        if chunk:
            self._buffer += chunk
        else:
            self._eof = True
        return True

    def hung_up(self) -> bool:
        """Whether the peer has closed its end of a pipe (or terminal), lines it wrote before maybe still unread.

        Asked without reading (``poll`` reports the hang-up whatever the pipe holds),
        for a reader that is not reading: one that waits for a client behind.
        """
        if self._never_waits:
            return False
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        return any(events & select.POLLHUP for _, events in poller.poll(0))

    def call_when_readable(self, callback: Callable[[], None]) -> bool:
        """Have the loop run ``callback()`` while the descriptor is readable, until ``pause`` (see ``ReadWatch``).

        ``False`` where it cannot (trio, a regular file, an unwatched reader): ``fill`` instead.
        """
        if self._never_waits or not self.watch:
            return False
        return self._watched().call_when_readable(callback)

    def pause(self) -> None:
        """Stop the ``call_when_readable`` callback."""
        if self._watch is not None:
            self._watch.pause()

    async def _readable(self) -> None:
        """Wait until the descriptor is readable (the loop keeps watching it from the first wait to ``close``)."""
        if not self.watch:
            await anyio.wait_readable(self.fd)
            return
        await self._watched().wait()

    def _watched(self) -> ReadWatch:
        if self._watch is None:
            self._watch = current_backend().watch_readable(self.fd)
        return self._watch

    def close(self) -> None:
        """Stop watching the descriptor (it stays open: it is not the reader's to close)."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def _skip(self, buffer: bytearray) -> None:
        assert self._oversized is not None
        self._oversized.size += len(buffer)
        self._oversized.tail = (self._oversized.tail + bytes(buffer))[-_EDGE:]
        buffer.clear()
        self._scanned = 0

    def _finish_oversized(self, rest: bytes) -> Oversized:
        oversized = self._oversized or Oversized(rest[:_EDGE])
        self._oversized = None
        oversized.size += len(rest)
        oversized.tail = (oversized.tail + rest)[-_EDGE:]
        return oversized


def loads_leniently(line: bytes) -> Any:
    """What pydantic-core refused, as json.loads reads it (a BOM, a lone surrogate escape, deep nesting), with
    U+FFFD for bytes that are not UTF-8; what it cannot read raises with json.loads' reason."""
    try:
        return json.loads(line)
    except UnicodeDecodeError:
        return json.loads(line.decode("utf-8", "replace"))


def unreadable(exc: ValueError | RecursionError) -> str:
    """Why a line cannot be read, for its sender: JSON it is not, or JSON beyond what Python reads."""
    if isinstance(exc, RecursionError):
        return "the line nests deeper than this server reads"
    if "integer string conversion" in str(exc):  # (CPython's limit on the digits of an integer it parses)
        limit = sys.get_int_max_str_digits()
        return f"the line holds an integer of more than {limit} digits, longer than this server reads"
    return f"the line is not JSON ({_short(exc)})"


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 120 else text[:119] + "…"
