"""Cost that should follow the work, not the workspace (issue 51): how reads grow with what is held.

Tables: a shared DataFrame of 10^4 .. 10^7 rows read as a resource (CSV, and JSON records)
through the SDK's in-memory client. Each read sends at most the answer bound (1 MiB), so its
time should follow the bytes sent, not the rows held: the ratio column reads each size
against 10^5 rows. Machines here are noisy: read the ratios.
Tools: registering 10 .. 10,000 described two-argument tools (ms and RSS per tool, then the
first tools/list), and tools/call p50 with 0 and the most other tools registered, beside the
SDK's low-level server (hand-built ``Tool``) and FastMCP. Each size runs in a forked child, so
RSS counts only what that registration holds.
Run: ``.venv/bin/python benchmarks/growth.py [--rounds N] [--max-rows N] [--max-tools N]``.
"""

from __future__ import annotations

import os
import sys

# benchmarks/mcp.py sits beside this file: as a script, its folder would shadow the SDK package.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import argparse
import contextlib
import gc
import json
import multiprocessing
import resource
import select
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
import mcp_types as types
import numpy as np
import pandas as pd
from mcp import Client
from mcp.server.lowlevel.server import Server
from pydantic import Field

from fusion_nb import Fusion
from fusion_nb.mcp import mcp_server

REPO = Path(__file__).resolve().parent.parent


def frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"id": np.arange(rows), "score": np.random.default_rng(0).random(rows), "name": np.full(rows, "row", object)}
    )


async def table_reads(sizes: list[int], rounds: int) -> list[tuple[int, str, float, int, str]]:
    """(rows, form, median ms per read, bytes sent, the cut line) for each size and form."""
    app = Fusion("growth")
    for rows in sizes:
        table = frame(rows)
        app.resource(f"data://t{rows}.csv", table)
        app.resource(f"data://t{rows}.json", table, mime_type="application/json")
    found = []
    async with Client(mcp_server(app)) as client:
        for rows in sizes:
            for form in ("csv", "json"):
                uri = f"data://t{rows}.{form}"
                times = []
                for _ in range(rounds):
                    started = time.perf_counter()
                    read = await client.read_resource(uri)
                    times.append(time.perf_counter() - started)
                texts = [getattr(c, "text", "") for c in read.contents]
                sent = sum(len(text.encode()) for text in texts)
                said = texts[-1].rstrip("\n").rsplit("\n", 1)[-1]
                found.append((rows, form, statistics.median(times) * 1000, sent, said[:60]))
    await app.aclose()
    return found


TOOL_SERVERS = ("fusion-nb", "SDK lowlevel", "FastMCP")


def _forecast_schema() -> dict[str, Any]:
    """What the SDK's author writes by hand for the same two described arguments (a fresh dict per tool)."""
    return {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city"},
            "days": {"type": "integer", "description": "How many days", "default": 3},
        },
        "required": ["city"],
    }


def _tool_server(kind: str, count: int) -> tuple[Any, Callable[[], None]]:
    """``kind``'s server with an ``echo`` tool, and the function registering ``count`` described two-argument tools."""

    async def forecast_body(input: Any, ctx: Any) -> str:
        return input.city

    def forecast(
        city: Annotated[str, Field(description="The city")],
        days: Annotated[int, Field(description="How many days")] = 3,
    ) -> str:
        """Forecast for a city."""
        return city

    if kind == "fusion-nb":
        app = Fusion("growth-tools")

        @app.f.query("echo").with_string("text").handle
        async def echo(input: Any, ctx: Any) -> str:
            return input.text

        def register_fusion() -> None:
            for i in range(count):
                (
                    app.f.query(f"forecast_{i}")
                    .describe("Forecast for a city.")
                    .with_string("city", "The city")
                    .with_integer("days", "How many days", default=3)
                    .handle(forecast_body)
                )

        return mcp_server(app), register_fusion
    if kind == "SDK lowlevel":
        tools = {
            "echo": types.Tool(name="echo", input_schema={"type": "object", "properties": {"text": {"type": "string"}}})
        }

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=list(tools.values()))

        async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
            if params.name not in tools:
                raise ValueError(f"unknown tool {params.name}")
            text = (params.arguments or {}).get("text") or (params.arguments or {}).get("city")
            return types.CallToolResult(content=[types.TextContent(text=str(text))])

        def register_sdk() -> None:
            for i in range(count):
                name = f"forecast_{i}"
                tools[name] = types.Tool(name=name, description="Forecast for a city.", input_schema=_forecast_schema())

        return Server("growth-sdk", on_list_tools=list_tools, on_call_tool=call_tool), register_sdk
    from fastmcp import FastMCP

    fast = FastMCP("growth-fastmcp")

    @fast.tool
    def echo_fast(text: str) -> str:
        return text

    def register_fastmcp() -> None:
        for i in range(count):
            fast.tool(forecast, name=f"forecast_{i}")

    return fast._mcp_server, register_fastmcp


