"""The HTTP service around an app: ``/healthz``, SIGTERM drain, uvicorn on one socket.

``ServiceApp`` wraps the Streamable HTTP ASGI app from ``fusion_nb.mcp.http_app``:

* ``GET /healthz`` answers ``200 ok`` (``503 draining`` once a drain began), with no
  authentication and no details, for load balancers and readiness probes. (The MCP
  app serves its own ``/healthz`` too; this one answers first, and says when draining.)
* Once draining, the worker takes no new connection (refused at connect, so a balancer
  retries even a POST on another worker: nothing was sent) and closes each connection
  after its response. A request already on its way on an open connection is served, not
  refused: a balancer may not retry a POST it has sent (it could have run), so a ``503``
  there would reach the client. For the same reason idle keep-alive connections are
  closed only once quiet, not as the drain begins (``drain``).

``drain`` is what SIGTERM (and Ctrl-C) start: refuse new work, give the calls in
flight ``drain_timeout`` seconds to finish, cancel the rest (``Fusion.aclose``: their
handlers' cleanup runs and their clients get ``CANCELLED``), let those answers leave,
then stop uvicorn. The process then exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio

from ..engine import App

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

HEALTH_PATH = "/healthz"


class ServiceApp:
    """ASGI middleware: health endpoint (503 while draining) and a count of requests in flight."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.draining = False
        self.in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def state(self) -> Any:
        """The wrapped app's Starlette state (``token``, ``server``)."""
        return self.inner.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        if scope["path"] == HEALTH_PATH:
            await _plain(send, 503 if self.draining else 200, b"draining\n" if self.draining else b"ok\n")
            return
        counted = scope["method"] != "GET"  # a 2025 GET stream lives as long as its session
        if counted:
            self.in_flight += 1
            self._idle.clear()
        try:
            await self.inner(scope, receive, self._closing_when_draining(send))
        finally:
            if counted:
                self.in_flight -= 1
                if self.in_flight == 0:
                    self._idle.set()

    def _closing_when_draining(self, send: Send) -> Send:
        """``send``, adding ``Connection: close`` to a response that starts once draining.

        A balancer then does not keep the connection for its next request, which the
        draining worker would close under it ("upstream prematurely closed").
        """

        async def sending(message: MutableMapping[str, Any]) -> None:
            if self.draining and message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
            await send(message)

        return sending

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until no counted request is in flight; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True


async def _plain(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class HttpService:
    """One worker: uvicorn serving ``ServiceApp`` on ``sock`` in this loop, stopped by a drain.

    ``limits`` (a ``ConnectionLimits``; ``None``: the defaults) bound its connections.
    """

    def __init__(
        self,
        app: App,
        asgi: Any,
        sock: Any,
        *,
        drain_timeout: float,
        log: Callable[[str], None],
        limits: Any = None,
    ) -> None:
        self.app = app
        self.service = ServiceApp(asgi)
        self.sock = sock
        self.drain_timeout = drain_timeout
        self.log = log
        from ..mcp.uvicorn_server import streams_ender  # (``asgi`` is an http_app: the SDK is imported already)

        self.uvicorn = _announcing_server(
            self.service,
            before_drain=streams_ender(asgi),
            timeout_graceful_shutdown=2,
            access_log=False,
            limits=limits,
        )
        self._drain_task: asyncio.Task[None] | None = None

    async def serve(self, on_ready: Callable[[], None] | None = None) -> None:
        """Serve until drained; installs SIGTERM/SIGINT handlers for the duration.

        ``on_ready`` runs once uvicorn has started on the socket, with the drain handlers
        already installed: whoever waits for the line it prints (a supervisor, a test, a
        person) may send SIGTERM at once and get a drain, never a killed process.
        """
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.begin_drain, signum)
        try:
            self.uvicorn.on_started = on_ready
            await self.uvicorn.serve(sockets=[self.sock])
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            if self._drain_task is not None and not self._drain_task.done():
                self._drain_task.cancel()

    def begin_drain(self, signum: int | None = None) -> None:
        """Start draining (idempotent); a second signal stops at once."""
        if self._drain_task is not None:
            self.log("second signal: stopping now")
            self.uvicorn.force_exit = True
            self.uvicorn.should_exit = True
            return
        name = signal.Signals(signum).name if signum is not None else "request"
        self.service.draining = True
        self.uvicorn.stop_accepting()  # before the line below: whoever reads it finds the port closed
        self.log(f"{name}: draining ({len(self.app.active_calls)} call(s) in flight, up to {self.drain_timeout:g} s)")
        self._drain_task = asyncio.get_running_loop().create_task(self.drain(), name="fusion-nb drain")

    async def drain(self) -> None:
        """Take no new connection, let calls finish up to ``drain_timeout``, cancel the rest, stop.

        Within the same deadline it also waits until the idle keep-alive connections are
        quiet (a balancer may still send one request on each: served, then closed) and
        only then closes them: closed under a request nginx had just sent, that call
        would fail with a 502 (``uvicorn_server.InLoopServer.idle_quiet``).
        """
        self.service.draining = True
        self.uvicorn.stop_accepting()  # (idempotent; begin_drain did it already when a signal started this)
        with anyio.move_on_after(self.drain_timeout):
            while True:
                await self.app.wait_calls()  # the engine's event as its last call settles
                pause = self.uvicorn.quiet_in()  # a keep-alive request there may start another call
                if not pause and not self.app.active_calls:
                    break
                await anyio.sleep(pause)
        left = len(self.app.active_calls)
        if left:
            self.log(f"cancelling {left} call(s) still running after {self.drain_timeout:g} s")
            # handlers' cleanup runs, bounded by the app's grace; the client reads why
            await self.app.aclose(f"the server is shutting down (its {self.drain_timeout:g} s drain ended)")
        await self.service.wait_idle(5.0)  # the answers (CANCELLED included) leave before the sockets close
        self.uvicorn.close_idle()
        self.uvicorn.should_exit = True


def _announcing_server(asgi: Any, **config: Any) -> Any:
    """An in-loop uvicorn server (no signal capture) that calls its ``on_started`` once it serves."""
    from ..mcp.uvicorn_server import InLoopServer, in_loop_server  # imports the SDK: only when serving HTTP

    class AnnouncingServer(InLoopServer):
        """Calls ``on_started()`` when start-up (lifespan, then the socket) has succeeded."""

        on_started: Callable[[], None] | None = None

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and self.on_started is not None:
                self.on_started()

    plain = in_loop_server(asgi, **config)  # the package's defaults for an in-loop server
    return AnnouncingServer(plain.config, plain.before_drain, plain.connections)


def log_to_stderr(message: str) -> None:
    """The service's progress lines: one per event, on stderr, prefixed like the CLI's.

    A closed stderr (the terminal or the supervisor went away) must never stop a
    drain half-way, so a failed write is dropped. The line and its newline go in one
    write: workers share the supervisor's stderr, and with ``PYTHONUNBUFFERED`` (as
    containers often set it) ``print`` writes the newline apart, so two workers'
    lines could run together.
    """
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"fusion-nb: {message}\n")
        sys.stderr.flush()
