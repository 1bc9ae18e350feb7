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
        exchange = _Exchange(receive, send, anyio.current_time() + self.body_timeout)
        with anyio.CancelScope() as exchange.scope:
            await self.app(scope, exchange.receive, exchange.send)
        if exchange.ending == "stalled":
            method, path = scope["method"], scope["path"]
            log.info("%s %s: request body not complete after %gs; 408", method, path, self.body_timeout)
            if not exchange.started:
                await _respond(send, 408, _TIMEOUT_BODY, "application/json")
        elif exchange.ending == "gone":
            log.info("%s %s: client disconnected before sending its whole request", scope["method"], scope["path"])


class _Exchange:
    """One request's receive/send, watched until its body is complete."""

    __slots__ = ("_receive", "_send", "body_done", "deadline", "ending", "scope", "started")

    def __init__(self, receive: Receive, send: Send, deadline: float) -> None:
        self._receive = receive
        self._send = send
        self.deadline = deadline
        self.body_done = False
        self.started = False
        self.ending: str | None = None
        self.scope: anyio.CancelScope | None = None

    async def receive(self) -> Message:
        """The app's ``receive``: bounded by the deadline until the body is complete."""
        if self.body_done:
            return await self._receive()
        with anyio.move_on_after(self.deadline - anyio.current_time()) as wait:
            message = await self._receive()
        if wait.cancelled_caught:
            return await self._end("stalled")
        if message["type"] == "http.disconnect":
            return await self._end("gone")
        if message["type"] == "http.request" and not message.get("more_body", False):
            self.body_done = True
        return message

    async def send(self, message: Message) -> None:
        """The app's ``send``: notes whether the response has started."""
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)

    async def _end(self, ending: str) -> Message:
        """Cancel the exchange from inside the app's ``receive()`` (the body is read in the request's task).

        Were ``receive()`` called from another task, the cancellation would not reach
        that caller: it then sees the disconnect, as without this middleware.
        """
        self.ending = ending
        assert self.scope is not None
        self.scope.cancel()
        await anyio.lowlevel.checkpoint()
        return {"type": "http.disconnect"}


async def _respond(send: Send, status: int, body: bytes, content_type: str) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
