"""``%fusion serve``: the kernel's tools over Streamable HTTP, on the kernel's own loop.

uvicorn runs as a task of the kernel loop with its signal capture disabled (the
interrupt button keeps working). Loopback only by default, behind a generated
bearer token and DNS-rebinding checks. A cell that blocks in sync code stalls the
server too: the loop is shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from ..engine import App
from ..mcp.http import INSPECTOR_VERSION, http_app
from ..mcp.uvicorn_server import in_loop_server, listening_socket


class KernelServer:
    def __init__(self, app: App, *, host: str = "127.0.0.1", port: int = 0, auth: bool = True) -> None:
        self.asgi = http_app(app, host=host, auth=auth)
        self.token: str | None = self.asgi.state.token
        self._socket = listening_socket(host, port)
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        shown_host = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown_host}:{self.port}/mcp"
        self._uvicorn = in_loop_server(self.asgi)
        # created in the serving cell's context: server output lands in that cell
        self._task = asyncio.get_running_loop().create_task(
            self._uvicorn.serve(sockets=[self._socket]), name="fusion-nb http server"
        )

    @property
    def running(self) -> bool:
        return not self._task.done()

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

    def snippets(self) -> str:
        """Ready-to-paste client configuration."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        vscode = {
            "servers": {"fusion-nb": {"type": "http", "url": self.url, **({"headers": headers} if headers else {})}}
        }
        # `fusion-nb connect` (the stdio bridge of fusion_nb.cli) reaches this server without Node
        bridge = ["connect", self.url] + (["--header", f"Authorization: Bearer {self.token}"] if self.token else [])
        claude = {"mcpServers": {"fusion-nb": {"command": "fusion-nb", "args": bridge}}}
        # Pinned: an unpinned npx resolves to Inspector 0.15 on Node 20, which has no --header.
        inspector = f"npx -y @modelcontextprotocol/inspector@{INSPECTOR_VERSION} --cli {self.url}"
        inspector += " --transport http --method tools/list"
        if self.token:
            inspector += f' --header "Authorization: Bearer {self.token}"'
        return "\n".join(
            [
                f"MCP endpoint: {self.url}",
                f"Bearer token: {self.token}"
                if self.token
                else "No authentication (--no-auth): loopback development only.",
                "",
                "Claude Desktop (claude_desktop_config.json):",
                json.dumps(claude, indent=2),
                "",
                "VS Code (.vscode/mcp.json):",
                json.dumps(vscode, indent=2),
                "",
                "MCP Inspector CLI:",
                inspector,
            ]
        )

    def __repr__(self) -> str:
        return f"<KernelServer {self.url} {'running' if self.running else 'stopped'}>"
