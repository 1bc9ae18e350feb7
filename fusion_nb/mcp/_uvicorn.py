"""Connection limits on uvicorn's HTTP/1.1 protocols: the one module that knows their internals.

uvicorn bounds a request only once it reaches the app. Before that a stranger with no
token could, on the protocol level (each tried against ``fusion-nb serve``;
``tests/reliability/test_reliability_connections.py`` repeats the attacks and prints
what they did):

* send header lines without end: httptools buffers every byte, so one connection grows
  the worker's memory as fast as it sends; h11 stops at its ``max_incomplete_event_size``;
* open a connection and send nothing, or trickle header bytes: uvicorn arms its
  keep-alive timer only after a response, and any byte disarms it, so such a connection
  is held forever; enough of them exhaust the process's descriptors and the service is down;
* then asyncio's accept loop logs a traceback for every failed ``accept()`` (it retries
  up to 100 times per loop tick): megabytes of log a second.

``guarded_protocol`` returns a subclass of uvicorn's httptools or h11 protocol that
enforces ``ConnectionLimits`` before anything is dispatched:

* the request line and headers together are capped in bytes and the headers in number
  (``431``, one log line, and the connection closed after a lingering read, ``LINGER_SECONDS``:
  a client still sending a 1 MB header reads the refusal, not a reset);
* a connection gets ``header_timeout`` seconds from the moment it is free (opened, or
  its last response sent) until its next request's headers are complete; a silent one
  is closed, one that sent part of a request gets ``408`` and is closed (trickling one
  byte at a time does not restart the clock);
* at most ``max_connections`` connections are open per server (derived from the
  process's descriptor limit by default), so descriptors are never exhausted by
  connections. When they are all open a new one evicts a silent connection (no request
  head completed yet, oldest first, from the address holding the most; failing that an
  idle keep-alive one), unless its own address already holds its share
  (``per_address``); with nothing to evict it gets ``503`` with ``Retry-After`` and is
  closed at once. Before eviction one stranger re-opening silent sockets kept every new
  client out (1 of 45 fresh connections served in 30 s);
* ``quiet_logs`` turns asyncio's accept tracebacks, and uvicorn's warning per invalid
  head, into one line per 10 s.

The hooks used here (the parser callbacks ``on_url``, ``on_header``,
``on_headers_complete``, ``on_response_complete``, ``send_400_response``, the h11
protocol's ``conn``) are uvicorn's, not a public API: ``tests/mcp/test_uvicorn_contract.py``
pins each of them and the behaviour built on them, so an upgrade that moves one fails
there first.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .limits import OncePerInterval, RateLimitedLog

log = logging.getLogger("fusion_nb.http")

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools is a fusion-nb dependency
    HttpToolsProtocol = None  # type: ignore[assignment,misc]


@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may hold before its request reaches the app, and how many may be open.

    The defaults admit every real client (browsers send under 8 KiB of headers in a
    few dozen fields; nginx's default buffers are 8 KiB lines, 32 KiB in all) with room
    to spare, and give a slow network ten seconds to deliver a request's headers.
    """

    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    header_timeout: float = 10.0
    #: ``None``: the descriptor limit (``RLIMIT_NOFILE``) less 128 for everything else
    max_connections: int | None = None
    #: what one peer address keeps once every connection is open (``None``: half the cap):
    #: a new connection from an address holding this many is refused instead of evicting
    per_address: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_header_bytes", "max_headers", "header_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        for name in ("max_connections", "per_address"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more, got {getattr(self, name)!r}")

    def connection_cap(self) -> int:
        """``max_connections``, or what the process's descriptor limit leaves room for."""
        if self.max_connections is not None:
            return self.max_connections
        try:
            import resource
        except ImportError:  # pragma: no cover - not Unix: no descriptor limit to read
            return 1_000
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return 10_000
        return max(16, min(10_000, soft - 128))

    def address_share(self, cap: int) -> int:
        """``per_address``, or half of ``cap``: what one address keeps when the server is full."""
        return self.per_address if self.per_address is not None else max(1, cap // 2)


@dataclass
class Connections:
    """What the connections of one server share: the limits, who is open, the refusal log.

    How a draining server lets a balancer go elsewhere without failing a call: ``drain``,
    then ``close_idle`` once ``quiet``. An idle keep-alive connection is not closed when
    the drain begins: a balancer may already be sending a request on it (nginx has not
    yet read the close), and a POST it has sent it does not retry elsewhere (it could
    have run), so the client would get a 502. Kept, such a connection carries at most one
    more request, answered and then closed; once none has carried one for a moment the
    rest are closed.
    """

    limits: ConnectionLimits
    cap: int
    open: set[_Guard] = field(default_factory=set)
    #: how many of ``open`` each peer address holds
    held: Counter[str] = field(default_factory=Counter)
    closing: bool = False
    refusals: RateLimitedLog = field(default_factory=lambda: RateLimitedLog(log))
    oversized: RateLimitedLog = field(default_factory=lambda: RateLimitedLog(log))
    evictions: RateLimitedLog = field(default_factory=lambda: RateLimitedLog(log))
    #: the loop time the last request began to arrive on any connection
    last_request: float = 0.0

    def drain(self) -> None:
        """From now on no connection outlives its current response; none is opened (503)."""
        self.closing = True

    def quiet(self, now: float, seconds: float) -> bool:
        """Whether the idle connections may close now: none is open, or none carried a request for ``seconds``."""
        return not any(connection.idle for connection in self.open) or now - self.last_request >= seconds

    def close_idle(self) -> None:
        """``drain``, and close the idle connections now (busy ones close after their response)."""
        self.drain()
        for connection in list(self.open):
            connection.close_if_idle()

    def admit(self, connection: _Guard) -> bool:
        """Count ``connection`` as open, evicting another if the cap is reached; False: refuse it.

        Why evict: a silent connection holds its slot for the whole header timeout, so a
        stranger re-opening them fills a global cap for good. Once full, the address
        holding the most loses its oldest silent connection (no head completed yet;
        failing that an idle keep-alive one), so one address cannot keep the others
        out; an address already holding its share gets nothing more.
        """
        address = connection.address
        if len(self.open) >= self.cap:
            share = self.limits.address_share(self.cap)
            victim = None if self.held[address] >= share else self._victim()
            if victim is None:
                return False
            self.evictions.log(logging.WARNING, "connection limit (%d) reached: evicting silent connections", self.cap)
            self.release(victim)
            victim.evict()
        self.open.add(connection)
        self.held[address] += 1
        return True

    def release(self, connection: _Guard) -> None:
        """No longer count ``connection`` (idempotent)."""
        if connection in self.open:
            self.open.discard(connection)
            self.held[connection.address] -= 1
            if self.held[connection.address] <= 0:
                del self.held[connection.address]

    def _victim(self) -> _Guard | None:
        """The connection to evict: silent before idle, the heaviest address first, then the oldest."""
        best: tuple[int, int, float] | None = None
        victim = None
        for connection in self.open:
            tier = connection.evictable
            if tier is None:
                continue
            key = (tier, -self.held[connection.address], connection.opened)
            if best is None or key < best:
                best, victim = key, connection
        return victim


_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}
#: a connection refused mid-request is still read (and what comes dropped) for this long, or this
#: many bytes, so that a client still sending (a 1 MB header) reads the refusal, not a reset
#: (nginx's lingering close)
LINGER_SECONDS = 2.0
LINGER_BYTES = 1 << 20


def _response(status: int, text: str, retry_after: bool = False) -> bytes:
    body = text.encode("ascii") + b"\n"
    lines = [
        b"HTTP/1.1 %d %s" % (status, _REASONS[status]),
        b"content-type: text/plain; charset=utf-8",
        b"content-length: %d" % len(body),
        b"connection: close",
        *([b"retry-after: 1"] if retry_after else []),
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class _Guard:
    """The limits, mixed in front of a uvicorn protocol class (see ``guarded_protocol``).

    State per connection: ``_pending`` requests whose headers are complete and whose
    response is not (while it is 0 the connection is reading headers or idle and the
    deadline runs), ``_raw`` bytes received since it became free, and ``_refusal`` once
    a limit was crossed mid-parse (uvicorn then calls ``send_400_response``, which sends
    that refusal instead).
    """

    board: Connections
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending = 0
        self._raw = 0
        self._head_bytes = 0
        self._head_fields = 0
        self._deadline: asyncio.TimerHandle | None = None
        self._refusal: bytes | None = None
        self._linger_left: int | None = None  # bytes still read and dropped after a refusal
        self._heads = 0
        self.address = ""
        self.opened = 0.0

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        board = self.board
        if board.closing:
            self._refuse(_response(503, "Shutting down; retry on another worker.", retry_after=True))
            return
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        self.opened = self.loop.time()
        if not board.admit(self):
            board.refusals.log(logging.WARNING, "connection limit (%d) reached: new connections get 503", board.cap)
            self._refuse(_response(503, "Too many connections; retry later.", retry_after=True))
            return
        self._free()

    def eof_received(self) -> None:
        if self._linger_left is not None:
            self.transport.close()  # the client has sent all: close now
            return
        super().eof_received()  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self.board.release(self)
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        if self._linger_left is not None:  # refused: the rest of the request is dropped
            self._linger_left -= len(data)
            if self._linger_left < 0:
                self.transport.close()
            return
        reading_head = self._pending == 0
        if reading_head:
            if self._raw == 0:
                self.board.last_request = self.loop.time()
            self._raw += len(data)
        super().data_received(data)  # type: ignore[misc]
        if reading_head and self._pending == 0 and self._raw > self.board.limits.max_header_bytes:
            self._too_large()

    # -- uvicorn's hooks -----------------------------------------------------------------
    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        self._pending = max(0, self._pending - 1)
        if self._pending == 0 and not self.transport.is_closing():
            if self.board.closing:
                self.transport.close()
            else:
                self._free()

    def send_400_response(self, msg: str) -> None:
        if self._refusal is None:
            super().send_400_response(msg)  # type: ignore[misc]
        else:
            self._refuse_head(self._refusal)

    @property
    def idle(self) -> bool:
        """Open with nothing of a request received: a keep-alive connection between requests."""
        return self._pending == 0 and self._raw == 0 and not self.transport.is_closing()

    @property
    def evictable(self) -> int | None:
        """0: silent (no request head completed yet); 1: idle between requests; None: busy or closing."""
        if self._pending or self.transport.is_closing():
            return None
        if self._heads == 0:
            return 0
        return 1 if self._raw == 0 else None

    def evict(self) -> None:
        """Close to make room for a new connection (``Connections.admit``); nothing was asked, nothing is answered."""
        self._disarm()
        self.transport.close()

    def close_if_idle(self) -> None:
        """Close now if nothing of a request has arrived (see ``Connections.close_idle``).

        One whose next request is half received is closed after answering it instead:
        closing it now would lose a request the client already sent.
        """
        if self.idle:
            self._disarm()
            self.transport.close()

    # -- the limits ------------------------------------------------------------------------
    def _free(self) -> None:
        """The connection has nothing in flight: its next request's headers are due within the timeout."""
        self._raw = self._head_bytes = self._head_fields = 0
        self._disarm()
        self._deadline = self.loop.call_later(self.board.limits.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def head_complete(self) -> None:
        self._pending += 1
        self._heads += 1
        self._disarm()

    def count_head(self, nbytes: int, fields: int = 0) -> bool:
        """Count part of a request head; False (and the refusal noted) once it is over a limit."""
        self._head_bytes += nbytes
        self._head_fields += fields
        limits = self.board.limits
        if self._head_bytes > limits.max_header_bytes:
            self._refusal = _response(431, f"Request headers exceed {limits.max_header_bytes} bytes.")
        elif self._head_fields > limits.max_headers:
            self._refusal = _response(431, f"Request has more than {limits.max_headers} header fields.")
        return self._refusal is None

    def _too_large(self) -> None:
        if not self.transport.is_closing():
            limit = self.board.limits.max_header_bytes
            self._refuse_head(_response(431, f"Request headers exceed {limit} bytes."))

    def _refuse_head(self, response: bytes) -> None:
        """Refuse a request head over the limits: one log line, and a lingering close (``LINGER_SECONDS``)."""
        if self._linger_left is not None:  # (refused already: the parser may say so again)
            return
        said = response.rpartition(b"\r\n\r\n")[2].decode().strip()
        self.board.oversized.log(logging.WARNING, "refused a request from %s: %s (431)", self.address, said)
        self._disarm()
        if self.transport.is_closing():
            return
        self.transport.write(response)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._linger_left = LINGER_BYTES
        self._deadline = self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _expired(self) -> None:
        self._deadline = None
        if self._pending or self.transport.is_closing():
            return
        if self._raw == 0:
            self.transport.close()  # idle: nothing to answer
            return
        timeout = self.board.limits.header_timeout
        self._refuse(_response(408, f"Request headers not received within {timeout:g} s."))

    def _refuse(self, response: bytes) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(response)
            self.transport.close()


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop httptools at once (uvicorn answers via ``send_400_response``)."""


def _httptools_guard() -> type[asyncio.Protocol]:
    class GuardedHttpTools(_Guard, HttpToolsProtocol):  # type: ignore[misc,valid-type]
        """uvicorn's httptools protocol with ``ConnectionLimits`` counted in its parser callbacks."""

        def on_url(self, url: bytes) -> None:
            if not self.count_head(len(url)):
                raise _HeadTooLarge
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            if not self.count_head(len(name) + len(value) + 4, 1):
                raise _HeadTooLarge
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self.head_complete()
            super().on_headers_complete()

    return GuardedHttpTools


class _CountedConnection(h11.Connection):
    """An h11 server connection that refuses a head over the limits and reports each complete head.

    h11's ``max_incomplete_event_size`` bounds a head still arriving; one that arrives
    complete in one read is measured here, before uvicorn dispatches it.
    """

    def __init__(self, protocol: _Guard, limits: ConnectionLimits) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
        self._protocol = protocol

    def next_event(self) -> Any:
        """h11's next event; a request head over a limit raises ``RemoteProtocolError`` (uvicorn: 400 path)."""
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            if exc.error_status_hint == 431:
                self._protocol.count_head(self._protocol.board.limits.max_header_bytes + 1)
            raise
        if isinstance(event, h11.Request):
            size = len(event.target) + sum(len(name) + len(value) + 4 for name, value in event.headers.raw_items())
            if not self._protocol.count_head(size, len(event.headers)):  # a whole head in one read
                raise h11.RemoteProtocolError("request head over the limits", error_status_hint=431)
            self._protocol.head_complete()
        return event


def _h11_guard() -> type[asyncio.Protocol]:
    class GuardedH11(_Guard, H11Protocol):
        """uvicorn's h11 protocol on a ``_CountedConnection`` (h11 itself caps the head's bytes)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.conn = _CountedConnection(self, self.board.limits)

    return GuardedH11


def guarded_protocol(http: str, limits: ConnectionLimits | Connections) -> type[asyncio.Protocol]:
    """uvicorn's protocol class for ``http`` (``"auto"``, ``"httptools"``, ``"h11"``) with ``limits`` enforced.

    A fresh class per server: its connections share one ``Connections`` (made from
    ``limits`` unless given).
    """
    if http not in ("auto", "httptools", "h11"):
        raise ValueError(f"http must be 'auto', 'httptools' or 'h11' (the protocols fusion-nb guards), got {http!r}")
    base = _h11_guard() if http == "h11" or HttpToolsProtocol is None else _httptools_guard()
    board = limits if isinstance(limits, Connections) else Connections(limits, limits.connection_cap())
    return type(base.__name__, (base,), {"board": board, "__doc__": base.__doc__})


_ACCEPT_FAILED = "socket.accept() out of system resource"
_INVALID_REQUEST = "Invalid HTTP request received."  # uvicorn's WARNING for each unparsable (or refused) head


def quiet_logs(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Rate-limit what a stranger can make a server log: failed ``accept()`` and invalid request heads.

    asyncio logs a traceback for every ``accept()`` that fails for want of descriptors
    (up to 100 per loop tick); here that is one line per 10 s, and so is uvicorn's
    warning for an invalid head. Every other exception context goes to the handler
    that was there before. Returns what undoes both (a handler someone installed
    since is left alone).
    """
    previous = loop.get_exception_handler()
    limiter = RateLimitedLog(log)

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == _ACCEPT_FAILED:
            limiter.log(logging.WARNING, "cannot accept a connection: %s", context.get("exception"))
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    invalid = OncePerInterval(_INVALID_REQUEST)
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addFilter(invalid)

    def restore() -> None:
        uvicorn_log.removeFilter(invalid)
        if loop.get_exception_handler() is handler:
            loop.set_exception_handler(previous)

    return restore
