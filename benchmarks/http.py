"""MCP over real HTTP on loopback: fusion-nb against the SDK's bare low-level server and FastMCP.

Each server runs in its own process under uvicorn on 127.0.0.1 and serves the same
``echo`` tool (text block plus structured content ``{"result": text}`` with an output
schema, as in ``benchmarks/mcp.py``):

* ``fusion-nb http_app``: ``fusion_nb.mcp.http_app(app)`` with its defaults (bearer
  token, DNS-rebinding checks, body limits), uvicorn binding the port itself;
* ``fusion-nb in-loop server, plain process``: the same app on the socket and in-loop
  uvicorn ``%fusion serve`` makes (``listening_socket`` + ``InLoopServer``), in a plain
  process (no kernel: what ``fusion-nb serve`` runs);
* ``fusion-nb in a kernel (%fusion serve)``: a real ipykernel started with jupyter_client,
  the tool defined in a cell and ``%fusion serve`` run there (its activity panel shown,
  its iopub read by this process as a front end would);
* ``fusion-nb, OAuth JWT``: ``http_app(app, oauth=OAuthSettings(...))``, every request's
  RS256 JWT verified (signature, iss, aud, exp) against a JWKS its process serves on
  another loopback port (read once, then cached); its p50 against ``fusion-nb http_app``'s
  (a static token) is the verified JWT's cost per request, printed under the table;
* ``fusion-nb, auth=False``: ``http_app(app, auth=False)``, to compare like with like
  (the SDK and FastMCP rows verify no token);
* ``SDK lowlevel``: the SDK's bare low-level ``Server`` (its default middleware)
  and its own ``streamable_http_app()``, no auth;
* ``FastMCP``: ``FastMCP.http_app()``, no auth.

The load generator is this process: a minimal HTTP/1.1 client over raw asyncio
sockets (keep-alive, one connection per client), so the client's own cost stays
small next to the servers'. Two wires: 2026-07-28 (every call one stateless POST)
and 2025-11-25 (a session per client: ``initialize``, then one POST per call).
Measures, interleaved per round in rotating order so machine noise hits all alike:
1 client sequential (p50, p99) and 32 concurrent clients (calls/s). Read the ratios.

Every server runs under the same uvicorn settings: ``--http`` (``auto`` picks httptools
when installed, as uvicorn does and as fusion-nb's own launches do; ``h11`` the pure-Python
parser) and ``--loop`` (``asyncio``, or ``uvloop`` for the whole server process). The
table title names what ran.

After the two tables, the kernel's own figures: iopub messages per quick call (what a
front end receives), a sync tool's p50 and the OS threads it started (none per call: its
body runs on a reused worker), ``1 + 1`` in a cell while ``--agents`` clients call in a
loop, and the kernel's RSS and live widget count over ``--kernel-calls`` calls.

Run: ``.venv/bin/python benchmarks/http.py [--calls N] [--rounds N] [--clients N] [--http h11] [--loop uvloop]``.
"""

from __future__ import annotations

import os
import sys

# This file's folder holds mcp.py: when run as a script it would shadow the SDK package.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import argparse
import asyncio
import contextlib
import importlib.util
import json
import socket
import statistics
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

IN_LOOP = "fusion-nb in-loop server, plain process"
KERNEL = "fusion-nb in a kernel (%fusion serve)"
OAUTH = "fusion-nb, OAuth JWT"
SERVERS = ["fusion-nb http_app", IN_LOOP, KERNEL, OAUTH, "fusion-nb, auth=False", "SDK lowlevel", "FastMCP"]
BASELINE = "SDK lowlevel"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


class EchoOut(BaseModel):
    """The echo tool's output model (same shape for every server)."""

    result: str


INPUT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


# ---- the servers (each runs in a child process: ``benchmarks/http.py --serve NAME``) ----


def fusion_asgi(token: str | None, **options: Any) -> Any:
    """fusion-nb's HTTP app with its defaults (bearer token included; ``None``: no auth, or ``options``' auth)."""
    from fusion_nb import Fusion
    from fusion_nb.mcp import http_app

    app = Fusion("bench-fusion")

    @app.f.query("echo").with_string("text").returns(EchoOut).handle
    async def echo(input: Any, ctx: Any) -> EchoOut:
        return EchoOut(result=input.text)

    if options:
        return http_app(app, **options)
    return http_app(app, token=token) if token is not None else http_app(app, auth=False)


