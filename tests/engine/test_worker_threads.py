"""Sync bodies run on long-lived worker threads, and whatever they raise fails only their call.

Two things a kernel made visible: ipykernel runs its loop through ``run_forever``, so
anyio's pool (tied to a "root task") started an OS thread per served sync call; and a
body that raised ``SystemExit`` or ``KeyboardInterrupt`` (``sys.exit``, argparse,
click) escaped the event loop, ending ``fusion-nb serve`` and hanging the kernel.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator

import anyio
import pytest

from fusion_nb import Fusion, progress
from fusion_nb.engine import INTERNAL_ERROR

pytestmark = pytest.mark.anyio


@pytest.fixture
def thread_starts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of every ``threading.Thread`` started while the test runs."""
    started: list[str] = []
    original = threading.Thread.start

    def counting_start(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    yield started


def register_exits(app: Fusion) -> None:
    @app.f.action("exits").handle
    def exits(input, ctx):
        sys.exit(2)

    @app.f.action("interrupts").handle
    def interrupts(input, ctx):
        raise KeyboardInterrupt

    @app.f.action("argparse").handle
    def parses(input, ctx):
        import argparse

        argparse.ArgumentParser(prog="tool").parse_args(["--nope"])  # prints usage, raises SystemExit(2)

    @app.f.action("exits.streaming").handle
    def exits_streaming(input, ctx):
        yield progress(10, "started")
        raise SystemExit("bye")

    @app.f.action("ok").handle
    def ok(input, ctx):
        return "fine"


@pytest.mark.parametrize(
    ("tool", "raised"),
    [
        ("exits", "SystemExit"),
        ("interrupts", "KeyboardInterrupt"),
        ("argparse", "SystemExit"),
        ("exits.streaming", "SystemExit"),
    ],
)
async def test_a_sync_body_that_exits_fails_its_call_only(app, tool, raised):
    register_exits(app)
    result = await app.call(tool, {})
    assert result.error is not None and result.error.code == INTERNAL_ERROR
    assert f"failed with {raised}" in result.error.message, result.error.message
    assert type(result.exception).__name__ == raised  # the body's own exception, for the folded traceback
    assert (await app.call("ok", {})).value == "fine", "the loop and the app go on"


async def test_a_sync_body_that_exits_from_a_detached_call_fails_its_call_only(app):
    register_exits(app)
    call = app.start("exits", {})
    result = await call.wait()
    assert result.error is not None and "SystemExit" in result.error.message
    assert (await app.call("ok", {})).value == "fine"


async def test_sequential_sync_calls_from_fresh_tasks_reuse_one_worker(app, thread_starts):
    """Each call from its own task (as each HTTP request is): at most one thread is ever started."""

    @app.f.query("ident").handle
    def ident(input, ctx):
        return threading.get_ident()

    idents = set()

    async def one() -> None:
        idents.add((await app.call("ident", {})).value)

    for _ in range(30):
        async with anyio.create_task_group() as group:
            group.start_soon(one)
    assert len(thread_starts) <= 1, thread_starts
    assert len(idents) == 1, "every call ran on the same warm worker"


def test_a_loop_run_by_run_forever_starts_no_thread_per_call(thread_starts):
    """ipykernel's shape: a loop driven by ``run_forever`` (no root task), a new task per request."""
    app = Fusion("forever")

    @app.f.query("ident").handle
    def ident(input, ctx):
        return threading.get_ident()

    loop = asyncio.new_event_loop()
    results: list[object] = []

    async def requests() -> None:
        for _ in range(30):  # each request its own task, as uvicorn makes them
            results.append((await loop.create_task(app.call("ident", {}))).value)
        loop.stop()

    try:
        driver = loop.create_task(requests())
        loop.run_forever()
        assert driver.done()
    finally:
        loop.close()
    assert len(results) == 30 and len(set(results)) == 1, set(results)
    assert len(thread_starts) <= 1, thread_starts
    assert app.idle


async def test_concurrent_sync_calls_each_get_a_thread_then_share_them(app, thread_starts):
    """Concurrency still works: N bodies blocked together run on N threads, which later calls reuse."""
    gate = threading.Event()
    entered: list[int] = []

    @app.f.query("wait").handle
    def wait(input, ctx):
        entered.append(threading.get_ident())
        assert gate.wait(10)
        return threading.get_ident()

    calls = [app.start("wait", {}) for _ in range(4)]
    with anyio.fail_after(10):
        while len(entered) < 4:
            await anyio.sleep(0.005)
    gate.set()
    first = {(await call.wait()).value for call in calls}
    assert len(first) == 4
    before = len(thread_starts)
    again = [app.start("wait", {}) for _ in range(4)]
    second = {(await call.wait()).value for call in again}
    assert second <= first and len(thread_starts) == before, "the second wave reuses the first wave's workers"


def test_a_forked_child_starts_its_own_workers():
    """A child forked after sync calls finds no (dead) idle worker of its parent's: its calls run."""
    import multiprocessing

    app = Fusion("forked")

    @app.f.query("ident").handle
    def ident(input, ctx):
        return threading.get_ident()

    assert asyncio.run(app.call("ident", {})).value  # the parent now has an idle worker

    def child(results) -> None:
        results.put(asyncio.run(app.call("ident", {})).value)

    context = multiprocessing.get_context("fork")
    results = context.Queue()
    process = context.Process(target=child, args=(results,))
    process.start()
    try:
        assert results.get(timeout=30), "the child's sync call ran"
    finally:
        process.join(30)
        if process.is_alive():  # a hung child must not outlive the test
            process.kill()
            process.join(10)
    assert process.exitcode == 0


async def test_a_thread_of_an_async_body_that_asks_first_for_the_signal_sees_the_abort(app):
    """The signal is made on first use, and here the first to ask is a thread the body started
    (not the engine's): the loop's abort must reach the very signal that thread holds."""
    polling, finished, seen = threading.Event(), threading.Event(), []

    def poll(ctx) -> None:
        signal = ctx.signal  # made here, in the thread: the loop has not looked at it
        polling.set()
        for _ in range(10_000):  # (about 10 s at most: catches a signal that never aborts)
            if signal.aborted:
                break
            threading.Event().wait(0.001)
        seen.append((signal.aborted, signal is ctx.signal))
        finished.set()

    @app.f.action("polls_in_a_thread").handle
    async def polls_in_a_thread(input, ctx):
        await anyio.to_thread.run_sync(poll, ctx, abandon_on_cancel=False)

    call = app.start("polls_in_a_thread")
    await anyio.to_thread.run_sync(polling.wait, 10)
    call.cancel()
    await anyio.to_thread.run_sync(finished.wait, 10)
    await call.wait_stopped()
    assert seen == [(True, True)]
