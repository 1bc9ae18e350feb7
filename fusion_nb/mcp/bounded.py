"""Quiet, bounded HTTP exchanges: what happens when a client goes away or stops sending.

``BoundedRequests`` is ASGI middleware wrapped around the SDK's Streamable HTTP app.
It watches only the request body (after that every message passes through, so the
SDK still sees a disconnect and cancels a 2026 call whose POST was aborted):

* the client disconnects before its body is complete: the exchange is dropped with
  one INFO log line, instead of the SDK's ``ClientDisconnect`` traceback at ERROR;
* the body is not complete within ``body_timeout`` seconds (a client that promised
  a body and stalls, or trickles it): ``408 Request Timeout`` and one INFO line, and
  the connection is free again.

Both end the exchange by cancelling it, which the SDK unwinds without logging.
``GET /healthz`` is answered here too (200, no auth, no details) for load balancers
and probes.
"""

from __future__ import annotations

import asyncio
import json
import logging

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("fusion_nb.http")

HEALTH_PATH = "/healthz"

_TIMEOUT_BODY = json.dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Request body not received in time."}}
).encode()


class BoundedRequests:
    """ASGI middleware: a deadline on request bodies, quiet early disconnects, and ``GET /healthz``."""

    def __init__(self, app: ASGIApp, *, body_timeout: float = 30.0) -> None:
        if not body_timeout > 0:
            raise ValueError(f"body_timeout must be a positive number of seconds, got {body_timeout!r}")
        self.app = app
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one exchange; a stalled or abandoned body ends it (408, or nothing) with one log line."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == HEALTH_PATH and scope["method"] in ("GET", "HEAD"):
            await _respond(send, 200, b"ok", "text/plain")
            return
        exchange: _Exchange
        if _on_asyncio():
            exchange = _AsyncioExchange(receive, send, self.body_timeout)
        else:
            exchange = _AnyioExchange(receive, send, self.body_timeout)
        await exchange.run(self.app, scope)
        if exchange.ending == "stalled":
            method, path = scope["method"], scope["path"]
            log.info("%s %s: request body not complete after %gs; 408", method, path, self.body_timeout)
            if not exchange.started:
                await _respond(send, 408, _TIMEOUT_BODY, "application/json")
        elif exchange.ending == "gone":
            log.info("%s %s: client disconnected before sending its whole request", scope["method"], scope["path"])


class _Exchange:
    """One request's receive/send, watched until its body is complete; ``run`` ends it early if need be."""

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


class _AsyncioExchange(_Exchange):
    """On asyncio (uvicorn): one timer per exchange and a native cancel of the request's task.

    Cheaper than a cancel scope per request (a few µs instead of ~20): the deadline is a
    ``call_at`` handle dropped once the body is complete, and ending the exchange
    cancels the task that runs it, which ``run`` then takes back (``uncancel``).
    """

    def __init__(self, receive: Receive, send: Send, timeout: float) -> None:
        super().__init__(receive, send, timeout)
        self.task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        self.timer: asyncio.TimerHandle | None = loop.call_at(loop.time() + timeout, self._stalled)

    async def run(self, app: ASGIApp, scope: Scope) -> None:
        """Run ``app``; a cancellation this exchange caused ends it quietly, any other propagates."""
        try:
            await app(scope, self.receive, self.send)
        except asyncio.CancelledError:
            if self.ending is None or self.task is None:
                raise
            self.task.uncancel()
        finally:
            self._body_complete()

    def _body_complete(self) -> None:
        self.body_done = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _stalled(self) -> None:
        self.timer = None
        if not self.body_done and self.ending is None and self.task is not None:
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


def _on_asyncio() -> bool:
    """Whether this task runs on an asyncio loop (uvicorn's), without asking sniffio."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _respond(send: Send, status: int, body: bytes, content_type: str) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