async def serve_oauth(http: str) -> None:
    """The OAuth row: a JWKS (and RFC 8414 metadata) on one port, the app on another; prints port, then token."""
    import jwt
    import uvicorn
    from cryptography.hazmat.primitives.asymmetric import rsa
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from fusion_nb.mcp import OAuthSettings
    from fusion_nb.mcp.uvicorn_server import in_loop_server, listening_socket

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": "bench", "alg": "RS256"}
    issuer_sock, sock = listening_socket(), listening_socket()
    issuer = f"http://127.0.0.1:{issuer_sock.getsockname()[1]}"
    public = f"http://127.0.0.1:{sock.getsockname()[1]}"
    metadata = {"issuer": issuer, "jwks_uri": issuer + "/jwks"}
    documents = Starlette(
        routes=[
            Route("/.well-known/oauth-authorization-server", lambda request: JSONResponse(metadata)),
            Route("/jwks", lambda request: JSONResponse({"keys": [jwk]})),
        ]
    )
    claims = {"iss": issuer, "aud": public + "/mcp", "sub": "bench", "client_id": "bench", "exp": time.time() + 86400}
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "bench"})
    asgi = fusion_asgi(None, oauth=OAuthSettings(issuer_url=issuer), public_url=public)
    print(sock.getsockname()[1], flush=True)
    print(token, flush=True)

    port = sock.getsockname()[1]
    sock.close()  # (served as the static-token row is: uvicorn binding the port itself)
    config = uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning", http=http)
    await asyncio.gather(in_loop_server(documents).serve(sockets=[issuer_sock]), uvicorn.Server(config).serve())


def sdk_asgi() -> Any:
    """The SDK's bare low-level server and its own Streamable HTTP app."""
    import mcp_types as types
    from mcp.server.lowlevel.server import Server

    tool = types.Tool(name="echo", input_schema=INPUT_SCHEMA, output_schema=EchoOut.model_json_schema())

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        data = {"result": params.arguments["text"]}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(data))], structured_content=data)

    return Server("bench-bare", on_list_tools=list_tools, on_call_tool=call_tool).streamable_http_app(host="127.0.0.1")


def fastmcp_asgi() -> Any:
    """FastMCP's HTTP app."""
    from fastmcp import FastMCP

    mcp = FastMCP("bench-fastmcp")

    @mcp.tool
    def echo(text: str) -> EchoOut:
        return EchoOut(result=text)

    return mcp.http_app(path="/mcp")


def serve(name: str, token: str, http: str, loop: str) -> None:
    """Child process: serve ``name`` on a free loopback port, print the port, run until killed.

    Every server gets the same uvicorn ``http`` implementation and event loop.
    """
    import uvicorn

    async def main() -> None:
        if name == OAUTH:
            await serve_oauth(http)
            return
        if name == IN_LOOP:
            from fusion_nb.mcp.uvicorn_server import in_loop_server, listening_socket

            sock = listening_socket()
            print(sock.getsockname()[1], flush=True)
            await in_loop_server(fusion_asgi(token), http=http).serve(sockets=[sock])
            return
        asgi = {
            "fusion-nb http_app": lambda: fusion_asgi(token),
            "fusion-nb, auth=False": lambda: fusion_asgi(None),
            "SDK lowlevel": sdk_asgi,
            "FastMCP": fastmcp_asgi,
        }
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        config = uvicorn.Config(asgi[name](), host="127.0.0.1", port=port, log_level="warning", http=http)
        print(port, flush=True)
        await uvicorn.Server(config).serve()

    if loop == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


def uvicorn_settings(http: str, loop: str) -> str:
    """What the servers run under, for the table titles (``auto`` resolved as uvicorn resolves it)."""
    if http == "auto":
        http = "httptools (auto)" if importlib.util.find_spec("httptools") else "h11 (auto)"
    return f"uvicorn http={http}, loop={loop}"


# ---- the load generator: HTTP/1.1 keep-alive over raw asyncio sockets ----


class Connection:
    """One keep-alive HTTP/1.1 connection sending MCP POSTs and reading whole responses."""

    def __init__(self, port: int, token: str, path: str = "/mcp") -> None:
        self.port, self.token, self.path = port, token, path
        self.session: str | None = None

    async def open(self) -> None:
        """Connect (with ``TCP_NODELAY``, as any HTTP client library does)."""
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        """Close the connection."""
        self.writer.close()

    async def post(self, body: bytes, headers: dict[str, str], method: str = "POST") -> tuple[dict[str, str], bytes]:
        """POST one JSON-RPC message (or ``method``); the response headers and whole body."""
        lines = [
            f"{method} {self.path} HTTP/1.1",
            f"Host: 127.0.0.1:{self.port}",
            f"Authorization: Bearer {self.token}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"Content-Length: {len(body)}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        if self.session:
            lines.append(f"Mcp-Session-Id: {self.session}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status, *fields = head.decode("latin-1").split("\r\n")
        if " 200 " not in status + " " and " 202 " not in status + " ":
            raise RuntimeError(f"{status.strip()} from port {self.port}")
        response = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields if f)}
        if "content-length" in response:
            return response, await self.reader.readexactly(int(response["content-length"]))
        chunks = b""
        while True:  # chunked (SSE responses)
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await self.reader.readexactly(size + 2)
            if size == 0:
                return response, chunks
            chunks += chunk[:-2]


