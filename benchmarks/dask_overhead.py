"""Dask round trip through fusion_nb.dask vs ``client.submit(...).result()``, and the cooperative stop's latency.

    .venv/bin/python benchmarks/dask_overhead.py [--calls 200] [--stops 10]

On one ``LocalCluster`` per kind (worker processes; worker threads in this process), one
worker with one thread, a plain client with its own loop thread (as in a notebook):

- ``direct``: ``client.submit(trivial, pure=False).result()``, one at a time;
- ``helper``: a tool call, ``await app.call("trivial")``, whose body is
  ``await fnb_dask.run(ctx, trivial)`` (the engine's call included);
- ``helper+progress``: the same, iterating the work's progress first (``async for``).

The three are interleaved call by call, so the machine's load falls on all of them alike;
each row is the p50 of its calls. Then the stop: a cooperative function (checks
``task.stopped()`` every 1 ms) is aborted once it runs; the latency is from ``call.cancel()``
to the function's own clock reading when it saw the stop (a ``distributed.Variable``
carries it back; one machine, one clock).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable

# This folder holds http.py and mcp.py, which would shadow the stdlib's http (distributed imports it).
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import distributed

from fusion_nb import Fusion, respond
from fusion_nb import dask as fnb_dask


def trivial(task: fnb_dask.DaskTask) -> int:
    return 1


def trivial_plain() -> int:
    return 1


def until_stopped(task: fnb_dask.DaskTask, variable: str) -> None:
    task.report(1, message="running")
    while not task.stopped():
        time.sleep(0.001)
    distributed.Variable(variable).set(time.time())


def build_app(client: distributed.Client) -> Fusion:
    app = Fusion("dask-bench")

    @app.f.action("trivial").handle
    async def trivial_tool(input, ctx):
        return await fnb_dask.run(ctx, trivial, client=client)

    @app.f.action("trivial_progress").handle
    async def trivial_progress(input, ctx):
        work = fnb_dask.run(ctx, trivial, client=client)
        async for event in work:
            yield event
        yield respond(await work)

    @app.f.action("stoppable").with_string("variable", "where the stop time goes").handle
    async def stoppable(input, ctx):
        work = fnb_dask.run(ctx, until_stopped, input.variable, client=client)
        async for event in work:
            yield event

    return app


def _set_on_progress(running: asyncio.Event, _event: object) -> None:
    """Set ``running`` on a call's first progress (a partial, so each call sets its own event)."""
    running.set()


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await fn()
    return time.perf_counter() - started


async def measure(client: distributed.Client, calls: int, stops: int) -> tuple[dict[str, float], list[float]]:
    app = build_app(client)

    async def direct() -> object:
        return await asyncio.to_thread(lambda: client.submit(trivial_plain, pure=False).result())

    async def helper() -> object:
        result = await app.call("trivial")
        assert result.value == 1, result.error
        return result

    async def helper_progress() -> object:
        result = await app.call("trivial_progress")
        assert result.value == 1, result.error
        return result

    # ``direct`` runs in a thread (it blocks): compare it with the same hop measured alone.
    async def hop() -> object:
        return await asyncio.to_thread(int)

    kinds = {"direct": direct, "helper": helper, "helper+progress": helper_progress, "(thread hop)": hop}
    for fn in kinds.values():  # warm up
        for _ in range(5):
            await fn()
    samples: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(calls):
        for name, fn in kinds.items():
            samples[name].append(await timed(fn))
    p50 = {name: statistics.median(values) for name, values in samples.items()}

    latencies = []
    for _ in range(stops):
        variable = f"bench-stop-{uuid.uuid4().hex[:8]}"
        running = asyncio.Event()
        call = app.start("stoppable", {"variable": variable}, on_progress=functools.partial(_set_on_progress, running))
        await asyncio.wait_for(running.wait(), 30)
        cancelled_at = time.time()
        call.cancel()
        stopped_at = await asyncio.to_thread(distributed.Variable(variable, client=client).get, timeout=30)
        latencies.append(stopped_at - cancelled_at)
        await asyncio.to_thread(distributed.Variable(variable, client=client).delete)
    await app.wait_background(10)
    return p50, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--stops", type=int, default=10)
    args = parser.parse_args()
    rows = []
    for kind in ("processes", "threads"):
        with (
            distributed.LocalCluster(
                n_workers=1,
                threads_per_worker=1,
                processes=kind == "processes",
                dashboard_address=":0",  # a free port: None still binds distributed's 8787
                scheduler_kwargs={"dashboard": False},
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            rows.append((kind, *asyncio.run(measure(client, args.calls, args.stops))))
    print(f"\nDask round trip of a trivial function, p50 of {args.calls} calls each (interleaved), in ms")
    print(f"{'cluster':<10} {'direct':>8} {'helper':>8} {'+progress':>10} {'overhead':>9} | stop p50 / max (ms)")
    for kind, p50, latencies in rows:
        direct = p50["direct"] - p50["(thread hop)"]  # submit+result alone, without the benchmark's thread hop
        overhead = p50["helper"] - direct
        print(
            f"{kind:<10} {direct * 1e3:>8.2f} {p50['helper'] * 1e3:>8.2f} {p50['helper+progress'] * 1e3:>10.2f} "
            f"{overhead * 1e3:>+9.2f} | {statistics.median(latencies) * 1e3:.1f} / {max(latencies) * 1e3:.1f}"
        )
    print("direct: client.submit(...).result() (its thread hop subtracted); helper: await app.call(...) whose")
    print("body awaits fnb_dask.run(...); +progress: the body iterates the progress first; overhead: helper - direct.")
    print("stop: call.cancel() to the moment the cooperative function saw task.stopped() (it checks every 1 ms).")


if __name__ == "__main__":  # (worker processes import this file: nothing may run on import)
    main()
