"""The backend seam: one interface chosen from the running loop, and nobody else branching on it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from fusion_nb.engine import Interruptible, current_backend

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
#: what telling asyncio from trio looks like in code (detection, native tasks, native cancellation)
BRANCHING = re.compile(
    r"get_running_loop|current_task|_get_running_loop|import trio|\btrio\.|CancelledError|__name__ == .Cancelled"
)


def test_no_module_outside_the_backends_branches_on_the_backend():
    checked = [
        *sorted((ROOT / "fusion_nb" / "engine").glob("*.py")),
        ROOT / "fusion_nb" / "mcp" / "bounded.py",
        ROOT / "fusion_nb" / "mcp" / "pipe.py",
    ]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in checked
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BRANCHING.search(line.split("#")[0]) and not line.lstrip().startswith(('"', "``", "#"))
    ]
    assert found == []
    assert len(checked) > 10, "the scan must read the engine's modules"


async def test_the_backend_is_the_running_loops_and_is_kept(anyio_backend_name):
    backend = current_backend()
    assert backend.name == anyio_backend_name
    assert current_backend() is backend


async def test_an_interruptible_block_ends_quietly_when_cancelled_from_elsewhere(anyio_backend_name):
    entered, after = anyio.Event(), []
    cut: list[Interruptible] = []

    async def block() -> None:
        cut.append(current_backend().interruptible())
        with cut[0]:
            entered.set()
            await anyio.sleep_forever()
        after.append(cut[0].cancelled_caught)
        await anyio.lowlevel.checkpoint()  # no cancellation is left pending on this task
        after.append("went on")

    async with anyio.create_task_group() as group:
        group.start_soon(block)
        await entered.wait()
        cut[0].cancel()
    assert after == [True, "went on"]


async def test_an_outer_cancellation_passes_through_an_interruptible_block(anyio_backend_name):
    entered, reached = anyio.Event(), []

    async def block() -> None:
        with current_backend().interruptible() as cut:
            entered.set()
            await anyio.sleep_forever()
        reached.append(cut.cancelled_caught)  # never: the group's cancellation is not the block's to take

    async with anyio.create_task_group() as group:
        group.start_soon(block)
        await entered.wait()
        group.cancel_scope.cancel()
    assert reached == []


async def test_a_readable_watch_wakes_on_data_as_often_as_needed_and_close_leaves_nothing_watched(anyio_backend_name):
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        watch = current_backend().watch_readable(read_end)
        for payload in (b"one", b"two"):
            with anyio.fail_after(5):
                async with anyio.create_task_group() as group:
                    group.start_soon(watch.wait)
                    await anyio.wait_all_tasks_blocked()
                    os.write(write_end, payload)
            assert os.read(read_end, 16) == payload
        watch.close()
        if anyio_backend_name == "asyncio":
            import asyncio

            assert not asyncio.get_running_loop().remove_reader(read_end)  # nothing left registered
    finally:
        os.close(read_end)
        os.close(write_end)


async def test_call_soon_runs_after_what_is_ready_now(anyio_backend_name):
    ran: list[str] = []
    current_backend().call_soon(lambda: ran.append("soon"))
    assert ran == []
    with anyio.fail_after(5):
        while not ran:
            await anyio.lowlevel.checkpoint()
    assert ran == ["soon"]
