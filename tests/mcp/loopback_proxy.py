"""``LoopbackForwarder``: a TCP forwarder on 127.0.0.1 in front of a local server, for tests that break connections.

The network faults these tests need (a cut, a half-open connection) happen between a
real client and a real server; a forwarder the test controls is the one place to make
them without touching either. Subclasses say what to do with each connection.
"""

from __future__ import annotations

import anyio
import anyio.abc


class LoopbackForwarder:
    """Listens on a free loopback port (``port`` once serving) and hands each connection to ``forward``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Accept connections until cancelled (use with ``task_group.start``)."""
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener:
            task_status.started()
            await listener.serve(self.forward)

    async def forward(self, client: anyio.abc.SocketStream) -> None:
        """Carry one client connection to ``target_port`` (subclasses decide how)."""
        raise NotImplementedError
