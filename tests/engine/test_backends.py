"""The backend seam: one interface chosen from the running loop, and nobody else branching on it."""

from __future__ import annotations

import asyncio
import os
import re
from contextlib import suppress
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from fusion_nb.engine.lowlevel import Interruptible, current_backend

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "fusion_nb"
#: what telling asyncio from trio looks like in code (detection, native tasks, native cancellation)
BRANCHING = re.compile(
    r"get_running_loop|\bcurrent_task|_get_running_loop|import trio|\btrio\.|CancelledError|__name__ == .Cancelled"
    r"|sniffio|current_async_library|in_trio_run"
)
#: the modules that only ever run on asyncio, so asyncio's own API is theirs to use (none tells it from trio)
ASYNCIO_HOSTS = {
    "fusion_nb/notebook": "the IPython kernel's loop",
    "fusion_nb/cli": "asyncio.run",
    "fusion_nb/mcp/uvicorn_server.py": "uvicorn serves on asyncio",
    "fusion_nb/mcp/_uvicorn.py": "uvicorn's protocols",
    "fusion_nb/redis_tasks.py": "redis.asyncio's client",
    "fusion_nb/jupyter_server_extension.py": "jupyter_server's tornado loop",
    "fusion_nb/dask.py": "distributed's client (trio refused through current_backend().name)",
}


def branching_lines(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Each code line of ``paths`` that looks like telling asyncio from trio (docstrings and comments left out)."""
    return [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in paths
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BRANCHING.search(line.split("#")[0]) and not line.lstrip().startswith(('"', "``", "#"))
    ]


def test_no_module_outside_the_backends_branches_on_the_backend():
    checked = [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if "_backends" not in path.parts
        and not any(path.relative_to(ROOT).as_posix().startswith(host) for host in ASYNCIO_HOSTS)
    ]
    assert branching_lines(checked) == []
    names = {path.relative_to(PACKAGE).as_posix() for path in checked}
    assert {"engine/_runner.py", "mcp/bounded.py", "mcp/streamable.py", "mcp/pipe.py"} <= names
    assert len(checked) > 40, "the scan must read the engine's and the MCP layer's modules"


def test_the_scan_sees_a_loop_detected_by_hand(tmp_path):
    """The scan itself: the idiom ``pipe.py`` used before the seam had ``watch_readable`` is caught."""
    module = tmp_path / "detects.py"
    module.write_text(
        '"""On asyncio a future per wait."""\n'
        "try:\n    loop = asyncio.get_running_loop()\nexcept RuntimeError:  # trio\n    loop = None\n"
        "anyio.get_current_task()  # asking anyio for the task is no branch\n"
    )
    assert branching_lines([module], tmp_path) == ["detects.py:3: loop = asyncio.get_running_loop()"]


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


async def test_a_read_watch_wakes_per_readable_wait_until_closed(anyio_backend_name):
    """One watch serves many waits (a pipe's reader); closed, it leaves nothing registered with the loop."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    try:
        watch = current_backend().watch_readable(read_fd)
        for byte in (b"a", b"b"):
            os.write(write_fd, byte)
            with anyio.fail_after(10):
                await watch.wait()
            assert os.read(read_fd, 1) == byte
        with anyio.move_on_after(0.05) as quiet:  # nothing written: it waits (a wake-up may be spurious)
            while True:
                await watch.wait()
                with pytest.raises(BlockingIOError):
                    os.read(read_fd, 1)
        assert quiet.cancelled_caught
        watch.close()
        watch.close()  # idempotent
        if anyio_backend_name == "asyncio":
            assert not asyncio.get_running_loop().remove_reader(read_fd), "the descriptor stayed registered"
    finally:
        os.close(read_fd)
        os.close(write_fd)


async def test_a_read_watch_calls_back_while_readable_until_paused_where_the_loop_can(anyio_backend_name):
    """asyncio runs the callback in its readiness turn (level-triggered); trio has no such callback: it says so."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    try:
        watch = current_backend().watch_readable(read_fd)
        read: list[bytes] = []
        called = anyio.Event()

        def on_readable() -> None:
            with suppress(BlockingIOError):
                read.append(os.read(read_fd, 1))
            if len(read) == 2:
                watch.pause()  # from inside the callback, as a pipe's reader hands over to its task
                called.set()

        if not watch.call_when_readable(on_readable):
            assert anyio_backend_name == "trio"
            watch.pause()  # a no-op
            return
        os.write(write_fd, b"ab!")
        with anyio.fail_after(10):
            await called.wait()
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        assert read == [b"a", b"b"]  # one byte per turn while readable, then paused with "!" unread
        with anyio.fail_after(10):
            await watch.wait()  # waiting works after the callbacks
        assert os.read(read_fd, 1) == b"!"
        watch.close()
        assert not asyncio.get_running_loop().remove_reader(read_fd), "the descriptor stayed registered"
    finally:
        os.close(read_fd)
        os.close(write_fd)


async def test_call_soon_runs_after_what_is_ready_now(anyio_backend_name):
    ran: list[str] = []
    current_backend().call_soon(lambda: ran.append("soon"))
    assert ran == []
    with anyio.fail_after(5):
        while not ran:
            await anyio.lowlevel.checkpoint()
    assert ran == ["soon"]
