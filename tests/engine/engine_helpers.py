"""Helpers the engine's settling, matrix and property tests share: bounded waits and leak checks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import anyio.abc

from fusion_nb.engine import App, Call, CallRequest, CallResult


async def until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """Wait for a condition a worker thread (or the log) makes true; bounded, never a blind sleep."""
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(0.002)


async def start_inline(group: anyio.abc.TaskGroup, app: App, request: CallRequest) -> Call:
    """``await app.run(request)`` in a task of ``group``, as a transport runs it; returns the call once it has begun.

    (An inline run hands back only its result; tests that abort it mid-way need its
    ``Call``, which ``on_call`` announces as the run begins.)
    """
    begun = anyio.Event()
    found: list[Call] = []

    def seen(call: Call) -> None:
        if not found:
            found.append(call)
            begun.set()

    unsubscribe = app.on_call(seen)
    try:
        group.start_soon(app.run, request)
        with anyio.fail_after(5):
            await begun.wait()
    finally:
        unsubscribe()
    return found[0]


async def run_in_mode(app: App, mode: str, name: str, args: dict[str, object] | None = None) -> tuple[Call, CallResult]:
    """Run a call ``detached`` (``app.start``, ``wait``) or ``inline`` (``app.run``); its call and result, bounded."""
    with anyio.fail_after(5):
        if mode == "detached":
            call = app.start(name, args)
            return call, await call.wait()
        calls: list[Call] = []
        unsubscribe = app.on_call(calls.append)
        try:
            result = await app.run(app.request(name, args))
        finally:
            unsubscribe()
        return calls[0], result


def fusion_tasks() -> list[str]:
    """Names of the engine's tasks still alive (asyncio tasks or trio system tasks)."""
    try:
        return [task.get_name() for task in asyncio.all_tasks() if task.get_name().startswith("fusion-nb")]
    except RuntimeError:
        pass
    import trio

    root = trio.lowlevel.current_root_task()
    found: list[str] = []
    stack = [root] if root is not None else []
    while stack:
        task = stack.pop()
        if task.name.startswith("fusion-nb"):
            found.append(task.name)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return found


def assert_idle(app: App) -> None:
    """Nothing of any call remains: no call, task, slot or thread (``app.stats()``)."""
    assert app.active_calls == [], f"calls still live: {app.active_calls}"
    stats = app.stats()
    assert (
        stats.active_calls,
        stats.background_tasks,
        stats.slots_active,
        stats.slots_queued,
        stats.threads_running,
        stats.threads_abandoned,
    ) == (0, 0, 0, 0, 0, 0), stats
    assert app.idle, stats
