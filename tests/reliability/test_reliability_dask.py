"""A Dask worker killed while it runs a tool's function (issue 44, 7): the function runs at most once.

A ``LocalCluster`` of two worker processes (free ports, no dashboard). The function marks
its entry (its pid) and waits; the worker running it is killed with SIGKILL. Before, Dask
ran it again on the other worker and the tool answered ok: entered on two pids. Now the
rescheduled run finds the first run's claim and does not start, and the call fails in one
sentence naming the lost worker.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path

import anyio
import distributed
import pytest
from reliability_support import FIGURES

sys.path.insert(0, str(Path(__file__).parent.parent / "dask"))

from dask_work import entered_then_wait, local_cluster  # tests/dask: imported by the worker processes too

from fusion_nb import Fusion, respond
from fusion_nb import dask as fnb_dask

# distributed's Client is asyncio-only
pytestmark = [pytest.mark.reliability, pytest.mark.anyio, pytest.mark.asyncio_only]


def claims_left(dask_scheduler) -> dict:
    """On the scheduler: the at-most-once claims it still holds."""
    return dict(dask_scheduler.task_metadata.get("fusion-nb-started", {}))


@pytest.mark.timeout(300)
async def test_a_killed_dask_worker_does_not_run_the_function_twice(tmp_path):
    marks, go = tmp_path / "entered", f"go-{uuid.uuid4().hex[:8]}"

    def start() -> tuple[object, object]:
        cluster = local_cluster(n_workers=2, threads_per_worker=1, processes=True)
        return cluster, distributed.Client(cluster, set_as_default=False)

    cluster, client = await anyio.to_thread.run_sync(start)
    try:
        app = Fusion("dask-once", grace=5.0)

        @app.f.action("once").handle
        async def once(input, ctx):
            work = fnb_dask.run(ctx, entered_then_wait, str(marks), go, client=client)
            yield respond({"pid": await work})

        call = app.start("once", {})
        with anyio.fail_after(60):
            while not marks.exists() or not marks.read_text().strip():
                await anyio.sleep(0.05)
        first = int(marks.read_text().split()[0])
        os.kill(first, signal.SIGKILL)
        with anyio.move_on_after(60):  # the call ends (now), or the rescheduled run enters (before)
            while call.result is None and len(marks.read_text().split()) < 2:
                await anyio.sleep(0.05)
        await anyio.to_thread.run_sync(lambda: distributed.Event(go, client=client).set())
        with anyio.fail_after(60):
            result = await call.wait()
        entered = marks.read_text().split()
        await anyio.to_thread.run_sync(lambda: distributed.Event(go, client=client).clear())
        claims = await anyio.to_thread.run_sync(client.run_on_scheduler, claims_left)
        await app.aclose()
    finally:
        await anyio.to_thread.run_sync(client.close)
        await anyio.to_thread.run_sync(cluster.close)
    message = result.error.message if result.error is not None else ""
    FIGURES.attack(
        "Dask worker killed mid-function",
        entered=len(entered),
        pids=len(set(entered)),
        answered=result.error.code if result.error is not None else "ok",
    )
    assert entered == [str(first)], f"the function was entered on {entered}"
    assert claims == {}, claims  # forgotten once the call ended: nothing left on the scheduler
    assert result.error is not None and result.error.code == "DASK_UNAVAILABLE", result
    assert "the worker tcp://127.0.0.1:" in message and "died" in message and "\n" not in message, message
