"""Engine overhead: ``app.call`` against calling the bare handler, in the same run.

Prints a table per backend. Machines here are noisy: read the ratios, not the times.
Run: ``.venv/bin/python benchmarks/engine.py [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import tracemalloc
import types

import anyio

from fusion_nb import Fusion, progress, respond

UNWOUND: dict[str, float] = {}  # call id -> when the stuck handler's finally ran


def build_app() -> Fusion:
    app = Fusion("bench")

    @app.f.action("echo").with_string("text").handle
    async def echo(input, ctx):
        return input.text

    @app.f.action("stream").handle
    async def stream(input, ctx):
        yield progress(25)
        yield progress(50)
        yield progress(75)
        yield respond("done")

    @app.f.action("flood").with_integer("n").handle
    async def flood(input, ctx):
        for i in range(input.n):
            yield progress(i * 100 / input.n)

    @app.f.action("sync_flood").with_integer("n").handle
    def sync_flood(input, ctx):
        for i in range(input.n):
            yield progress(i * 100 / input.n)

    @app.f.action("stuck").handle
    async def stuck(input, ctx):
        try:
            await anyio.sleep_forever()
        finally:
            UNWOUND[ctx.call_id] = time.perf_counter()

    return app


async def per_call(fn, n: int) -> float:
    for _ in range(min(200, n)):
        await fn()
    start = time.perf_counter()
    for _ in range(n):
        await fn()
    return (time.perf_counter() - start) / n


async def in_task(fn) -> None:
    """``fn()`` in a task of its own, awaited: what a detached call costs at the least."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio
        import trio

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fn)
        return
    await asyncio.create_task(fn())


