"""The Jupyter server extension: each served notebook's MCP endpoint under the Jupyter server's own URL.

``{base_url}fusion/mcp/{notebook path}`` (the notebook's API path, as in ``{base_url}lab/tree/...``)
forwards to the loopback endpoint ``%fusion serve`` opened in that notebook's kernel. The URL
names the notebook, not the kernel: kernel ids change on every restart and a pasted config must
not, and ``fusion_nb.wiring`` keeps one port and token per notebook, which is how the extension
finds the kernel. Requests are authenticated by the Jupyter server's own auth (its token, a
JupyterHub API token through the hub's identity provider) and authorized as executing in kernels:
whoever passes can already run code there. The client never holds the kernel's bearer token;
the extension adds it. Bodies stream both ways chunk by chunk (SSE is never buffered), and a
request while no kernel serves the notebook is answered 503 in one sentence.

Proxying over the kernel's loopback port keeps the kernel side unchanged (the same uvicorn
server the direct URL reaches); ``benchmarks/http.py --through-jupyter`` measures its cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any

import httpx2 as httpx
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web

from . import wiring

#: what a call gets while no kernel serves the notebook (503)
NOT_SERVING = "the notebook's kernel is not serving; run %fusion serve"
#: headers that stay with one hop (RFC 9110 7.6.1), the Jupyter credential and cookies, and what
#: each hop sets itself; every other header passes both ways (2026-07-28 requests carry Mcp-Method,
#: Mcp-Name and Mcp-Param-* that the kernel reads)
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "authorization",
        "cookie",
        "set-cookie",
        "origin",
        "x-xsrftoken",
        "server",
        "date",
        "www-authenticate",
    }
)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "fusion_nb.jupyter_server_extension"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    web_app = serverapp.web_app
    pattern = url_path_join(web_app.settings["base_url"], r"fusion/mcp/(.+)")
    client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None), trust_env=False)
    web_app.settings["fusion_nb_client"] = client
    web_app.add_handlers(".*$", [(pattern, McpProxyHandler)])
    serverapp.log.info("fusion-nb: served notebooks' MCP endpoints at %s", pattern)


def _request_id(body: bytes) -> str | int | None:
    """The id of the JSON-RPC request in ``body``, or None (a notification, a response, not JSON-RPC)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and isinstance(message.get("method"), str):
        request_id = message.get("id")
        if isinstance(request_id, str | int) and not isinstance(request_id, bool):
            return request_id
    return None


class McpProxyHandler(JupyterHandler):
    """Forward one MCP request to the notebook's kernel and stream its answer back."""

    auth_resource = "kernels"
    _task: asyncio.Future[None] | None = None

    def check_xsrf_cookie(self) -> None:
        """MCP clients send the token in a header, never a cookie; a cookie-only browser request is refused."""
        if not self.request.headers.get("Authorization") and not self.get_argument("token", ""):
            super().check_xsrf_cookie()

    @web.authenticated
    @authorized("execute")
    async def post(self, path: str) -> None:
        await self._forward(path)

    @web.authenticated
    @authorized("execute")
    async def get(self, path: str) -> None:
        await self._forward(path)

    @web.authenticated
    @authorized("execute")
    async def delete(self, path: str) -> None:
        await self._forward(path)

    def on_connection_close(self) -> None:
        if self._task is not None:
            self._task.cancel()  # the client went away: so does the request to the kernel

    async def _forward(self, path: str) -> None:
        self._task = asyncio.ensure_future(self._proxy(path))
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def _refuse(self, sentence: str) -> None:
        """503 with ``sentence``: as a JSON-RPC error to a JSON-RPC request (the SDK clients show its
        message; a plain-text body they replace with "Server returned an error response"), else as text."""
        self.set_status(503)
        request_id = _request_id(self.request.body)
        if request_id is None:
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.finish(sentence + "\n")
        else:
            self.set_header("Content-Type", "application/json")
            error = {"code": -32000, "message": sentence}
            self.finish(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}))

    async def _proxy(self, path: str) -> None:
        root = os.path.abspath(self.settings["server_root_dir"])
        notebook = os.path.abspath(os.path.join(root, *path.strip("/").split("/")))
        if os.path.commonpath([root, notebook]) != root:
            # an encoded ``..`` would name a notebook this server did not open (records are per user)
            raise web.HTTPError(404)
        kept = wiring.load(notebook)
        if kept is None or not kept.serving:
            return self._refuse(NOT_SERVING)
        headers = [(name, value) for name, value in self.request.headers.get_all() if name.lower() not in _HOP]
        if kept.token:
            headers.append(("Authorization", f"Bearer {kept.token}"))
        client: httpx.AsyncClient = self.settings["fusion_nb_client"]
        request = client.build_request(
            self.request.method or "POST",
            f"http://127.0.0.1:{kept.port}/mcp",
            headers=headers,
            content=self.request.body or None,
        )
        try:
            upstream = await client.send(request, stream=True)
        except httpx.TransportError:
            return self._refuse(NOT_SERVING)
        try:
            self.set_status(upstream.status_code)
            self.clear_header("Content-Type")
            for name, value in upstream.headers.multi_items():
                if name.lower() not in _HOP:
                    self.add_header(name, value)
            if upstream.headers.get("Content-Type", "").startswith("text/event-stream"):
                # each event goes out as it comes (no Nagle wait for the next write)
                self.request.connection.stream.set_nodelay(True)  # type: ignore[union-attr]
                async for chunk in upstream.aiter_raw():
                    self.write(chunk)
                    await self.flush()
            else:  # one JSON answer: one write with its length, not a chunked trickle
                self.write(b"".join([chunk async for chunk in upstream.aiter_raw()]))
        except httpx.TransportError:
            pass  # the kernel went away mid-answer: end this one; the next call gets the sentence
        finally:
            await upstream.aclose()
        if not self._finished:
            self.finish()
