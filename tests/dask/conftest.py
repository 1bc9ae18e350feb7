"""A real ``LocalCluster`` per kind (worker processes, and threads in this process), shared by a module.

distributed's ``Client`` runs on asyncio only, so these tests do too (one trio test
narrows ``anyio_backend`` itself). Each test gets a fresh app and, afterwards, checks that
nothing is left: no call, no background task, no task of ours on the loop, no thread
that was not there before, and no task or key on the cluster's scheduler.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import distributed
import pytest
from dask_work import local_cluster, rendezvous

from fusion_nb import Fusion

KINDS = ["processes", "threads"]


def scheduler_task_count(dask_scheduler: Any) -> int:
    """Run on the scheduler (``Client.run_on_scheduler``): how many tasks it still knows."""
    return len(dask_scheduler.tasks)


@pytest.fixture(scope="module", params=KINDS)
def dask_client(request: pytest.FixtureRequest) -> Iterator[distributed.Client]:
    """A plain (synchronous) client on a small LocalCluster: its own loop thread, as in a notebook."""
    with (
        local_cluster(n_workers=1, threads_per_worker=2, processes=request.param == "processes") as cluster,
        distributed.Client(cluster) as client,
    ):
        # Warm up: both worker threads started (the pool starts them lazily) and the client's comms open.
        a, b = (f"warm-{side}-{uuid.uuid4().hex[:8]}" for side in "ab")
        warm = client.map(rendezvous, [a, b], [b, a], pure=False)
        distributed.wait(warm, timeout=90)  # (a cluster that cannot run two tasks fails here, not by hanging)
        client.gather(warm)
        del warm
        for name in (a, b):
            distributed.Event(name, client=client).clear()
        yield client


async def drained(client: distributed.Client) -> None:
    """Wait (bounded) until the scheduler knows no task: every future released, nothing running."""
    with anyio.fail_after(20):
        while await anyio.to_thread.run_sync(client.run_on_scheduler, scheduler_task_count):
            await anyio.sleep(0.05)


@pytest.fixture
async def app(dask_client: distributed.Client) -> AsyncIterator[Fusion]:
    threads_before = set(threading.enumerate())
    app = Fusion("dask-test", grace=5.0)
    yield app
    # (the harness's own threads: anyio's pool for the tests' blocking Dask calls)
    new_threads = [
        t
        for t in set(threading.enumerate()) - threads_before
        if t.is_alive() and not t.name.startswith("AnyIO worker thread")
    ]
    assert not new_threads, f"threads left: {new_threads}"
    assert await app.wait_background(10), "background tasks did not finish"
    assert app.active_calls == [], f"calls still live: {app.active_calls}"
    assert app.stats().idle, f"the app still holds something: {app.stats()}"
    ours = [t for t in asyncio.all_tasks() if t.get_name().startswith("fusion-nb")]
    assert not ours, f"asyncio tasks left: {ours}"
    await drained(dask_client)