async def heap_growth(start) -> int:
    """Bytes the heap grew by while ``start()`` started work and that work reached its first wait."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    start()
    await anyio.wait_all_tasks_blocked()
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return used


async def bare_tasks_heap(handler, count: int) -> int:
    """``heap_growth`` of ``count`` bare tasks (no engine) each awaiting ``handler``: what a task alone costs."""
    context = types.SimpleNamespace(call_id="bare")  # (the stuck handler's finally names its call)
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio
        import trio

        async with trio.open_nursery() as nursery:

            def start() -> None:
                for _ in range(count):
                    nursery.start_soon(handler, None, context)

            used = await heap_growth(start)
            nursery.cancel_scope.cancel()
        UNWOUND.pop("bare", None)
        return used
    tasks: list[asyncio.Task] = []
    used = await heap_growth(lambda: tasks.extend(asyncio.create_task(handler(None, context)) for _ in range(count)))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    UNWOUND.pop("bare", None)
    return used


async def run(calls: int, sync_yields: int) -> list[tuple[str, str, str]]:
    app = build_app()
    rows = []
    echo, stream = app.get("echo"), app.get("stream")
    assert echo is not None and stream is not None
    echo_handler, stream_handler = echo.handler, stream.handler
    model = echo.input_model

    async def bare_echo():
        return await echo_handler(model(text="hi"), None)

    async def bare_stream():
        async for _ in stream_handler(None, None):
            pass

    async def app_echo():
        return await app.call("echo", {"text": "hi"})

    async def app_stream():
        return await app.call("stream", on_progress=lambda e: None)

    async def app_echo_inline():
        return await app.run(app.request("echo", {"text": "hi"}))

    async def bare_echo_in_task():
        await in_task(bare_echo)

    async def app_echo_detached():
        return await app.start("echo", {"text": "hi"}).wait()

    for label, bare, full in (
        ("async function", bare_echo, app_echo),
        ("async generator, 3 progress", bare_stream, app_stream),
        ("async function, inline (MCP path)", bare_echo, app_echo_inline),
    ):
        bare_t, full_t = [], []
        for _ in range(3):  # interleave to share the machine's noise
            bare_t.append(await per_call(bare, calls))
            full_t.append(await per_call(full, calls))
        b, f = min(bare_t), min(full_t)
        rows.append((f"app.call, {label}", f"{f * 1e6:8.1f} us", f"{f / b:6.1f}x bare ({b * 1e6:.1f} us)"))

    # The two call rows: a detached call against the least a detached run costs
    # (create_task + await of the bare handler), and an inline call in absolute time.
    bare_t, full_t, inline_t = [], [], []
    for _ in range(3):
        bare_t.append(await per_call(bare_echo_in_task, calls))
        full_t.append(await per_call(app_echo_detached, calls))
        inline_t.append(await per_call(app_echo_inline, calls))
    b, f = min(bare_t), min(full_t)
    rows.append(
        ("detached call (app.start + wait)", f"{f * 1e6:8.1f} us", f"{f / b:6.2f}x create_task ({b * 1e6:.1f} us)")
    )
    rows.append(("inline call (app.run(request))", f"{min(inline_t) * 1e6:8.1f} us", "target <= 5 us on asyncio"))

    flood_n = 100_000
    for label, listener in (("no listener", None), ("one listener", lambda e: None)):
        start = time.perf_counter()
        result = await app.call("flood", {"n": flood_n}, on_progress=listener)
        assert not result.is_error
        total = time.perf_counter() - start
        rows.append(
            (f"100,000 progress yields, {label}", f"{total * 1e3:8.1f} ms", f"{total / flood_n * 1e9:6.0f} ns/yield")
        )

    # A sync generator against iterating the same generator on the loop thread, in this run
    sync_flood = app.get("sync_flood")
    assert sync_flood is not None
    sync_handler = sync_flood.handler
    flood_input = sync_flood.input_model(n=sync_yields)
    start = time.perf_counter()
    for _ in sync_handler(flood_input, None):
        pass
    bare_total = time.perf_counter() - start
    start = time.perf_counter()
    result = await app.call("sync_flood", {"n": sync_yields}, on_progress=lambda e: None)
    assert not result.is_error
    total = time.perf_counter() - start
    rows.append(
        (
            f"sync generator, {sync_yields:,} yields",
            f"{total / sync_yields * 1e6:6.2f} us/yield",
            f"{total / bare_total:4.1f}x bare loop ({bare_total / sync_yields * 1e6:.2f} us)",
        )
    )

    settle, unwind = [], []
    for _ in range(300):
        call = app.start("stuck")
        await anyio.wait_all_tasks_blocked()
        t0 = time.perf_counter()
        call.cancel()
        await call.wait()
        settle.append(time.perf_counter() - t0)
        await app.wait_background()
        unwind.append(UNWOUND.pop(call.id) - t0)
    for label, samples in (("abort -> settled", settle), ("abort -> handler finally ran", unwind)):
        q = statistics.quantiles(samples, n=100)
        rows.append((label, f"p50 {q[49] * 1e6:6.1f} us", f"p99 {q[98] * 1e6:6.1f} us"))

    in_flight = 2000
    stuck_calls: list = []
    used = await heap_growth(lambda: stuck_calls.extend(app.start("stuck") for _ in range(in_flight)))
    for call in stuck_calls:
        call.cancel()
    await app.wait_background()
    stuck = app.get("stuck")
    assert stuck is not None
    bare_used = await bare_tasks_heap(stuck.handler, in_flight)
    rows.append(
        (
            f"memory per in-flight call ({in_flight} stuck)",
            f"{used / in_flight / 1024:8.2f} KiB",
            "tracemalloc, handler frame included",
        )
    )
    rows.append(
        (
            "  the same handler in a bare task",
            f"{bare_used / in_flight / 1024:8.2f} KiB",
            "create_task / start_soon, no engine",
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--sync-yields", type=int, default=100_000)
    parser.add_argument("--backend", choices=("asyncio", "trio"), action="append")
    args = parser.parse_args()
    for backend in args.backend or ("asyncio", "trio"):
        rows = anyio.run(run, args.calls, args.sync_yields, backend=backend)
        print(f"\n## engine, {backend}\n")
        print(f"| {'measure':<44} | {'value':>14} | {'ratio / detail':<28} |")
        print(f"|{'-' * 46}|{'-' * 16}|{'-' * 30}|")
        for name, value, ratio in rows:
            print(f"| {name:<44} | {value:>14} | {ratio:<28} |")


if __name__ == "__main__":
    main()
