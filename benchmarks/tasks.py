"""Tasks: what polling costs next to a plain call, what a kept task weighs, and 1,000 at once.

* ``tasks/get`` p50 next to a plain quick ``tools/call``, both through the SDK's real
  ``mcp.Client`` on the 2025 in-memory JSON-RPC path, alternating call by call so
  machine noise hits both alike (read the ratio).
* Memory per retained finished task: ``tracemalloc`` over N finished tasks of a tool
  answering a short text, everything the store keeps (task, call, result) included.
* 1,000 concurrent tasks created (each waits on one event, so all are live at once),
  then released and collected: time to create, time until all are final, and that
  their expiry frees the store.

Run: ``.venv/bin/python benchmarks/tasks.py [--calls N] [--retained N]``.
"""

from __future__ import annotations

import os
import sys

# benchmarks/ holds a mcp.py: run as a script, this folder would shadow the SDK package.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import argparse
import gc
import statistics
import time
import tracemalloc

import anyio
import mcp_types as types
from mcp import Client

from fusion_nb import Fusion
from fusion_nb.engine import Tasks, tasks_of
from fusion_nb.mcp import mcp_server


def app_with_tools() -> tuple[Fusion, anyio.Event]:
    app, release = Fusion("bench-tasks"), anyio.Event()

    @app.f.query("quick").task().handle
    async def quick(input, ctx):
        return "ok"

    @app.f.action("held").task().handle
    async def held(input, ctx):
        await release.wait()
        return "done"

    return app, release


async def polling(calls: int) -> tuple[float, float]:
    app, _ = app_with_tools()
    task = tasks_of(app).create(None, "quick")
    await task.wait()
    get = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.id))
    plain_us: list[float] = []
    get_us: list[float] = []
    async with Client(mcp_server(app), mode="legacy") as client:
        await client.list_tools()
        for _ in range(200):  # warm-up
            await client.call_tool("quick", {})
            await client.session.send_request(get, types.GetTaskResult)
        for _ in range(calls):
            started = time.perf_counter()
            await client.call_tool("quick", {})
            plain_us.append((time.perf_counter() - started) * 1e6)
            started = time.perf_counter()
            await client.session.send_request(get, types.GetTaskResult)
            get_us.append((time.perf_counter() - started) * 1e6)
    await app.aclose()
    return statistics.median(plain_us), statistics.median(get_us)


async def retained(count: int) -> float:
    app, _ = app_with_tools()
    tasks = Tasks(app, max_per_owner=count, max_total=count + 1)
    warm = tasks.create("warm", "quick")
    await warm.wait()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    made = [tasks.create("owner", "quick") for _ in range(count)]
    for task in made:
        await task.wait()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    await app.aclose()
    return (after - before) / count


async def thousand() -> tuple[float, float, int]:
    app, release = app_with_tools()
    clock = [0.0]
    tasks = Tasks(app, max_per_owner=1_000, max_total=1_000, clock=lambda: clock[0])
    started = time.perf_counter()
    made = [tasks.create("owner", "held") for _ in range(1_000)]
    created = time.perf_counter() - started
    while app.stats().active_calls < 1_000:
        await anyio.sleep(0.001)
    release.set()
    started = time.perf_counter()
    for task in made:
        await task.wait()
    collected = time.perf_counter() - started
    assert all(task.result is not None and task.result.value == "done" for task in made)
    clock[0] += 3_600
    freed = tasks.sweep()
    await app.aclose()
    return created, collected, freed


async def main(calls: int, count: int) -> None:
    plain, get = await polling(calls)
    per_task = await retained(count)
    created, collected, freed = await thousand()
    print(f"### tasks ({calls} alternating calls; {count} retained tasks)")
    print()
    print("| measure | value |")
    print("|---|---:|")
    print(f"| plain quick tools/call p50 (2025 in-memory) | {plain:.0f} µs |")
    print(f"| tasks/get p50 (same path) | {get:.0f} µs |")
    print(f"| tasks/get / plain call | {get / plain:.2f} |")
    print(f"| memory per retained finished task (task, call, result) | {per_task / 1024:.2f} KiB |")
    print(f"| 1,000 concurrent tasks: create all | {created * 1000:.0f} ms |")
    print(f"| 1,000 concurrent tasks: release until all final and collected | {collected * 1000:.0f} ms |")
    print(f"| 1,000 tasks freed by expiry | {freed} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--retained", type=int, default=2000)
    options = parser.parse_args()
    anyio.run(main, options.calls, options.retained)
