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
import gc
import json
import multiprocessing
import resource
import statistics
import time
from collections.abc import Callable
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-rows", type=int, default=10_000_000)
    parser.add_argument("--max-tools", type=int, default=10_000)
    args = parser.parse_args()
    sizes = [n for n in (10_000, 100_000, 1_000_000, 10_000_000) if n <= args.max_rows]
    found = anyio.run(table_reads, sizes, args.rounds)
    base = {form: ms for rows, form, ms, *_ in found if rows == 100_000}
    print("| rows held | form | ms per read (median) | vs 10^5 rows | bytes sent | ends with |")
    print("|---:|---|---:|---:|---:|---|")
    for rows, form, ms, sent, said in found:
        ratio = f"{ms / base[form]:.2f}x" if form in base else "-"
        print(f"| {rows:,} | {form} | {ms:.1f} | {ratio} | {sent:,} | {said} |")
    print_tool_growth(tool_growth([n for n in (0, 10, 100, 1_000, 10_000) if n <= args.max_tools], 60 * args.rounds))


if __name__ == "__main__":
    main()
