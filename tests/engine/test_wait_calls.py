"""``App.wait_calls``: the engine's idle event, set as its last call settles (a drain waits on it)."""

from __future__ import annotations

import anyio
import pytest

from fusion_nb import Fusion

pytestmark = pytest.mark.anyio


async def test_wait_calls_returns_as_the_last_call_settles_and_times_out_while_one_runs():
    app = Fusion("idle")
    release = anyio.Event()

    @app.f.action("hold").handle
    async def hold(input, ctx):
        await release.wait()

    assert await app.wait_calls(0)  # no call: at once
    first, second = app.start("hold"), app.start("hold")
    assert not await app.wait_calls(0.05)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            waiters = [False, False]

            async def wait(index: int) -> None:
                waiters[index] = await app.wait_calls()

            group.start_soon(wait, 0)
            group.start_soon(wait, 1)
            release.set()
        assert waiters == [True, True]
        await first.wait()
        await second.wait()
    assert app.active_calls == []
