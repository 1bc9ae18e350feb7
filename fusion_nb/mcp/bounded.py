"""Quiet, bounded HTTP exchanges: what happens when a client goes away or stops sending.

``BoundedRequests`` is ASGI middleware wrapped around the SDK's Streamable HTTP app.
It watches only the request body (after that every message passes through, so the
SDK still sees a disconnect and cancels a 2026 call whose POST was aborted):

* the client disconnects before its body is complete: the exchange is dropped with
  one INFO log line, instead of the SDK's ``ClientDisconnect`` traceback at ERROR;
* the body is not complete within ``body_timeout`` seconds (a client that promised
  a body and stalls, or trickles it): ``408 Request Timeout`` and one INFO line, and
  the connection is closed (the rest of that body is never read). One periodic sweep
  per loop checks the deadlines (see ``_Watch``), so the 408 comes at most a quarter
  of the timeout (and at most a second) after it.

Both end the exchange by cancelling it, which the SDK unwinds without logging.
"""

from __future__ import annotations

import json
import logging
import math

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..engine.lowlevel import Backend, Cancellable, Interruptible, current_backend

log = logging.getLogger("fusion_nb.http")

_TIMEOUT_BODY = json.dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Request body not received in time."}}
).encode()


class BoundedRequests:
    """ASGI middleware: a deadline on request bodies, and quiet early disconnects."""

    def __init__(self, app: ASGIApp, *, body_timeout: float = 30.0) -> None:
        if not body_timeout > 0:
            raise ValueError(f"body_timeout must be a positive number of seconds, got {body_timeout!r}")
        self.app = app
        self.body_timeout = body_timeout
        self._watch: _Watch | None = None  # the body deadlines of requests on the current loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one exchange; a stalled or abandoned body ends it (408, or nothing) with one log line."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        backend = current_backend()
        watch = self._watch
        if watch is None or watch.loop is not backend.loop_token():
            watch = self._watch = _Watch(backend, self.body_timeout)
        exchange = _Exchange(receive, send, watch, backend.interruptible())
        await exchange.run(self.app, scope)
        if exchange.ending == "stalled":
            method, path = scope["method"], scope["path"]
            log.info("%s %s: request body not complete after %gs; 408", method, path, self.body_timeout)
            if not exchange.started:
                await _respond(send, 408, _TIMEOUT_BODY, "application/json", close=True)
        elif exchange.ending == "gone":
            log.info("%s %s: client disconnected before sending its whole request", scope["method"], scope["path"])


class _Watch:
    """The body deadlines of one loop's exchanges, checked by one periodic timer.

    A timer (or a cancel scope with a deadline) per request costs more than the rest
    of this middleware together (``benchmarks/http.py`` measures the endpoint it
    wraps); here a request only enters a dict when it starts and leaves it when its
    body is complete. The timer runs while some body is incomplete and ticks every
    ``tick`` (a quarter of the timeout, at most a second). A request added during
    tick ``n`` is overdue from tick ``n + periods + 1`` on, so a stalled body is
    ended no earlier than ``timeout`` seconds after its request started and at most
    one tick later.
    """

    __slots__ = ("backend", "generation", "loop", "periods", "tick", "timer", "waiting")

    def __init__(self, backend: Backend, timeout: float) -> None:
        self.backend = backend
        self.loop = backend.loop_token()
        self.tick = min(timeout / 4, 1.0)
        self.periods = math.ceil(timeout / self.tick - 1e-9)
        self.generation = 0
        self.waiting: dict[_Exchange, int] = {}
        self.timer: Cancellable | None = None

    def add(self, exchange: _Exchange) -> None:
        """Watch ``exchange`` until it leaves (body complete or exchange ended)."""
        self.waiting[exchange] = self.generation
        if self.timer is None:
            self.timer = self.backend.call_later(self.tick, self._sweep)

    def _sweep(self) -> None:
        self.generation += 1
        due = self.generation - self.periods - 1
        overdue = [exchange for exchange, added in self.waiting.items() if added <= due]
        for exchange in overdue:
            del self.waiting[exchange]
            exchange.stalled()
        self.timer = self.backend.call_later(self.tick, self._sweep) if self.waiting else None


class _Exchange:
    """One request's receive/send, watched until its body is complete; ended early by cancelling its run.

    The run is inside the backend's ``Interruptible``: a stalled or abandoned exchange
    is cancelled, and the cancellation it caused is taken back as the block exits.
    """

    __slots__ = ("_receive", "_send", "body_done", "cut", "ending", "started", "watch")

    def __init__(self, receive: Receive, send: Send, watch: _Watch, cut: Interruptible) -> None:
        self._receive = receive
        self._send = send
        self.body_done = False
        self.started = False
        self.ending: str | None = None
        self.cut = cut
        self.watch = watch
        watch.add(self)

    async def run(self, app: ASGIApp, scope: Scope) -> None:
        """Run ``app``; a cancellation this exchange caused ends it quietly, any other propagates."""
        try:
            with self.cut:
                await app(scope, self.receive, self.send)
        finally:
            if not self.body_done:
                self._body_complete()

    async def receive(self) -> Message:
        """The app's ``receive``: watched until the body is complete."""
        message = await self._receive()
        if not self.body_done:
            if message["type"] == "http.disconnect":
                return await self._end("gone")
            if message["type"] == "http.request" and not message.get("more_body", False):
                self._body_complete()
        return message

    async def send(self, message: Message) -> None:
        """The app's ``send``: notes whether the response has started."""
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)

    def _body_complete(self) -> None:
        self.body_done = True
        self.watch.waiting.pop(self, None)

    def stalled(self) -> None:
        """The watch found the body incomplete past its deadline: end the exchange (408)."""
        if not self.body_done and self.ending is None:
            self.body_done = True
            self.ending = "stalled"
            self.cut.cancel()

    async def _end(self, ending: str) -> Message:
        """End the exchange from inside the app's ``receive()`` (the body is read in the request's task)."""
        self.ending = ending
        self._body_complete()
        await self.cut.cancel_here()
        return {"type": "http.disconnect"}  # read from another task: it sees the disconnect, as without us


async def _respond(send: Send, status: int, body: bytes, content_type: str, *, close: bool = False) -> None:
    """A complete small response; ``close``: the connection ends after it (uvicorn honours ``connection: close``).

    A 408 closes: the rest of the stalled body may still arrive, and a client that
    keeps trickling it must not keep the connection.
    """
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
