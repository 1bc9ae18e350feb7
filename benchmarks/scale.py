"""Scale-out benchmark: calls/s at 32 concurrent clients, 1 worker vs 2 workers behind nginx.

    .venv/bin/python benchmarks/scale.py [--clients 32] [--seconds 6] [--only load,tasks,startup]

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

Tasks across workers: ``tasks/get`` latency (p50, p90) of one finished task, one client on a
keep-alive connection, with the in-memory store and with the Redis store (``--task-store``,
against a ``redis-server`` on loopback this script starts itself: one line saying it skipped
when there is none), the Redis task polled on the worker that ran it and on another. Same
``fusion-nb serve`` HTTP workers, same request bytes, the stores' requests interleaved so
machine noise hits each alike.

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
import statistics
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


@app.f.query("trivial.task").describe("Returns at once, as a task").task(ttl=3600).handle
async def trivial_task(input: Any, ctx: Any) -> str:
    return "ok"


TOKEN = "scale-benchmark-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def worker(port: int, key_file: Path, *options: str) -> Iterator[subprocess.Popen[bytes]]:
    """One ``fusion-nb serve`` HTTP worker on ``port`` (with ``options``), ready when this yields."""
    env = {**os.environ, "FUSION_NB_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "fusion_nb", "serve", str(Path(__file__).resolve()), "--transport", "http"]
    argv += ["--port", str(port), "--state-key-file", str(key_file), *options]
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


TASKS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "scale-bench", "version": "0"},
}


def modern_request(port: int, method: str, request_id: int, params: dict[str, Any], tool: str = "") -> bytes:
    """The bytes of one 2026-07-28 request on a keep-alive connection (routing headers included)."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": TASKS_META}}
    ).encode()
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Authorization: Bearer {TOKEN}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "MCP-Protocol-Version: 2026-07-28",
        f"Mcp-Method: {method}",
        *([f"Mcp-Name: {tool}"] if tool else []),
        f"Content-Length: {len(body)}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class KeptConnection:
    """One blocking keep-alive connection: send a request, read its whole JSON answer (``RawClients.complete``)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()

    def exchange(self, request: bytes) -> dict[str, Any]:
        self.sock.sendall(request)
        while (answer := RawClients.complete(self.buffer)) is None:
            chunk = self.sock.recv(65536)
            expect(chunk, "the server closed the connection with a request in flight")
            self.buffer += chunk
        body, closing = answer
        expect(not closing, "the server closed a keep-alive connection")
        message: dict[str, Any] = json.loads(body)
        expect("result" in message, body[:300])
        return message["result"]

    def close(self) -> None:
        self.sock.close()


def finished_task(connection: KeptConnection) -> str:
    """Create a ``trivial.task`` task on ``connection``'s worker and return its id once it has completed."""
    params = {"name": "trivial.task", "arguments": {}}
    created = connection.exchange(modern_request(connection.port, "tools/call", 1, params, "trivial.task"))
    expect(created.get("resultType") == "task", created)
    task_id: str = created["taskId"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = connection.exchange(modern_request(connection.port, "tasks/get", 2, {"taskId": task_id}))
        if got["status"] == "completed":
            return task_id
        time.sleep(0.01)
    raise RuntimeError(f"task {task_id} did not complete")


def get_latencies(targets: dict[str, tuple[KeptConnection, str]], rounds: int) -> dict[str, list[float]]:
    """``tasks/get`` round trips in µs per target, the targets interleaved request by request (after a warm-up)."""
    requests = {
        name: modern_request(connection.port, "tasks/get", 3, {"taskId": task_id})
        for name, (connection, task_id) in targets.items()
    }
    timings: dict[str, list[float]] = {name: [] for name in targets}
    for index in range(rounds + 200):
        for name, (connection, _) in targets.items():
            started = time.perf_counter()
            answer = connection.exchange(requests[name])
            elapsed = (time.perf_counter() - started) * 1e6
            expect(answer.get("status") == "completed" and answer.get("result"), answer)
            if index >= 200:
                timings[name].append(elapsed)
    return timings


def tasks_get_rows(rounds: int) -> list[str]:
    """The ``tasks/get`` table: in-memory against Redis (owner worker, other worker), or one line saying why not."""
    sys.path.insert(0, str(REPO / "tests"))
    from redis_server import MISSING, find_redis_server, redis_server

    if find_redis_server() is None:
        return [f"tasks/get with the Redis store: skipped ({MISSING})"]
    with tempfile.TemporaryDirectory() as tmp, redis_server(directory=Path(tmp)) as redis:
        key = Path(tmp) / "state.key"
        ports = {name: free_port() for name in ("memory", "redis-a", "redis-b")}
        store = ("--task-store", redis.url)
        with (
            worker(ports["memory"], key),
            worker(ports["redis-a"], key, *store),
            worker(ports["redis-b"], key, *store),
        ):
            connections = {name: KeptConnection(port) for name, port in ports.items()}
            try:
                in_memory = finished_task(connections["memory"])
                on_redis = finished_task(connections["redis-a"])
                targets = {
                    "in-memory store": (connections["memory"], in_memory),
                    "Redis store, the worker that ran it": (connections["redis-a"], on_redis),
                    "Redis store, another worker": (connections["redis-b"], on_redis),
                }
                timings = get_latencies(targets, rounds)
            finally:
                for connection in connections.values():
                    connection.close()
    base = statistics.median(timings["in-memory store"])
    rows = [
        f"\ntasks/get of a finished task, one client on a keep-alive connection, {rounds} requests each (2026-07-28)",
        f"{'store':<37} {'p50':>9} {'p90':>9} {'p50 / in-memory':>16}",
    ]
    for name, values in timings.items():
        p50, p90 = statistics.median(values), statistics.quantiles(values, n=10)[-1]
        rows.append(f"{name:<37} {p50:>6.0f} µs {p90:>6.0f} µs {p50 / base:>15.2f}x")
    return rows


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


PARTS = ("load", "tasks", "startup")


def load_table(args: argparse.Namespace) -> None:
    """calls/s of each tool: one worker reached directly against two behind nginx."""
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--startup-runs", type=int, default=3)
    parser.add_argument("--get-rounds", type=int, default=2000, help="tasks/get requests per store")
    parser.add_argument("--tools", default="cpu,trivial", help="comma-separated: cpu, trivial")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts to run: {', '.join(PARTS)}")
    parser.add_argument(
        "--nginx-processes", default="auto", help="nginx worker_processes (default auto, as Debian's nginx.conf)"
    )
    args = parser.parse_args(argv)
    parts = args.only.split(",")
    if unknown := set(parts) - set(PARTS):
        parser.error(f"--only: unknown part(s) {', '.join(sorted(unknown))}; choose from {', '.join(PARTS)}")

    if "load" in parts:
        load_table(args)
    if "tasks" in parts:
        print("\n".join(tasks_get_rows(args.get_rounds)))
    if "startup" in parts:
        notebook = REPO / "notebooks" / "01-quickstart.ipynb"
        times = [asyncio.run(startup_to_first_call(notebook)) for _ in range(args.startup_runs)]
        if times:
            print("\nfusion-nb serve notebooks/01-quickstart.ipynb (stdio): start to first answered call")
            print("runs: " + ", ".join(f"{t:.2f} s" for t in times) + f"   best {min(times):.2f} s (target < 2 s)")


if __name__ == "__main__":
    main()