@dataclass
class Wire:
    """How one wire frames a call: headers and the JSON-RPC body."""

    version: str
    tool: str = "echo"

    def call_body(self, number: int) -> bytes:
        """The ``tools/call`` request for the tool (``echo``, or the kernel's ``echo.sync``)."""
        params: dict[str, Any] = {"name": self.tool, "arguments": {"text": "hello"}}
        if self.version == MODERN:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
            }
        return json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params}).encode()

    def headers(self) -> dict[str, str]:
        """The wire's per-call headers."""
        if self.version == MODERN:
            return {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": self.tool}
        return {"MCP-Protocol-Version": LEGACY}

    async def connect(self, port: int, token: str, path: str = "/mcp") -> Connection:
        """A connection ready to call (2025: with its session initialized)."""
        connection = Connection(port, token, path)
        await connection.open()
        if self.version == LEGACY:
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}},
            }
            response, _ = await connection.post(json.dumps(init).encode(), {})
            connection.session = response.get("mcp-session-id")
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await connection.post(json.dumps(note).encode(), {"MCP-Protocol-Version": LEGACY})
        return connection

    async def call(self, connection: Connection, number: int) -> None:
        """One call; fails loudly on anything but the echoed result."""
        _, body = await connection.post(self.call_body(number), self.headers())
        if b'"result"' not in body or b"hello" not in body:
            raise RuntimeError(f"unexpected answer: {body[:200]!r}")


@dataclass
class Endpoint:
    """Where one server listens and the bearer token it takes."""

    port: int
    token: str
    path: str = "/mcp"


#: the cell that defines the benchmark's tool in the kernel (the same echo as ``fusion_asgi``)
KERNEL_SETUP = """
%load_ext fusion_nb
import fusion_nb, warnings, ipywidgets
from pydantic import BaseModel

def live_widget_count():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # still the registry of open models
        return len(ipywidgets.Widget.widgets)

class EchoOut(BaseModel):
    result: str

@fusion_nb.default_app.f.query("echo").with_string("text").returns(EchoOut).handle
async def echo(input, ctx):
    return EchoOut(result=input.text)

@fusion_nb.default_app.f.query("echo.sync").with_string("text").returns(EchoOut).handle
def echo_sync(input, ctx):  # the same, in a worker thread
    return EchoOut(result=input.text)

import threading
thread_starts = []
_start = threading.Thread.start

def _counting_start(self):
    thread_starts.append(self.name)
    _start(self)

threading.Thread.start = _counting_start
"""


