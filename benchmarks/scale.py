"""Scale-out benchmark: calls/s at 32 concurrent clients, 1 worker vs 2 workers behind nginx.

    .venv/bin/python benchmarks/scale.py [--clients 32] [--seconds 6]

Two tools: ``cpu`` burns about 5 ms of pure Python per call (the GIL is the limit, so a
second process should help) and ``trivial`` returns at once (the protocol is the cost).

1 worker: the clients talk to one worker directly. 2 workers: the clients talk to nginx
(Debian's, with the shipped ``deploy/nginx/fusion-nb.conf``), which balances over both.
Same load generator, same tool, same client count, same run.

The load generator (``RawClients``): every client replays, on its own keep-alive HTTP/1.1
connection, the exact 2026-07-28 ``tools/call`` request the SDK's ``mcp.Client`` sent once
(captured; only the JSON-RPC id changes), and every answer is checked (HTTP 200, the
request's id, a complete non-error result of the right shape). All clients run in one
thread on epoll with pre-built request bytes and minimal response parsing, because the
generator shares the 2 cores with what it measures. The cores used by the workers, by nginx,
by the generator and by the rest of the machine over the measured window are printed next
to each rate (from /proc). Also measured: ``fusion-nb serve`` on notebook 01 over stdio,
from process start to the first answered call (target < 2 s).

This file is also the served app (``fusion-nb serve benchmarks/scale.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: benchmarks/mcp.py must not shadow the SDK's `mcp`
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from fusion_nb import Fusion

REPO = Path(__file__).resolve().parent.parent
app = Fusion("scale-bench")


def burn(milliseconds: float) -> int:
    """Pure-Python work until this thread has used ``milliseconds`` of CPU (holds the GIL throughout).

    CPU time, not wall time: on a busy machine each call still costs the same work.
    """
    deadline = time.thread_time() + milliseconds / 1000
    count = 0
    while time.thread_time() < deadline:
        count += sum(range(100))
    return count


@app.f.query("cpu").describe("About 5 ms of pure Python").handle
async def cpu(input: Any, ctx: Any) -> int:
    return burn(5.0)


@app.f.query("trivial").describe("Returns at once").handle
async def trivial(input: Any, ctx: Any) -> str:
    return "ok"


TOKEN = "scale-benchmark-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def worker(port: int, key_file: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One ``fusion-nb serve`` HTTP worker on ``port``, ready when this yields."""
    env = {**os.environ, "FUSION_NB_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "fusion_nb", "serve", str(Path(__file__).resolve()), "--transport", "http"]
    argv += ["--port", str(port), "--state-key-file", str(key_file)]
    process = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, cwd=REPO)
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if b"/healthz" in line:
                break
        else:
            raise RuntimeError("worker did not start")
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def nginx_front(ports: list[int], processes: str) -> Iterator[tuple[int, list[int]]]:
    """Debian's nginx with deploy/nginx/fusion-nb.conf in front of ``ports``: its port and its processes' pids."""
    sys.path.insert(0, str(REPO / "tests" / "cli"))
    from nginx import nginx  # the same renderer the tests use

    with tempfile.TemporaryDirectory() as tmp, nginx(Path(tmp), ports, worker_processes=processes) as base:
        port = int(base.rsplit(":", 1)[1])
        wait_healthy(port)  # nginx has written its pid file and forked its workers by now
        master = int((Path(tmp) / "nginx.pid").read_text())
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        yield port, [master, *map(int, children)]


