"""``%fusion serve``: the kernel's tools over Streamable HTTP, on the kernel's own loop.

uvicorn runs as a task of the kernel loop with its signal capture disabled (the
interrupt button keeps working). Loopback only by default, behind a generated
bearer token and DNS-rebinding checks. A cell that blocks in sync code stalls the
server too: the loop is shared.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ..engine import App
from ..mcp import client_config
from ..mcp.http import HttpApp
from ..mcp.options import HttpOptions
from ..mcp.uvicorn_server import in_loop_server, listening_socket


class KernelServer:
    """``%fusion serve``'s server: uvicorn as a task of the running loop, its URL, token and client configs."""

    def __init__(self, app: App, options: HttpOptions | None = None, *, port: int = 0, kept: bool = False) -> None:
        """Bind now (``port`` 0: a free one) and serve ``app`` with ``options`` on the running loop.

        ``options`` default to ``HttpOptions()``: loopback, a generated token. ``kept``: the
        port and token are kept for the notebook (``fusion_nb.wiring``) and survive a restart.
        """
        options = options or HttpOptions()
        host = options.host
        self.asgi = HttpApp(app, options)
        self.token: str | None = self.asgi.token
        self.kept = kept
        self.port_fixed = port != 0 or kept
        self.token_fixed = options.token is not None or kept
        self._socket = listening_socket(host, port)
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        self.url = client_config.mcp_url(host, self.port)
        self._uvicorn = in_loop_server(self.asgi)
        # created in the serving cell's context: server output lands in that cell
        self._task = asyncio.get_running_loop().create_task(
            self._uvicorn.serve(sockets=[self._socket]), name="fusion-nb http server"
        )

    @property
    def running(self) -> bool:
        return not self._task.done()

    async def serving(self) -> None:
        """Wait until the server has stopped (a terminal's server thread runs its loop until then)."""
        await self._task

    def stop_soon(self) -> None:
        self._uvicorn.should_exit = True

    async def stop(self) -> None:
        self.stop_soon()
        await self._task

    @contextlib.asynccontextmanager
    async def client(self, mode: str = "auto", **options: Any) -> AsyncIterator[Any]:
        """An SDK ``mcp.Client`` connected to this server with its token (``mode="legacy"``: 2025 era)."""
        from ..mcp import connect

        async with connect(self.url, self.token, mode=mode, **options) as client:
            yield client

    def snippets(self, *, hide_token: bool = False) -> str:
        """Ready-to-paste client configuration (absolute commands; see ``fusion_nb.mcp.client_config``).

        It says what a restart changes: the port unless ``--port`` fixed it, the token
        unless ``--token`` or ``FUSION_NB_TOKEN`` did. ``hide_token`` prints ``TOKEN``
        in its place, for a notebook that will be saved or shared.
        """
        if self.kept:
            note = (
                "Port and token are kept for this notebook (in Jupyter's runtime directory): serving it again, "
                "after a kernel restart too, reuses them; %fusion serve --new-token rotates the token."
            )
            hidden = "fusion_nb.notebook.server().token holds it" if hide_token else None
            return client_config.http_configs(self.url, self.token, note=note, hidden=hidden)
        note = client_config.restart_note(
            port_fixed=self.port_fixed,
            token_fixed=self.token_fixed or self.token is None,
            how=f"%fusion serve --port {self.port} --token <secret> (or {client_config.TOKEN_ENV} "
            "in the environment Jupyter starts from)",
        )
        hidden = "fusion_nb.notebook.server().token holds it" if hide_token else None
        return client_config.http_configs(self.url, self.token, note=note, hidden=hidden)

    def __repr__(self) -> str:
        return f"<KernelServer {self.url} {'running' if self.running else 'stopped'}>"
