"""Quiet, bounded HTTP exchanges: what happens when a client goes away or stops sending.

``BoundedRequests`` is ASGI middleware wrapped around the SDK's Streamable HTTP app.
It watches only the request body (after that every message passes through, so the
SDK still sees a disconnect and cancels a 2026 call whose POST was aborted):

* the client disconnects before its body is complete: the exchange is dropped with
  one INFO log line, instead of the SDK's ``ClientDisconnect`` traceback at ERROR;
* the body is not complete within ``body_timeout`` seconds (a client that promised
  a body and stalls, or trickles it): ``408 Request Timeout`` and one INFO line, and
  the connection is closed (the rest of that body is never read). On asyncio one periodic sweep per loop checks the
  deadlines (see ``_Watch``), so the 408 comes at most a quarter of the timeout
  (and at most a second) after it.

Both end the exchange by cancelling it, which the SDK unwinds without logging.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
        self._watch: _Watch | None = None  # the body deadlines of requests on the current asyncio loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one exchange; a stalled or abandoned body ends it (408, or nothing) with one log line."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange: _Exchange
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): anyio's way
            exchange = _AnyioExchange(receive, send, self.body_timeout)
        else:
            watch = self._watch
            if watch is None or watch.loop is not loop:
                watch = self._watch = _Watch(loop, self.body_timeout)
            exchange = _AsyncioExchange(receive, send, watch)
        await exchange.run(self.app, scope)
        if exchange.ending == "stalled":
            method, path = scope["method"], scope["path"]
            log.info("%s %s: request body not complete after %gs; 408", method, path, self.body_timeout)
            if not exchange.started:
                await _respond(send, 408, _TIMEOUT_BODY, "application/json", close=True)
        elif exchange.ending == "gone":
            log.info("%s %s: client disconnected before sending its whole request", scope["method"], scope["path"])


class _Exchange:
    """One request's receive/send, watched until its body is complete; ``run`` ends it early if need be."""

    __slots__ = ("_receive", "_send", "body_done", "ending", "started", "timeout")

    def __init__(self, receive: Receive, send: Send, timeout: float) -> None:
        self._receive = receive
        self._send = send
        self.timeout = timeout
        self.body_done = False
        self.started = False
        self.ending: str | None = None

    async def run(self, app: ASGIApp, scope: Scope) -> None:
        """Run ``app`` for this exchange; returns quietly when the exchange was ended early."""
        raise NotImplementedError

    async def receive(self) -> Message:
        """The app's ``receive``: watched until the body is complete."""
        if self.body_done:
            return await self._receive()
        message = await self._receive_body()
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

    async def _receive_body(self) -> Message:
        return await self._receive()

    def _body_complete(self) -> None:
        self.body_done = True

    async def _end(self, ending: str) -> Message:
        raise NotImplementedError


class _Watch:
    """The body deadlines of one asyncio loop's exchanges, checked by one periodic timer.

    A timer per request (``call_at`` then ``cancel``) costs more than the rest of this
    middleware together; here a request only enters a dict when it starts and leaves
    it when its body is complete. The timer runs while some body is incomplete and
    ticks every ``tick`` (a quarter of the timeout, at most a second). A request
    added during tick ``n`` is overdue from tick ``n + periods + 1`` on, so a stalled
    body is ended no earlier than ``timeout`` seconds after its request started and
    at most one tick later.
    """

    __slots__ = ("generation", "loop", "periods", "tick", "timer", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.loop = loop
        self.tick = min(timeout / 4, 1.0)
        self.periods = math.ceil(timeout / self.tick - 1e-9)
        self.generation = 0
        self.waiting: dict[_AsyncioExchange, int] = {}
        self.timer: asyncio.TimerHandle | None = None

    def add(self, exchange: _AsyncioExchange) -> None:
        """Watch ``exchange`` until it leaves (body complete or exchange ended)."""
        self.waiting[exchange] = self.generation
        if self.timer is None:
            self.timer = self.loop.call_later(self.tick, self._sweep)

    def _sweep(self) -> None:
        self.generation += 1
        due = self.generation - self.periods - 1
        overdue = [exchange for exchange, added in self.waiting.items() if added <= due]
        for exchange in overdue:
            del self.waiting[exchange]
            exchange.stalled()
        self.timer = self.loop.call_later(self.tick, self._sweep) if self.waiting else None


class _AsyncioExchange(_Exchange):
    """On asyncio (uvicorn): watched by the loop's ``_Watch``, ended by a native cancel of the request's task.

    Cheaper than a cancel scope per request: a stalled exchange cancels the task
    that runs it, which ``run`` then takes back (``uncancel``).
    """

    __slots__ = ("task", "watch")

    def __init__(self, receive: Receive, send: Send, watch: _Watch) -> None:
        self._receive = receive
        self._send = send
        self.body_done = False
        self.started = False
        self.ending: str | None = None
        self.task = asyncio.current_task()
        self.watch = watch
        watch.add(self)

    async def run(self, app: ASGIApp, scope: Scope) -> None:
        """Run ``app``; a cancellation this exchange caused ends it quietly, any other propagates."""
        try:
            await app(scope, self.receive, self.send)
        except asyncio.CancelledError:
            if self.ending is None or self.task is None:
                raise
            self.task.uncancel()
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

    def _body_complete(self) -> None:
        self.body_done = True
        self.watch.waiting.pop(self, None)

    def stalled(self) -> None:
        """The watch found the body incomplete past its deadline: end the exchange (408)."""
        if not self.body_done and self.ending is None and self.task is not None:
            self.body_done = True
            self.ending = "stalled"
            self.task.cancel()

    async def _end(self, ending: str) -> Message:
        """Cancel the exchange from inside the app's ``receive()`` (the body is read in the request's task)."""
        self.ending = ending
        self._body_complete()
        if self.task is not None and asyncio.current_task() is self.task:
            self.task.cancel()
            await asyncio.sleep(0)
        return {"type": "http.disconnect"}  # read from another task: it sees the disconnect, as without us


class _AnyioExchange(_Exchange):
    """On other event loops: a cancel scope around the exchange, a deadline on each body read."""

    def __init__(self, receive: Receive, send: Send, timeout: float) -> None:
        super().__init__(receive, send, timeout)
        self.deadline = anyio.current_time() + timeout
        self.scope = anyio.CancelScope()

    async def run(self, app: ASGIApp, scope: Scope) -> None:
        """Run ``app`` inside this exchange's cancel scope."""
        with self.scope:
            await app(scope, self.receive, self.send)

    async def _receive_body(self) -> Message:
        with anyio.move_on_after(self.deadline - anyio.current_time()) as wait:
            message = await self._receive()
        if wait.cancelled_caught:
            return await self._end("stalled")
        return message

    async def _end(self, ending: str) -> Message:
        """Cancel the exchange from inside the app's ``receive()``."""
        self.ending = ending
        self.scope.cancel()
        await anyio.lowlevel.checkpoint()
        return {"type": "http.disconnect"}


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