def wait_healthy(port: int) -> None:
    """Return once ``GET /healthz`` on ``port`` answers 200 (20 s at most)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            if sock.recv(64).startswith(b"HTTP/1.1 200 "):
                return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} is not healthy")


async def captured_call(url: str, tool: str) -> tuple[dict[str, str], bytes]:
    """The headers and body of one 2026-07-28 ``tools/call`` exactly as the SDK client sends it."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    seen: list[httpx2.Request] = []

    async def record(request: httpx2.Request) -> None:
        if b'"tools/call"' in request.content:
            seen.append(request)

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, event_hooks={"request": [record]}) as http,
        Client(streamable_http_client(url, http_client=http)) as session,
    ):
        await session.list_tools()
        await session.call_tool(tool, {})
    request = seen[-1]
    skip = {"host", "content-length", "connection"}
    return {k: v for k, v in request.headers.items() if k.lower() not in skip}, request.content


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes ``pids`` have used so far (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def machine_busy_seconds() -> float:
    """CPU seconds all cores have been busy so far (Linux /proc/stat): the rest of the machine shows here too."""
    fields = [int(field) for field in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Measured:
    """One load run: the rate and the cores each party used over the same window."""

    rate: float
    workers: float
    nginx: float
    generator: float
    machine: float  # every process on the machine, ours included

    @property
    def others(self) -> float:
        """Cores used by processes that are not part of this run (other work on a shared machine)."""
        return max(0.0, self.machine - self.workers - self.nginx - self.generator)


def expect(condition: object, what: object) -> None:
    """Fail the run (even under ``python -O``, unlike ``assert``) when an answer is not what it must be."""
    if not condition:
        raise RuntimeError(f"unexpected answer: {what!r}")


class Answers:
    """Checks each ``tools/call`` answer: HTTP 200, JSON-RPC id of the request, a complete, non-error result."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    def check(self, sent_id: int, body: bytes) -> None:
        """Raise ``AssertionError`` naming what was wrong with one answer."""
        message = json.loads(body)
        result = message.get("result")
        expect(message.get("id") == sent_id and isinstance(result, dict), body[:300])
        expect(result.get("isError") is False and result.get("resultType") == "complete", body[:300])
        if self.tool == "cpu":
            expect(isinstance(result["structuredContent"]["result"], int), body[:300])
        else:
            expect(result["content"][0]["text"] == "ok", body[:300])


class RawClients:
    """``clients`` keep-alive HTTP/1.1 connections replaying one captured request, in one thread, on epoll.

    The load generator shares the 2 cores with what it measures, so it is kept as cheap as a
    Python client can be: the request bytes are built once (only the JSON-RPC id changes, so
    every answer can be matched to its request), responses are parsed just enough (status
    line, ``Content-Length``) and every answer is still checked (``Answers``). No client
    library, no asyncio, no TLS: the same for every topology measured.
    """

    def __init__(self, port: int, path: str, headers: dict[str, str], body: bytes, answers: Answers) -> None:
        message = json.loads(body)
        marker = b'"id":%d,' % message["id"]
        expect(body.count(marker) == 1, "the captured request's id is not where it was expected")
        self.before, self.after = body.split(marker)
        lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *(f"{k}: {v}" for k, v in headers.items())]
        self.head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode()
        self.port = port
        self.answers = answers

    def request(self, request_id: int) -> bytes:
        """The captured request with the JSON-RPC id ``request_id``."""
        body = b'%s"id":%d,%s' % (self.before, request_id, self.after)
        return b"%s%d\r\n\r\n%s" % (self.head, len(body), body)

    def connect(self, selector: selectors.BaseSelector) -> socket.socket:
        """A new keep-alive connection, registered for reading."""
        sock = socket.create_connection(("127.0.0.1", self.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, _Connection(sock))
        return sock

    def run(self, clients: int, warmup: float, seconds: float, sample: Callable[[], None]) -> int:
        """Keep every connection busy for ``warmup + seconds``; calls ``sample()`` at both ends of the window.

        Returns the number of answers checked inside the measured window. A connection the
        server closes after an answer (``Connection: close``, e.g. nginx's ``keepalive_requests``)
        is replaced, as an HTTP client would; one closed without an answer is an error.
        """
        selector = selectors.DefaultSelector()
        next_id = 1
        try:
            for _ in range(clients):
                self.connect(selector)
            for key in list(selector.get_map().values()):
                key.data.send(self.request(next_id), next_id)
                next_id += 1
            started = time.perf_counter()
            window_start, window_end = started + warmup, started + warmup + seconds
            in_window = False
            done = 0
            while True:
                now = time.perf_counter()
                if not in_window and now >= window_start:
                    in_window, done = True, 0
                    sample()
                elif in_window and now >= window_end:
                    sample()
                    return done
                for key, _ in selector.select(timeout=0.05):
                    connection: _Connection = key.data
                    chunk = connection.sock.recv(65536)
                    if not chunk:
                        raise AssertionError("the server closed a connection with a request in flight")
                    connection.buffer += chunk
                    answer = self.complete(connection.buffer)
                    if answer is None:
                        continue
                    body, closing = answer
                    self.answers.check(connection.pending, body)
                    done += 1
                    if closing:
                        selector.unregister(connection.sock)
                        connection.sock.close()
                        connection = selector.get_key(self.connect(selector)).data
                    connection.send(self.request(next_id), next_id)
                    next_id += 1
        finally:
            for key in list(selector.get_map().values()):
                key.data.sock.close()
            selector.close()

    @staticmethod
    def complete(buffer: bytearray) -> tuple[bytes, bool] | None:
        """The body of the one response in ``buffer`` once it has fully arrived (then the buffer is cleared),
        and whether the server closes the connection after it."""
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = bytes(buffer[:end]).lower()
        expect(head.startswith(b"http/1.1 200 "), bytes(buffer[:300]))
        at = head.find(b"\r\ncontent-length:")
        expect(at >= 0, head)  # JSON answers (an SSE stream here would mean the server chose to stream)
        line_end = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : line_end if line_end > 0 else None])
        if len(buffer) < end + 4 + length:
            return None
        expect(len(buffer) == end + 4 + length, "more than one response on a connection with one request in flight")
        body = bytes(buffer[end + 4 :])
        buffer.clear()
        return body, b"\r\nconnection: close" in head


class _Connection:
    """One client: its socket, what has arrived of the answer, and the id of the request in flight."""

    __slots__ = ("buffer", "pending", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.pending = 0

    def send(self, request: bytes, request_id: int) -> None:
        """Send one request (a few hundred bytes: the socket buffer takes it at once)."""
        self.pending = request_id
        self.sock.sendall(request)


def load(
    port: int, tool: str, clients: int, seconds: float, workers: list[int], nginx: list[int], captured: Any
) -> Measured:
    """Calls/s over ``seconds`` with ``clients`` concurrent clients, and the cores each party used meanwhile."""
    headers, body = captured
    samples: list[tuple[float, float, float, float, float]] = []

    def sample() -> None:
        samples.append(
            (time.perf_counter(), cpu_seconds(workers), cpu_seconds(nginx), time.process_time(), machine_busy_seconds())
        )

    done = RawClients(port, "/mcp", headers, body, Answers(tool)).run(clients, 1.0, seconds, sample)
    (t0, w0, n0, g0, m0), (t1, w1, n1, g1, m1) = samples
    wall = t1 - t0
    return Measured(done / wall, (w1 - w0) / wall, (n1 - n0) / wall, (g1 - g0) / wall, (m1 - m0) / wall)


async def startup_to_first_call(notebook: Path) -> float:
    """Seconds from spawning ``fusion-nb serve NOTEBOOK`` (stdio) to its first answered call."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fusion_nb", "serve", str(notebook)], env=dict(os.environ), cwd=str(REPO)
    )
    started = time.perf_counter()
    async with Client(params) as session:
        result = await session.call_tool("greet", {})
        elapsed = time.perf_counter() - started
        assert not result.is_error
    return elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--startup-runs", type=int, default=3)
    parser.add_argument("--tools", default="cpu,trivial", help="comma-separated: cpu, trivial")
    parser.add_argument(
        "--nginx-processes", default="auto", help="nginx worker_processes (default auto, as Debian's nginx.conf)"
    )
    args = parser.parse_args(argv)
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        raise SystemExit("nginx is missing: apt-get install -y nginx")

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "state.key"
        port_a, port_b = free_port(), free_port()
        with worker(port_a, key) as a, worker(port_b, key) as b:
            wait_healthy(port_a)
            wait_healthy(port_b)
            with nginx_front([port_a, port_b], args.nginx_processes) as (front, nginx_pids):
                for tool in args.tools.split(","):
                    captured = asyncio.run(captured_call(f"http://127.0.0.1:{port_a}/mcp", tool))
                    one = load(port_a, tool, args.clients, args.seconds, [a.pid], [], captured)
                    two = load(front, tool, args.clients, args.seconds, [a.pid, b.pid], nginx_pids, captured)
                    rows.append((tool, one, two))

    print(f"\ncalls/s at {args.clients} concurrent clients, {args.seconds:g} s each (2026-07-28, Streamable HTTP)")
    print("1 worker: clients -> worker directly; 2 workers: clients -> nginx -> 2 workers (round-robin)")
    cores = f"{'wrk':>5} {'nginx':>5} {'gen':>5} {'other':>5}"
    print(f"{'tool':<8} {'1 worker':>9} {cores} | {'2 + nginx':>9} {cores} | {'ratio':>6}")
    for tool, one, two in rows:
        cells = [
            f"{m.rate:>9.0f} {m.workers:>5.2f} {m.nginx:>5.2f} {m.generator:>5.2f} {m.others:>5.2f}" for m in (one, two)
        ]
        print(f"{tool:<8} {cells[0]} | {cells[1]} | {two.rate / one.rate:>5.2f}x")
    print(
        f"cores used over the measured window (the machine has {os.cpu_count()}): wrk = the workers, nginx = its"
        " master and workers, gen = this load generator, other = the rest of the machine"
    )

    notebook = REPO / "notebooks" / "01-quickstart.ipynb"
    times = [asyncio.run(startup_to_first_call(notebook)) for _ in range(args.startup_runs)]
    if times:
        print("\nfusion-nb serve notebooks/01-quickstart.ipynb (stdio): start to first answered call")
        print("runs: " + ", ".join(f"{t:.2f} s" for t in times) + f"   best {min(times):.2f} s (target < 2 s)")


if __name__ == "__main__":
    main()