def _rss_kib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 1024


async def _first_list_and_calls(server: Any, echo: str, calls: int) -> tuple[float, int, float, float, float]:
    """Seconds to the first tools/list answer, tools it listed, tools/call p50 (µs) of ``echo`` over ``calls``,
    and the median first and second call of up to five ``forecast_*`` tools (µs; 0 without one): what a
    tool's first call adds."""
    async with Client(server) as client:
        started = time.perf_counter()
        listed = len((await client.list_tools()).tools)
        first = time.perf_counter() - started
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            await client.call_tool(echo, {"text": "hi"})
            times.append(time.perf_counter() - started)
        tried = [f"forecast_{i}" for i in range(min(5, listed - 1))]
        firsts: dict[str, list[float]] = {name: [] for name in tried}
        for _ in range(2):  # each tool's first call, then its second
            for name in tried:
                started = time.perf_counter()
                answer = await client.call_tool(name, {"city": "Oslo"})
                firsts[name].append((time.perf_counter() - started) * 1e6)
                assert not answer.is_error, answer
    first_call = statistics.median(calls_of[0] for calls_of in firsts.values()) if tried else 0.0
    second_call = statistics.median(calls_of[1] for calls_of in firsts.values()) if tried else 0.0
    return first, listed, statistics.median(times[calls // 10 :]) * 1e6, first_call, second_call


def _tools_child(kind: str, count: int, calls: int, pipe: Any) -> None:
    _primed, prime = _tool_server(kind, 10)  # kept: a forked child's first writes cost RSS of their own
    prime()
    server, register = _tool_server(kind, count)
    gc.collect()
    before = _rss_kib()
    started = time.perf_counter()
    register()
    seconds = time.perf_counter() - started
    gc.collect()
    held = _rss_kib() - before
    first, listed, *called = anyio.run(
        _first_list_and_calls, server, "echo_fast" if kind == "FastMCP" else "echo", calls
    )
    pipe.send(json.dumps([seconds, held, first, listed, *called]))


def tool_growth(sizes: list[int], calls: int) -> list[tuple[str, int, float, float, float, float, float, float]]:
    """(server, tools, ms per registration, RSS KiB per tool, s until the first tools/list answer, call p50 µs,
    first and second call of one of the tools µs).

    Each (server, size) runs in a forked child of this process: its RSS starts from the
    same imports and warmed caches (one registration of each server here first), and
    grows only by what that many registrations hold.
    """
    fork = multiprocessing.get_context("fork")
    for kind in TOOL_SERVERS:
        _tool_server(kind, 1)[1]()
    gc.collect()
    gc.freeze()  # a child's collections then leave the parent's pages shared
    found = []
    for count in sizes:
        for kind in TOOL_SERVERS:
            here, there = fork.Pipe()
            child = fork.Process(target=_tools_child, args=(kind, count, calls, there))
            child.start()
            there.close()  # (so a child that dies ends recv() with EOFError, not a wait)
            seconds, held, first, listed, p50, first_call, second_call = json.loads(here.recv())
            child.join()
            assert listed == count + 1, (kind, count, listed)
            per = max(count, 1)
            found.append((kind, count, seconds * 1000 / per, held / per, seconds + first, p50, first_call, second_call))
    gc.unfreeze()
    return found


def print_tool_growth(found: list[tuple[str, int, float, float, float, float, float, float]]) -> None:
    print()
    print(
        "| server | tools | ms per registration | RSS KiB per tool | s to first tools/list | tools/call p50 µs "
        "| a tool's 1st call µs | its 2nd call µs |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind, count, ms, kib, ready, p50, first_call, second_call in found:
        if count:
            print(
                f"| {kind} | {count:,} | {ms:.3f} | {kib:.2f} | {ready:.3f} | {p50:.0f} "
                f"| {first_call:.0f} | {second_call:.0f} |"
            )
        else:
            print(f"| {kind} | 0 | - | - | - | {p50:.0f} | - | - |")
    ours = {count: row for kind, count, *row in found if kind == "fusion-nb"}
    most = max(ours)
    if most >= 1000:
        ms, kib, ready, p50, *_ = ours[most]
        print(
            f"\nfusion-nb at {most:,} tools: {kib:.2f} KiB RSS per tool (target <= 3), {ms:.3f} ms per registration "
            f"(target <= 0.1), registered and listed in {ready:.2f} s (target <= 1.5 at 10,000), tools/call p50 "
            f"{p50:.0f} µs against {ours[0][3]:.0f} µs with no other tool."
        )


# ---- lists (issue 51, item 3): a page of tools/list and tasks/list, over a real stdio pipe ----
#
# Each server is its own process driven over raw pipes with blocking reads (no client-side
# validation counted): the time is from writing the request to reading the whole answer line.
# tools/list beside the SDK's bare lowlevel server (its list cached, as ours is) and its
# MCPServer (FastMCP) with the same described two-argument tools; tasks/list and tasks/get of
# one client holding N retained tasks, in memory and through Redis.

LIST_SERVER = """
import sys, anyio
kind, count, store = sys.argv[1], int(sys.argv[2]), sys.argv[3]
DESCRIPTION = "Adds a number to a text, as a described two-argument tool."
if kind == "fusion":
    from fusion_nb import Fusion
    from fusion_nb.mcp import serve_stdio
    app = Fusion("growth-lists")
    async def handle(input, ctx):
        return "ok"
    for n in range(count):
        tool = app.f.query(f"tool{n}").describe(DESCRIPTION)
        tool.with_string("a", "a text").with_integer("b", "a number").handle(handle)
    anyio.run(serve_stdio, app)
elif kind == "tasks":
    from fusion_nb import Fusion, respond
    from fusion_nb.engine import tasks_of
    from fusion_nb.mcp import serve_stdio
    app = Fusion(f"growth-tasks-{count}")  # (its own keys in a Redis shared by every size)
    @app.f.action("quick").task(poll_interval=1.0).handle
    async def quick(input, ctx):
        yield respond("done")
    tasks = tasks_of(app)
    tasks.max_per_owner = tasks.max_total = count + 1
    async def main():
        if store == "memory":
            for _ in range(count):
                tasks.create(None, "quick", ttl=3600)
            await serve_stdio(app)
            return
        from fusion_nb.redis_tasks import share_tasks
        async with share_tasks(app, store):
            limiter = anyio.Semaphore(64)
            async def start():
                async with limiter:
                    await tasks.start(None, "quick", ttl=3600)
            async with anyio.create_task_group() as group:
                for _ in range(count):
                    group.start_soon(start)
            await serve_stdio(app)
    anyio.run(main)
else:
    import mcp_types as types
    schema = {"type": "object", "properties": {"a": {"type": "string", "description": "a text"},
              "b": {"type": "integer", "description": "a number"}}, "required": ["a", "b"]}
    if kind == "sdk":
        from mcp.server.lowlevel.server import Server
        from mcp.server.stdio import stdio_server
        listing = types.ListToolsResult(tools=[types.Tool(name=f"tool{n}", description=DESCRIPTION, input_schema=schema)
                                               for n in range(count)])
        async def list_tools(ctx, params):
            return listing
        server = Server("growth-sdk", on_list_tools=list_tools)
        async def main():
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        anyio.run(main)
    else:
        from mcp.server.mcpserver import MCPServer
        server = MCPServer("growth-fastmcp")
        def tool(a: str, b: int) -> str:
            return a
        for n in range(count):
            server.add_tool(tool, name=f"tool{n}", description=DESCRIPTION)
        server.run("stdio")
"""
LIST_SERVERS = {"fusion-nb": "fusion", "SDK lowlevel": "sdk", "FastMCP (MCPServer)": "fastmcp"}


class ListPipe:
    """A list server process on raw pipes, handshaken on 2025-11-25; ``ask`` times one request."""

    def __init__(self, kind: str, count: int, store: str = "memory") -> None:
        env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by ``close``; shown if the server ends early)
        self.process = subprocess.Popen(
            [sys.executable, "-c", LIST_SERVER, kind, str(count), store],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            env=env,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.inp, self.out, self.buffer, self.next_id = (
            self.process.stdin.fileno(),
            self.process.stdout.fileno(),
            b"",
            0,
        )
        client = {"name": "growth", "version": "0"}
        self.ask("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}, 600)
        os.write(self.inp, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def ask(self, method: str, params: dict[str, object] | None = None, wait: float = 60) -> tuple[float, bytes]:
        """Seconds from writing the request to reading its whole answer, and the answer."""
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}).encode()
        started = time.perf_counter()
        os.write(self.inp, line + b"\n")
        while b"\n" not in self.buffer:
            if not select.select([self.out], [], [], wait)[0]:
                raise TimeoutError(f"{method}: no answer in {wait} s")
            chunk = os.read(self.out, 1 << 20)
            if not chunk:
                self.errors.seek(0)
                raise EOFError(f"the server closed stdout: {self.errors.read()[-2000:].decode(errors='replace')}")
            self.buffer += chunk
        elapsed = time.perf_counter() - started
        answer, _, self.buffer = self.buffer.partition(b"\n")
        return elapsed, answer

    def walk(self, method: str, key: str) -> tuple[float, int, int, bytes]:
        """Every page of ``method``: seconds, bytes, pages, the first page's answer."""
        seconds, size, pages, first = 0.0, 0, 0, b""
        params: dict[str, object] = {}
        while True:
            elapsed, answer = self.ask(method, params)
            seconds, size, pages = seconds + elapsed, size + len(answer), pages + 1
            first = first or answer
            result = json.loads(answer)["result"]
            if "nextCursor" not in result:
                return seconds, size, pages, first
            params = {"cursor": result["nextCursor"]}

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.errors.close()


def tools_list_rows(sizes: list[int], rounds: int) -> list[tuple[str, int, float, int, float, int, int]]:
    """(server, tools, first page ms, its bytes, every page ms, their bytes, pages): medians of ``rounds``."""
    rows = []
    for count in sizes:
        for name, kind in LIST_SERVERS.items():
            pipe = ListPipe(kind, count)
            try:
                pipe.walk("tools/list", "tools")  # (the first list builds what later ones reuse)
                firsts, walks = [], []
                for _ in range(rounds):
                    elapsed, first = pipe.ask("tools/list")
                    firsts.append(elapsed)
                    walks.append(pipe.walk("tools/list", "tools"))
                _, size, pages, _ = walks[-1]
                rows.append(
                    (
                        name,
                        count,
                        statistics.median(firsts) * 1000,
                        len(first),
                        statistics.median(w[0] for w in walks) * 1000,
                        size,
                        pages,
                    )
                )
            finally:
                pipe.close()
    return rows


def task_rows(sizes: list[int], rounds: int) -> list[tuple[str, int, float, int, float, int]]:
    """(store, tasks, tasks/list first page ms, its bytes, tasks/get ms, pages): medians of ``rounds``."""
    stores: dict[str, str] = {"memory": "memory"}
    rows = []
    with contextlib.ExitStack() as stack:
        sys.path.insert(0, str(REPO / "tests"))
        from redis_server import MISSING, find_redis_server, redis_server

        if find_redis_server() is not None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            stores["Redis"] = stack.enter_context(redis_server(directory=directory)).url
        else:
            print(f"tasks through Redis: skipped ({MISSING})")
        for count in sizes:
            for name, store in stores.items():
                pipe = ListPipe("tasks", count, store)
                try:
                    _, answer = pipe.ask("tasks/list")
                    task_id = json.loads(answer)["result"]["tasks"][0]["taskId"]
                    lists, gets = [], []
                    for _ in range(rounds):
                        elapsed, answer = pipe.ask("tasks/list")
                        lists.append(elapsed)
                        gets.append(pipe.ask("tasks/get", {"taskId": task_id})[0])
                    pages = pipe.walk("tasks/list", "tasks")[2]
                    rows.append(
                        (
                            name,
                            count,
                            statistics.median(lists) * 1000,
                            len(answer),
                            statistics.median(gets) * 1000,
                            pages,
                        )
                    )
                finally:
                    pipe.close()
    return rows


def lists_section(tool_sizes: list[int], task_sizes: list[int], rounds: int) -> None:
    """Print the tools/list and tasks/list tables (each only when it has a size to measure)."""
    if tool_sizes:
        print("\n### tools/list over stdio (raw pipe; medians)\n")
        print("| server | tools | first page ms | first page bytes | every page ms | every page bytes | pages |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, count, first_ms, first_bytes, all_ms, all_bytes, pages in tools_list_rows(tool_sizes, rounds):
            print(f"| {name} | {count:,} | {first_ms:.2f} | {first_bytes:,} | {all_ms:.2f} | {all_bytes:,} | {pages} |")
    if task_sizes:
        print("\n### tasks/list and tasks/get over stdio, one client's retained tasks (medians)\n")
        print("| store | tasks | tasks/list page ms | page bytes | tasks/get ms | pages |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, count, list_ms, page_bytes, get_ms, pages in task_rows(task_sizes, rounds):
            print(f"| {name} | {count:,} | {list_ms:.2f} | {page_bytes:,} | {get_ms:.2f} | {pages} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-rows", type=int, default=10_000_000)
    parser.add_argument("--max-tools", type=int, default=10_000, help="the tools section's largest count (-1: none)")
    parser.add_argument("--max-list-tools", type=int, default=10_000, help="the lists section's largest tool count")
    parser.add_argument("--max-tasks", type=int, default=100_000, help="the lists section's largest task count")
    args = parser.parse_args()
    sizes = [n for n in (10_000, 100_000, 1_000_000, 10_000_000) if n <= args.max_rows]
    found = anyio.run(table_reads, sizes, args.rounds) if sizes else []
    base = {form: ms for rows, form, ms, *_ in found if rows == 100_000}
    print("| rows held | form | ms per read (median) | vs 10^5 rows | bytes sent | ends with |")
    print("|---:|---|---:|---:|---:|---|")
    for rows, form, ms, sent, said in found:
        ratio = f"{ms / base[form]:.2f}x" if form in base else "-"
        print(f"| {rows:,} | {form} | {ms:.1f} | {ratio} | {sent:,} | {said} |")
    registered = [n for n in (0, 10, 100, 1_000, 10_000) if n <= args.max_tools]
    if registered:
        print_tool_growth(tool_growth(registered, 60 * args.rounds))
    tool_sizes = [n for n in (10, 100, 1_000, 10_000) if n <= args.max_list_tools]
    task_sizes = [n for n in (100, 10_000, 100_000) if n <= args.max_tasks]
    if tool_sizes or task_sizes:
        lists_section(tool_sizes, task_sizes, args.rounds)


if __name__ == "__main__":
    main()
