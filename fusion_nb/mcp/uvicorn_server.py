"""Running the HTTP app inside an already-running asyncio loop (a kernel, a test).

Plain ``uvicorn.Server.serve()`` installs its own SIGINT handler, which would steal
the kernel's interrupt button; this subclass leaves signals alone.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn


class InLoopServer(uvicorn.Server):
    """A ``uvicorn.Server`` that does not capture signals; stop it with ``should_exit = True``."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def listening_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A bound, listening socket (``port=0``: a free one); clients may connect at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def in_loop_server(asgi: Any, **config: Any) -> InLoopServer:
    """An ``InLoopServer`` for ``asgi``; run it with ``await server.serve(sockets=[sock])``."""
    config.setdefault("log_level", "warning")
    config.setdefault("lifespan", "on")
    return InLoopServer(uvicorn.Config(asgi, **config))
