"""Running the HTTP app inside an already-running asyncio loop (a kernel, a test).

Plain ``uvicorn.Server.serve()`` installs its own SIGINT handler, which would steal
the kernel's interrupt button; this subclass leaves signals alone.

The listening socket is made here (so the port is known before the server task
runs), which makes it this module's job to get TCP right: asyncio turns on
``TCP_NODELAY`` only for sockets whose protocol is ``IPPROTO_TCP``, and a socket
created as plain ``SOCK_STREAM`` reports protocol 0. Without ``TCP_NODELAY`` every
small response waits for the client's delayed ACK (~40 ms per call on Linux).

Every server made here enforces ``ConnectionLimits`` (``_uvicorn.py``): capped request
heads, a deadline on reading them, idle connections closed, a connection cap, and
asyncio's accept errors logged once per 10 s: a stranger without a token can neither
grow a worker's memory nor hold its descriptors.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterator

import uvicorn
from starlette.types import ASGIApp

from ._uvicorn import ConnectionLimits, Connections, guarded_protocol, quiet_logs

__all__ = ["DRAIN_SECONDS", "ConnectionLimits", "InLoopServer", "in_loop_server", "listening_socket", "streams_ender"]


#: how long no kept connection may have carried a request before a drain closes the idle ones
QUIET_SECONDS = 0.5


class InLoopServer(uvicorn.Server):
    """A ``uvicorn.Server`` that does not capture signals; stop it with ``should_exit = True``.

    ``before_drain`` runs when it starts stopping, before uvicorn waits for the requests in
    flight: ``http_app`` ends its long-lived ``GET`` streams there, which have nothing to
    finish and would otherwise hold the stop for the whole drain.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        before_drain: Callable[[], None] | None = None,
        connections: Connections | None = None,
    ) -> None:
        super().__init__(config)
        self.before_drain = before_drain
        self.connections = connections
        self._restore_exception_handler: Callable[[], None] | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Leave the host's signal handlers alone (the kernel's interrupt button keeps working)."""
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's start-up, with the loop's accept errors logged once per 10 s (restored at shutdown)."""
        self._restore_exception_handler = quiet_logs(asyncio.get_running_loop())
        await super().startup(sockets=sockets)

    def stop_accepting(self) -> None:
        """Take no new connection and let none outlive its response: a drain has begun.

        Behind a balancer this is what keeps a drain from refusing calls: its next request
        finds the port closed (connection refused), which nginx may retry on another
        worker even for a POST, because nothing was sent; a ``503`` to a POST it may not
        retry (that request could have run). The listening socket closes in this process
        only; other workers sharing it keep accepting. Idle keep-alive connections stay
        open (see ``_uvicorn.Connections``): ``close_idle`` closes them once ``idle_quiet``.
        """
        for server in getattr(self, "servers", ()):  # set by uvicorn's startup
            server.close()
        if self.connections is not None:
            self.connections.drain()

    def idle_quiet(self) -> bool:
        """Whether the idle connections kept by a drain may close now (``QUIET_SECONDS`` without a request)."""
        return self.quiet_in() == 0

    def quiet_in(self) -> float:
        """Seconds until ``idle_quiet`` (0: now), unless a request comes first: a drain sleeps that long."""
        if self.connections is None:
            return 0.0
        now = asyncio.get_running_loop().time()
        if self.connections.quiet(now, QUIET_SECONDS):
            return 0.0
        return max(self.connections.last_request + QUIET_SECONDS - now, 0.0)

    def close_idle(self) -> None:
        """Close the idle keep-alive connections now (after ``stop_accepting``, once ``idle_quiet``)."""
        if self.connections is not None:
            self.connections.close_idle()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop: first ``before_drain``, then uvicorn's drain (``DRAIN_SECONDS``) and lifespan end."""
        if self.before_drain is not None:
            self.before_drain()
        try:
            await super().shutdown(sockets)
        finally:
            if self._restore_exception_handler is not None:
                self._restore_exception_handler()
                self._restore_exception_handler = None


def listening_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A bound, listening TCP socket (``port=0``: a free one); clients may connect at once.

    Created as ``IPPROTO_TCP`` and with ``TCP_NODELAY`` set, so every accepted
    connection answers without Nagle's delay (accepted sockets inherit both).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


DRAIN_SECONDS = 5.0
"""How long a stopping server lets requests in flight finish before it cancels them.

Without a bound, one call that never ends (a 2025-era call runs on after its client
disconnects, as that era's spec asks) would hold ``%fusion serve``'s stop forever.
"""


def in_loop_server(
    asgi: ASGIApp,
    before_drain: Callable[[], None] | None = None,
    *,
    limits: ConnectionLimits | None = None,
    http: str = "auto",
    **config: object,
) -> InLoopServer:
    """An ``InLoopServer`` for ``asgi``; run it with ``await server.serve(sockets=[sock])``.

    Its connections obey ``limits`` (default ``ConnectionLimits()``); ``http`` picks
    uvicorn's parser (``"auto"``, ``"httptools"``, ``"h11"``), guarded either way.
    WebSocket upgrades are off: nothing here speaks them, and an upgraded connection
    would leave the limits' accounting.

    Stopping it (``should_exit = True``) drains: ``before_drain`` runs (for an ``http_app``:
    its ``GET`` streams end), requests in flight get ``DRAIN_SECONDS`` to finish, then they
    are cancelled (their cleanup runs).

    uvicorn's ``http="auto"`` parses with httptools (a fusion-nb dependency): the
    pure-Python h11 parser is slower per request (``benchmarks/http.py --http h11`` measures it).
    """
    config.setdefault("log_level", "warning")
    config.setdefault("lifespan", "on")
    config.setdefault("timeout_graceful_shutdown", DRAIN_SECONDS)
    limits = limits or ConnectionLimits()
    connections = Connections(limits, limits.connection_cap())
    config["http"] = guarded_protocol(http, connections)
    config.setdefault("ws", "none")
    uvicorn_config = uvicorn.Config(asgi, **config)  # type: ignore[arg-type]
    return InLoopServer(uvicorn_config, before_drain or streams_ender(asgi), connections)


def streams_ender(asgi: object) -> Callable[[], None] | None:
    """What ends an ``http_app``'s long-lived ``GET`` streams (``None`` for any other app)."""
    from .http import HttpApp  # (an http_app imported it already; any other app has no such streams)

    endpoint = asgi.endpoint if isinstance(asgi, HttpApp) else None
    return endpoint.end_streams if endpoint is not None else None