class BenchKernel:
    """A real ipykernel serving the echo tool with ``%fusion serve``; its iopub is read and counted."""

    def __init__(self) -> None:
        from jupyter_client.manager import AsyncKernelManager

        self.km = AsyncKernelManager(kernel_name="python3")
        self.iopub = 0  # messages received on iopub so far
        self.replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.idle: dict[str, asyncio.Future[None]] = {}
        self._stdout: list[str] = []

    async def start(self, connection_file: str | None = None) -> Endpoint:
        """Start the kernel (or attach to a Jupyter server's), define the tool, serve; the endpoint printed."""
        if connection_file is None:
            await self.km.start_kernel(env={**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"})
            self.kc = self.km.client()
        else:
            from jupyter_client.asynchronous import AsyncKernelClient

            self.kc = AsyncKernelClient(connection_file=connection_file)
            self.kc.load_connection_file()
            self.km = None  # type: ignore[assignment]  # the Jupyter server owns this kernel
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=60)
        self._readers = [asyncio.create_task(self._read_iopub()), asyncio.create_task(self._read_shell())]
        await self.execute(KERNEL_SETUP)
        await self.execute("%fusion serve")
        printed = "".join(self._stdout)
        port = int(printed.split("MCP endpoint: http://127.0.0.1:")[1].split("/")[0])
        token = printed.split("Bearer token: ")[1].split()[0]
        return Endpoint(port, token)

    async def _read_iopub(self) -> None:
        while True:
            msg = await self.kc.get_iopub_msg()
            self.iopub += 1
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                self._stdout.append(msg["content"]["text"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                idle = self.idle.pop(msg["parent_header"].get("msg_id"), None)
                if idle is not None and not idle.done():
                    idle.set_result(None)

    async def _read_shell(self) -> None:
        while True:
            msg = await self.kc.get_shell_msg()
            waiter = self.replies.pop(msg["parent_header"].get("msg_id"), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(msg)

    async def execute(self, code: str) -> dict[str, Any]:
        """Run a cell; its execute reply (raises if the cell failed)."""
        self._stdout = []
        msg_id = self.kc.execute(code, allow_stdin=False)
        loop = asyncio.get_running_loop()
        waiter = self.replies[msg_id] = loop.create_future()
        idle = self.idle[msg_id] = loop.create_future()
        reply = await asyncio.wait_for(waiter, 120)
        await asyncio.wait_for(idle, 120)  # its output has arrived too (iopub and shell are not ordered)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"kernel cell failed: {reply['content']}")
        return reply

    async def kernel_info(self) -> None:
        """One ``kernel_info_request`` answered on the shell channel (the least any shell exchange costs)."""
        waiter = self.replies[self.kc.kernel_info()] = asyncio.get_running_loop().create_future()
        await asyncio.wait_for(waiter, 60)

    async def value(self, expression: str) -> str:
        """What ``print(expression)`` prints in the kernel."""
        await self.execute(f"print({expression})")
        return "".join(self._stdout).strip()

    def rss_mb(self) -> float:
        """The kernel process's resident memory."""
        import psutil

        return float(psutil.Process(self.km.provisioner.process.pid).memory_info().rss) / 2**20  # type: ignore[union-attr]

    async def stop(self) -> None:
        """Shut the kernel down."""
        for reader in self._readers:
            reader.cancel()
        self.kc.stop_channels()
        if self.km is not None:
            await self.km.shutdown_kernel(now=True)


@contextlib.asynccontextmanager
async def servers(token: str, uvicorn_args: list[str]) -> AsyncIterator[tuple[dict[str, Endpoint], BenchKernel]]:
    """Start every server in its own process (same uvicorn settings) and the kernel; endpoints by name."""
    processes: dict[str, subprocess.Popen[str]] = {}
    endpoints: dict[str, Endpoint] = {}
    kernel = BenchKernel()
    try:
        for name in SERVERS:
            if name == KERNEL:
                continue
            process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--serve", name, "--token", token, *uvicorn_args],
                stdout=subprocess.PIPE,
                text=True,
            )
            processes[name] = process
            assert process.stdout is not None
            port = int(process.stdout.readline())
            endpoints[name] = Endpoint(port, process.stdout.readline().strip() if name == OAUTH else token)
        endpoints[KERNEL] = await kernel.start()
        for endpoint in endpoints.values():
            await listening(endpoint.port)
        yield endpoints, kernel
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            process.wait(10)
        with contextlib.suppress(Exception):
            await kernel.stop()


async def listening(port: int, timeout: float = 30.0) -> None:
    """Wait until a server accepts connections on ``port`` (it prints the port before it binds)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return


async def sequential(wire: Wire, endpoint: Endpoint, calls: int) -> list[float]:
    """One client, ``calls`` calls in a row: each call's latency."""
    connection = await wire.connect(endpoint.port, endpoint.token, endpoint.path)
    clock = time.perf_counter
    latencies = []
    try:
        for number in range(calls):
            start = clock()
            await wire.call(connection, number)
            latencies.append(clock() - start)
    finally:
        connection.close()
    return latencies


async def concurrent(wire: Wire, endpoint: Endpoint, clients: int, calls_each: int) -> float:
    """``clients`` connections calling at once: calls per second."""
    connections = [await wire.connect(endpoint.port, endpoint.token, endpoint.path) for _ in range(clients)]

    async def client(connection: Connection) -> None:
        for number in range(calls_each):
            await wire.call(connection, number)

    try:
        start = time.perf_counter()
        await asyncio.gather(*(client(c) for c in connections))
        return clients * calls_each / (time.perf_counter() - start)
    finally:
        for connection in connections:
            connection.close()


async def main(
    calls: int, rounds: int, clients: int, per_client: int, warmup: int, http: str, loop: str, agents: int, soak: int
) -> None:
    """Both wires, every server, interleaved rounds; print one table per wire, then the kernel's figures."""
    token = "bench-" + "t" * 40
    settings = uvicorn_settings(http, loop)
    async with servers(token, ["--http", http, "--loop", loop]) as (endpoints, kernel):
        for version in (MODERN, LEGACY):
            wire = Wire(version)
            for name in SERVERS:  # warm-up (imports, first-call caches, jsonschema)
                await sequential(wire, endpoints[name], warmup)
            latencies: dict[str, list[float]] = {name: [] for name in SERVERS}
            rates: dict[str, list[float]] = {name: [] for name in SERVERS}
            for turn in range(rounds):
                shift = turn % len(SERVERS)
                order = SERVERS[shift:] + SERVERS[:shift]
                for name in order:
                    latencies[name] += await sequential(wire, endpoints[name], calls)
                for name in order:
                    rates[name].append(await concurrent(wire, endpoints[name], clients, per_client))
            print(table(version, latencies, rates, clients, settings))
            print()
        print(await kernel_figures(kernel, endpoints[KERNEL], calls, agents, soak))


async def kernel_figures(kernel: BenchKernel, endpoint: Endpoint, calls: int, agents: int, soak: int) -> str:
    """iopub per call, a cell's latency under ``agents`` calling in a loop, RSS and widgets over ``soak`` calls."""
    wire = Wire(MODERN)
    lines = ["### fusion-nb in a kernel: what agents cost the notebook", ""]
    await asyncio.sleep(1.0)  # the panel's coalesced flush of the tables' calls has gone out
    before = kernel.iopub
    await sequential(wire, endpoint, calls)
    await asyncio.sleep(1.0)  # and this run's last flush
    per_call = (kernel.iopub - before) / calls
    lines.append(f"- iopub messages per quick call ({calls} sequential calls, amortised): {per_call:.2f}")

    threads_before = int(await kernel.value("len(thread_starts)"))
    sync = statistics.median(await sequential(Wire(MODERN, "echo.sync"), endpoint, calls))
    plain = statistics.median(await sequential(wire, endpoint, calls))
    starts = int(await kernel.value("len(thread_starts)")) - threads_before
    lines.append(
        f"- a sync tool (worker thread) vs the async one, p50: {sync * 1e6:,.0f} vs {plain * 1e6:,.0f} µs;"
        f" OS threads started over {calls} sync calls: {starts}"
    )

    lines += await cells_first(kernel, endpoint, agents)

    widgets = "live_widget_count()"
    await sequential(wire, endpoint, min(soak, 1000))  # warm: caches, the panel's history
    await asyncio.sleep(1.0)
    rss_before, widgets_before = kernel.rss_mb(), await kernel.value(widgets)
    await concurrent(wire, endpoint, 10, soak // 10)
    await asyncio.sleep(1.0)
    rss_after, widgets_after = kernel.rss_mb(), await kernel.value(widgets)
    lines.append(
        f"- over {soak:,} more calls (10 clients): kernel RSS {rss_before:.1f} -> {rss_after:.1f} MB,"
        f" live widgets {widgets_before} -> {widgets_after}"
    )
    return "\n".join(lines)


#: the cell that switches cells first on or off: the app's gate (the host keeps closing and opening its own)
#: and the switch interval serving sets (off: Python's default, as before #51)
GATE_CELL = """
import sys, fusion_nb
from fusion_nb.notebook import current_host
from fusion_nb.notebook.cells_first import SWITCH
fusion_nb.default_app.gate = current_host().gate if {on} else None
sys.setswitchinterval(SWITCH if {on} else 0.005)
"""


async def cells_first(
    kernel: BenchKernel, endpoint: Endpoint, agents: int, cells: int = 10, rounds: int = 3
) -> list[str]:
    """``1 + 1`` idle and under ``agents`` calling in a loop, cells first on and off (interleaved rounds).

    The agents run in a process of their own (``--agents-load``), as they do beside a
    person's front end, so this process's loop only times the cells. Each round, for each
    setting: ``cells`` cells in the idle kernel, the agents' calls/s over a window with no
    cell running, then ``cells`` cells while they call. Every call sent is counted against
    every call answered (a call lost would show as a difference, or raise), and the calls
    the gate held in all.
    """
    idle: dict[bool, list[float]] = {True: [], False: []}
    busy: dict[bool, list[float]] = {True: [], False: []}
    rates: dict[bool, list[float]] = {True: [], False: []}
    sent = answered = 0

    async def timed(into: list[float]) -> None:
        for _ in range(cells):
            start = time.perf_counter()
            await kernel.execute("1 + 1")
            into.append(time.perf_counter() - start)

    for turn in range(rounds * 2):
        on = turn % 2 == 0
        await kernel.execute(GATE_CELL.format(on=on))
        await asyncio.sleep(1.0)  # the kernel has settled the last round's calls and redrawn its panel
        await timed(idle[on])
        load = await asyncio.create_subprocess_exec(
            sys.executable,
            os.path.abspath(__file__),
            "--agents-load",
            f"{endpoint.port}:{agents}",
            "--token",
            endpoint.token,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert load.stdin is not None and load.stdout is not None

        async def counts(load: asyncio.subprocess.Process = load) -> tuple[int, int]:
            assert load.stdin is not None and load.stdout is not None
            load.stdin.write(b"count\n")
            await load.stdin.drain()
            done, made = (await load.stdout.readline()).split()
            return int(done), int(made)

        await counts()  # every agent has connected and called
        await asyncio.sleep(0.5)
        (before, _), start = await counts(), time.perf_counter()
        await asyncio.sleep(2.0)  # no cell runs: what the agents get
        rates[on].append(((await counts())[0] - before) / (time.perf_counter() - start))
        await timed(busy[on])
        load.stdin.close()  # the agents stop: each ends its call in flight
        done, made = (await load.stdout.readline()).split()
        await load.wait()
        answered, sent = answered + int(done), sent + int(made)
    await kernel.execute(GATE_CELL.format(on=True))
    held = await kernel.value("current_host().gate.held")
    lines = []
    for on in (True, False):
        base, p50 = statistics.median(idle[on]), statistics.median(busy[on])
        lines.append(
            f"- cells first {'on' if on else 'off'}: `1 + 1` p50 {base * 1e3:.1f} ms idle, {p50 * 1e3:.1f} ms while"
            f" {agents} agents call in a loop ({p50 / base:.2f}x idle; max {max(busy[on]) * 1e3:.1f} ms,"
            f" {len(busy[on])} cells); the agents' calls/s with no cell running {statistics.median(rates[on]):,.0f}"
        )
    lines.append(f"- agent calls sent {sent:,}, answered {answered:,}, lost {sent - answered}; held by the gate {held}")
    return lines


async def agents_load(port: int, agents: int, token: str) -> None:
    """``--agents-load PORT:N``: N agents call in a loop; each stdin line asks the counts, end of stdin stops them.

    Prints ``answered sent`` once every agent has called (and for each line after), and once more at the end.
    """
    wire, stop, answered, sent = Wire(MODERN), asyncio.Event(), 0, 0
    started = asyncio.Event()

    async def agent() -> None:
        nonlocal answered, sent
        connection = await wire.connect(port, token)
        try:
            number = 0
            while not stop.is_set():
                sent += 1
                await wire.call(connection, number)
                answered += 1
                number += 1
                if answered >= agents:
                    started.set()
        finally:
            connection.close()

    tasks = [asyncio.create_task(agent()) for _ in range(agents)]
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        await started.wait()
        print(answered, sent, flush=True)
    stop.set()
    await asyncio.gather(*tasks)
    print(answered, sent, flush=True)


async def kernel_only(calls: int, agents: int, soak: int, soak_minutes: float) -> None:
    """``--kernel-only``: the kernel's figures alone (no other server runs), then the soak curve if asked."""
    kernel = BenchKernel()
    try:
        endpoint = await kernel.start()
        await listening(endpoint.port)
        await sequential(Wire(MODERN), endpoint, 200)  # warm-up
        print(await kernel_figures(kernel, endpoint, calls, agents, soak))
        if soak_minutes:
            print()
            print(await soak_curve(kernel, endpoint, soak_minutes))
    finally:
        with contextlib.suppress(Exception):
            await kernel.stop()


async def soak_curve(kernel: BenchKernel, endpoint: Endpoint, minutes: float, clients: int = 10) -> str:
    """The kernel's RSS after each window of 20,000 calls by ``clients`` over ``minutes``; the last half's growth."""
    wire = Wire(MODERN)
    lines = [
        f"### A served kernel's RSS over {minutes:g} minutes at full agent load ({clients} clients)",
        "",
        "| minute | calls | calls/s | RSS MiB |",
        "|---:|---:|---:|---:|",
    ]
    curve = [(0.0, kernel.rss_mb())]
    lines.append(f"| 0.0 | 0 | - | {curve[0][1]:.1f} |")
    start, total = time.monotonic(), 0
    while time.monotonic() - start < minutes * 60:
        rate = await concurrent(wire, endpoint, clients, 20_000 // clients)
        total += 20_000
        elapsed = (time.monotonic() - start) / 60
        curve.append((elapsed, kernel.rss_mb()))
        lines.append(f"| {elapsed:.1f} | {total:,} | {rate:,.0f} | {curve[-1][1]:.1f} |")
    await asyncio.sleep(30)
    lines.append(f"| idle 30 s | {total:,} | - | {kernel.rss_mb():.1f} |")
    half = curve[-1][0] - min(5.0, curve[-1][0] / 2)  # the last 5 minutes (the last half of a shorter soak)
    since = next(rss for when, rss in curve if when >= half)
    lines += [
        "",
        f"Growth over the last {curve[-1][0] - half:.1f} minutes: {curve[-1][1] - since:+.1f} MiB (target <= 1)",
    ]
    return "\n".join(lines)


def table(
    version: str, latencies: dict[str, list[float]], rates: dict[str, list[float]], clients: int, settings: str
) -> str:
    """A markdown table of one wire's results, ratios against the SDK and FastMCP."""
    wire = "2026-07-28 (stateless POST per call)" if version == MODERN else "2025-11-25 (session per client)"
    lines = [
        f"### {wire}; {settings}",
        "",
        f"| server | 1 client p50 µs | p99 µs | {clients} clients calls/s | calls/s vs SDK | vs FastMCP |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    base = statistics.median(rates[BASELINE])
    fast = statistics.median(rates["FastMCP"])
    for name in SERVERS:
        values = sorted(latencies[name])
        p50 = statistics.median(values)
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        rate = statistics.median(rates[name])
        lines.append(
            f"| {name} | {p50 * 1e6:,.0f} | {p99 * 1e6:,.0f} | {rate:,.0f} | {rate / base:.2f} | {rate / fast:.2f}x |"
        )
    ratio = statistics.median(latencies[KERNEL]) / statistics.median(latencies[IN_LOOP])
    lines += ["", f"Kernel p50 / the same server in a plain process: {ratio:.2f}x"]
    static, verified = (statistics.median(latencies[name]) for name in ("fusion-nb http_app", OAUTH))
    lines.append(
        f"A verified JWT (OAuth) against a static token: {(verified - static) * 1e6:+,.0f} µs per call at p50 "
        f"({verified / static:.2f}x)"
    )
    return "\n".join(lines)


# ---- --through-jupyter: the same kernel endpoint direct and through fusion-nb's Jupyter server extension ----

JUPYTER_TOKEN = "bench-jupyter-" + "j" * 32
JUPYTER_BASE = "/user/bench/"


@contextlib.asynccontextmanager
async def jupyter_kernel(tmp: str) -> AsyncIterator[tuple[Endpoint, Endpoint, BenchKernel]]:
    """``jupyter server`` (base URL, token) with a notebook's kernel serving echo: (direct, through Jupyter, kernel)."""
    import httpx

    root = os.path.join(tmp, "root")
    os.makedirs(root)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": os.path.join(tmp, "runtime"), "JUPYTER_CONFIG_DIR": tmp}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1"]
    command += [f"--ServerApp.port={port}", f"--IdentityProvider.token={JUPYTER_TOKEN}"]
    command += [f"--ServerApp.base_url={JUPYTER_BASE}", f"--ServerApp.root_dir={root}", "--log-level=WARN"]
    server = subprocess.Popen(command, env=env)
    kernel = BenchKernel()
    try:
        await listening(port, 90)
        url = f"http://127.0.0.1:{port}{JUPYTER_BASE}"
        async with httpx.AsyncClient(headers={"Authorization": f"token {JUPYTER_TOKEN}"}, timeout=60) as http:
            body = {"path": "bench.ipynb", "name": "bench.ipynb", "type": "notebook", "kernel": {"name": "python3"}}
            session = (await http.post(f"{url}api/sessions", json=body)).raise_for_status().json()
        kernel_file = os.path.join(env["JUPYTER_RUNTIME_DIR"], f"kernel-{session['kernel']['id']}.json")
        direct = await kernel.start(kernel_file)
        yield direct, Endpoint(port, JUPYTER_TOKEN, f"{JUPYTER_BASE}fusion/mcp/bench.ipynb"), kernel
    finally:
        with contextlib.suppress(Exception):
            await kernel.stop()
        server.terminate()
        server.wait(20)


async def through_jupyter(calls: int, rounds: int, clients: int, per_client: int, warmup: int) -> None:
    """Direct vs through the Jupyter server, both wires, interleaved rounds: p50, calls/s and their ratios."""
    import tempfile

    names = ["direct (kernel loopback)", "through Jupyter (extension)"]
    with tempfile.TemporaryDirectory() as tmp:
        async with jupyter_kernel(tmp) as (direct, through, kernel):
            endpoints = dict(zip(names, (direct, through), strict=True))
            direct_p50s: dict[str, float] = {}
            for version in (MODERN, LEGACY):
                wire = Wire(version)
                for endpoint in endpoints.values():
                    await sequential(wire, endpoint, warmup)
                latencies: dict[str, list[float]] = {name: [] for name in names}
                rates: dict[str, list[float]] = {name: [] for name in names}
                for turn in range(rounds):
                    order = names if turn % 2 == 0 else names[::-1]
                    for name in order:
                        latencies[name] += await sequential(wire, endpoints[name], calls)
                    for name in order:
                        rates[name].append(await concurrent(wire, endpoints[name], clients, per_client))
                print(f"### {version}: a kernel's endpoint direct vs through the Jupyter server")
                print()
                print(f"| route | 1 client p50 µs | p99 µs | {clients} clients calls/s |")
                print("|---|---:|---:|---:|")
                for name in names:
                    values = sorted(latencies[name])
                    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
                    rate = statistics.median(rates[name])
                    print(f"| {name} | {statistics.median(values) * 1e6:,.0f} | {p99 * 1e6:,.0f} | {rate:,.0f} |")
                p50s = [statistics.median(latencies[name]) for name in names]
                rate_ratio = statistics.median(rates[names[1]]) / statistics.median(rates[names[0]])
                print()
                print(f"Through / direct: p50 {p50s[1] / p50s[0]:.2f}x, calls/s {rate_ratio:.2f}x")
                print()
                direct_p50s[version] = p50s[0]
            await jupyter_floor(through, kernel, calls * rounds, direct_p50s)


async def jupyter_floor(through: Endpoint, kernel: BenchKernel, calls: int, direct_p50s: dict[str, float]) -> None:
    """The Jupyter server's own least cost per request, which any route through it adds to the direct call.

    ``GET api/status`` with the token is Jupyter's cheapest authenticated request (tornado's
    parsing, the identity provider, logging, one write): no route through Jupyter costs less,
    so ``(floor + direct) / direct`` is the least p50 ratio any extension can reach here.
    The other way to the kernel, its messaging channels, costs at least one shell round trip
    (``kernel_info_request``, straight over ZMQ from here: no tool runs) on top of that floor.
    """
    connection = Connection(through.port, through.token, f"{JUPYTER_BASE}api/status")
    await connection.open()
    times = []
    try:
        for _ in range(calls):
            started = time.perf_counter()
            await connection.post(b"", {}, method="GET")
            times.append(time.perf_counter() - started)
    finally:
        connection.close()
    floor = statistics.median(times)
    print("### The Jupyter server's floor: GET api/status with the token (never reaches a kernel)")
    print()
    print(f"p50 {floor * 1e6:,.0f} µs; the least p50 ratio a route through Jupyter can reach: ", end="")
    print(", ".join(f"{version} {(floor + p50) / p50:.2f}x" for version, p50 in direct_p50s.items()))
    print()
    shell = []
    for _ in range(calls):
        started = time.perf_counter()
        await kernel.kernel_info()
        shell.append(time.perf_counter() - started)
    print("The kernel's messaging channels instead: one shell round trip (kernel_info, no tool run) p50 ", end="")
    print(f"{statistics.median(shell) * 1e6:,.0f} µs, before the Jupyter server's floor or any tool call.")
    print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="sequential calls per server per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--per-client", type=int, default=40, help="calls per concurrent client per round")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--http", default="auto", choices=["auto", "h11", "httptools"], help="uvicorn's HTTP parser")
    parser.add_argument("--loop", default="asyncio", choices=["asyncio", "uvloop"], help="every server's event loop")
    parser.add_argument("--agents", type=int, default=10, help="clients calling the kernel while a cell runs")
    parser.add_argument("--kernel-calls", type=int, default=10_000, help="calls of the kernel's memory check")
    parser.add_argument("--kernel-only", action="store_true", help="only: the kernel's figures (no other server)")
    parser.add_argument("--soak-minutes", type=float, default=0, help="with --kernel-only: RSS curve at full load")
    parser.add_argument(
        "--through-jupyter",
        action="store_true",
        help="only: a notebook's kernel endpoint direct vs through fusion-nb's Jupyter server extension",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--agents-load", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        parser.error("--loop uvloop needs uvloop installed (pip install uvloop); fusion-nb does not depend on it")
    if args.serve:
        serve(args.serve, args.token, args.http, args.loop)
    elif args.agents_load:
        port, count = args.agents_load.split(":")
        asyncio.run(agents_load(int(port), int(count), args.token))
    elif args.kernel_only:
        asyncio.run(kernel_only(args.calls, args.agents, args.kernel_calls, args.soak_minutes))
    elif args.through_jupyter:
        asyncio.run(through_jupyter(args.calls, args.rounds, args.clients, args.per_client, args.warmup))
    else:
        asyncio.run(
            main(
                args.calls,
                args.rounds,
                args.clients,
                args.per_client,
                args.warmup,
                args.http,
                args.loop,
                args.agents,
                args.kernel_calls,
            )
        )
