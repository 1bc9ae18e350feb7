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
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

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
    web_app.settings["fusion_nb_upstream"] = Upstream()
    web_app.settings["fusion_nb_records"] = Records()
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


def _unload_jupyter_server_extension(serverapp: Any) -> None:
    serverapp.web_app.settings["fusion_nb_upstream"].close()


class Records:
    """The notebooks' serving records, read again only when their file changed: one ``stat`` per request.

    ``fusion_nb.wiring.save`` replaces the file (a new inode), so the stamp changes on every serve
    and stop; reading and parsing it on each request cost ~10% of the extension's time per call.
    """

    def __init__(self) -> None:
        self._known: dict[str, tuple[Path, tuple[int, int, int] | None, wiring.Wiring | None]] = {}

    def get(self, notebook: str) -> wiring.Wiring | None:
        """The record kept for ``notebook`` (an absolute path), or None."""
        known = self._known.get(notebook)
        path = known[0] if known else wiring.record_path(notebook)
        try:
            status = path.stat()
        except OSError:
            self._known[notebook] = (path, None, None)
            return None
        stamp = (status.st_ino, status.st_mtime_ns, status.st_size)
        if known is None or known[1] != stamp:
            if len(self._known) > 4096:
                self._known.clear()  # bounded: any authenticated user can name any path
            known = self._known[notebook] = (path, stamp, wiring.load(notebook))
        return known[2]


class UpstreamError(Exception):
    """The kernel's endpoint closed, refused or garbled the exchange."""


class Upstream:
    """Kept-alive HTTP/1.1 connections to the kernels' loopback endpoints, one exchange at a time each.

    Measured against httpx2 (``benchmarks/http.py --through-jupyter``), a general client's layers
    (anyio streams, h11, two socket writes per request) cost more than the whole direct call;
    the kernel's endpoint is our own uvicorn, so a request is one write and its answer is read
    by its ``Content-Length`` or chunk by chunk (SSE, relayed as each chunk arrives).
    """

    #: a response head larger than this is garbage, not an MCP answer
    LIMIT = 1 << 16

    def __init__(self) -> None:
        self._idle: dict[int, list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = {}

    #: kept connections per kernel port (as many as agents calling at once); more close after their exchange
    KEEP = 64

    async def _connect(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
        idle = self._idle.get(port, [])
        while idle:
            reader, writer = idle.pop()
            if not reader.at_eof() and not writer.is_closing():
                return reader, writer, True
            writer.close()  # uvicorn closed it after its keep-alive timeout
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=self.LIMIT)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reader, writer, False

    @contextlib.asynccontextmanager
    async def exchange(
        self, port: int, head: bytes, body: bytes
    ) -> AsyncIterator[tuple[int, list[tuple[str, str]], AsyncIterator[bytes]]]:
        """Send one request; yield its status, headers and body chunks. Any failure: ``UpstreamError``."""
        for attempt in (0, 1):
            try:
                reader, writer, reused = await self._connect(port)
            except OSError as failed:
                raise UpstreamError(str(failed)) from None
            try:
                writer.write(head + body)
                status_line = await reader.readuntil(b"\r\n")
                break
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as failed:
                writer.close()
                # a kept connection the kernel closed as we sent (its keep-alive timeout) saw nothing: resend once
                if not reused or attempt:
                    raise UpstreamError(str(failed)) from None
        done = False
        try:
            try:
                status = int(status_line.split(b" ", 2)[1])
                fields = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            except (OSError, ValueError, IndexError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as bad:
                raise UpstreamError(str(bad)) from None
            headers = [(name.strip(), value.strip()) for name, _, value in (f.partition(":") for f in fields if f)]
            framing = {name.lower(): value.lower() for name, value in headers}
            complete: list[bool] = []  # set once the whole body was read: the connection can serve again
            if "chunked" in framing.get("transfer-encoding", ""):
                chunks = self._chunks(reader, complete)
            elif "content-length" in framing:
                chunks = self._exactly(reader, int(framing["content-length"]), complete)
            else:
                chunks = self._to_eof(reader)
            yield status, headers, chunks
            done = bool(complete) and "close" not in framing.get("connection", "") and not writer.is_closing()
        finally:
            kept = self._idle.setdefault(port, [])
            if done and len(kept) < self.KEEP:
                kept.append((reader, writer))
            else:
                writer.close()

    def close(self) -> None:
        """Close every kept connection (the server is stopping)."""
        for idle in self._idle.values():
            for _, writer in idle:
                writer.close()
        self._idle.clear()

    @staticmethod
    async def _exactly(reader: asyncio.StreamReader, length: int, complete: list[bool]) -> AsyncIterator[bytes]:
        try:
            if length:
                yield await reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError) as failed:
            raise UpstreamError(str(failed)) from None
        complete.append(True)

    @staticmethod
    async def _chunks(reader: asyncio.StreamReader, complete: list[bool]) -> AsyncIterator[bytes]:
        try:
            while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16):
                yield (await reader.readexactly(size + 2))[:-2]
            await reader.readuntil(b"\r\n")  # uvicorn sends no trailers: the last chunk's empty line
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as failed:
            raise UpstreamError(str(failed)) from None
        complete.append(True)

    @staticmethod
    async def _to_eof(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
        try:
            while chunk := await reader.read(1 << 16):
                yield chunk
        except OSError as failed:
            raise UpstreamError(str(failed)) from None


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

    def set_secure_cookie(
        self, name: str, value: str | bytes, expires_days: float | None = 30, version: int | None = None, **kwargs: Any
    ) -> None:
        """No login cookie: an MCP client sends its token on every request (signing one cost ~5% of a call)."""

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
        kept = self.settings["fusion_nb_records"].get(notebook)
        if kept is None or not kept.live:  # (a kernel killed outright left its record "serving")
            return self._refuse(NOT_SERVING)
        headers = [(name, value) for name, value in self.request.headers.get_all() if name.lower() not in _HOP]
        if kept.token:
            headers.append(("Authorization", f"Bearer {kept.token}"))
        body = self.request.body or b""
        lines = [f"{self.request.method} /mcp HTTP/1.1", f"Host: 127.0.0.1:{kept.port}", f"Content-Length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in headers]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        upstream: Upstream = self.settings["fusion_nb_upstream"]
        started = False
        try:
            async with upstream.exchange(kept.port, head, body) as (status, answer_headers, chunks):
                started = True
                self.set_status(status)
                self.clear_header("Content-Type")
                streaming = False
                for name, value in answer_headers:
                    if name.lower() not in _HOP:
                        self.add_header(name, value)
                        streaming |= name.lower() == "content-type" and value.startswith("text/event-stream")
                if streaming:
                    # each event goes out as it comes (no Nagle wait for the next write)
                    self.request.connection.stream.set_nodelay(True)  # type: ignore[union-attr]
                    async for chunk in chunks:
                        self.write(chunk)
                        await self.flush()
                else:  # one JSON answer: one write with its length, not a chunked trickle
                    self.write(b"".join([chunk async for chunk in chunks]))
        except UpstreamError:
            if not started:
                return self._refuse(NOT_SERVING)
            # the kernel went away mid-answer: end this one; the next call gets the sentence
        if not self._finished:
            self.finish()
