"""Scale-out benchmark: calls/s at 32 concurrent clients, 1 worker vs 2 workers behind nginx.

    .venv/bin/python benchmarks/scale.py [--clients 32] [--seconds 6]

Two tools: ``cpu`` burns about 5 ms of pure Python per call (the GIL is the limit, so a
second process should help) and ``trivial`` returns at once (the protocol is the cost).
Every client replays, in a loop on its own keep-alive connection, the exact 2026-07-28
``tools/call`` request the SDK's ``mcp.Client`` sent once (captured), so the load
generator stays cheap; it shares the machine all the same, and its CPU use is reported
next to the rate. Also measured: ``fusion-nb serve`` on notebook 01 over stdio, from process start
to the first answered call (target < 2 s).

This file is also the served app (``fusion-nb serve benchmarks/scale.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
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
def nginx_front(ports: list[int]) -> Iterator[int]:
    """Debian's nginx with deploy/nginx/fusion-nb.conf in front of ``ports``."""
    sys.path.insert(0, str(REPO / "tests" / "cli"))
    from nginx import nginx  # the same renderer the tests use

    with tempfile.TemporaryDirectory() as tmp, nginx(Path(tmp), ports) as base:
        yield int(base.rsplit(":", 1)[1])


async def wait_healthy(port: int) -> None:
    import httpx

    async with httpx.AsyncClient() as http:
        for _ in range(400):
            with contextlib.suppress(httpx.TransportError):
                if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.05)
    raise RuntimeError("not healthy")


@contextlib.asynccontextmanager
async def client(url: str) -> AsyncIterator[Any]:
    from fusion_nb.mcp import connect

    async with connect(url, TOKEN) as session:
        await session.list_tools()
        yield session


async def captured_call(url: str, tool: str) -> tuple[dict[str, str], bytes]:
    """The headers and body of one 2026-07-28 ``tools/call`` exactly as the SDK client sends it."""
    import httpx
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        if b'"tools/call"' in request.content:
            seen.append(request)

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(headers=headers, event_hooks={"request": [record]}) as http,
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


async def load(url: str, tool: str, clients: int, seconds: float, workers: list[int]) -> tuple[float, float, float]:
    """Calls/s over ``seconds`` with ``clients`` concurrent clients; the generator's and the workers' CPU (cores).

    Each client replays the SDK client's own request on its own keep-alive connection
    (httpx), so the generator spends its CPU on HTTP, not on client-side validation.
    """
    import httpx

    headers, body = await captured_call(url, tool)
    counts = [0] * clients
    stop = asyncio.Event()

    async def one(index: int) -> None:
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            while not stop.is_set():
                response = await http.post(url, content=body)
                assert response.status_code == 200 and b'"isError":true' not in response.content, response.text
                counts[index] += 1

    tasks = [asyncio.create_task(one(i)) for i in range(clients)]
    await asyncio.sleep(1.0)  # connections open and warm
    start, cpu0, served0, wall0 = sum(counts), time.process_time(), cpu_seconds(workers), time.perf_counter()
    await asyncio.sleep(seconds)
    done, cpu1, served1, wall1 = sum(counts) - start, time.process_time(), cpu_seconds(workers), time.perf_counter()
    stop.set()
    await asyncio.gather(*tasks)
    wall = wall1 - wall0
    return done / wall, (cpu1 - cpu0) / wall, (served1 - served0) / wall


async def startup_to_first_call(notebook: Path) -> float:
    """Seconds from spawning ``fusion-nb serve NOTEBOOK`` (stdio) to its first answered call."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fusion_nb", "serve", str(notebook)], env=dict(os.environ), cwd=str(REPO)
    )
    started = time.perf_counter()
    async with Client(params) as session:
        result = await session.call_tool("greet", {})
        elapsed = time.perf_counter() - started
        assert not result.is_error
    return elapsed


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--startup-runs", type=int, default=3)
    args = parser.parse_args(argv)
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        raise SystemExit("nginx is missing: apt-get install -y nginx")

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "state.key"
        port_a, port_b = free_port(), free_port()
        with worker(port_a, key) as a, worker(port_b, key) as b:
            await wait_healthy(port_a)
            await wait_healthy(port_b)
            with nginx_front([port_a, port_b]) as front:
                await wait_healthy(front)
                for tool in ("cpu", "trivial"):
                    one = await load(f"http://127.0.0.1:{port_a}/mcp", tool, args.clients, args.seconds, [a.pid])
                    two = await load(f"http://127.0.0.1:{front}/mcp", tool, args.clients, args.seconds, [a.pid, b.pid])
                    rows.append((tool, one, two))

    print(f"\ncalls/s at {args.clients} concurrent clients, {args.seconds:g} s each (2026-07-28, Streamable HTTP)")
    cpu = f"{'wrk CPU':>8} {'gen CPU':>8}"
    print(f"{'tool':<8} {'1 worker':>9} {cpu} {'2 + nginx':>10} {cpu} {'ratio':>6}")
    for tool, (rate1, gen1, wrk1), (rate2, gen2, wrk2) in rows:
        print(
            f"{tool:<8} {rate1:>9.0f} {wrk1:>7.2f}c {gen1:>7.2f}c {rate2:>10.0f} {wrk2:>7.2f}c {gen2:>7.2f}c"
            f" {rate2 / rate1:>5.2f}x"
        )
    print(f"wrk/gen CPU: cores used by the workers / by this load generator (the machine has {os.cpu_count()})")

    notebook = REPO / "notebooks" / "01-quickstart.ipynb"
    times = [await startup_to_first_call(notebook) for _ in range(args.startup_runs)]
    print("\nfusion-nb serve notebooks/01-quickstart.ipynb (stdio): start to first answered call")
    print("runs: " + ", ".join(f"{t:.2f} s" for t in times) + f"   best {min(times):.2f} s (target < 2 s)")


if __name__ == "__main__":
    asyncio.run(main())
