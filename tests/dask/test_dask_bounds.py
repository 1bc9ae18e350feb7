"""fusion_nb.dask at its edges: the cluster going away mid-call, trio, no client, no distributed."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import anyio
import distributed
import pytest
from dask_work import local_cluster, sleeps

from fusion_nb import Fusion, respond
from fusion_nb import dask as fnb_dask

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


DEFAULT_DASHBOARD = 8787  # distributed's


@contextlib.contextmanager
def holding(port: int) -> Iterator[None]:
    """``port`` taken on every interface for the duration, as another cluster or a notebook would hold it."""
    with socket.socket() as sock:
        with contextlib.suppress(OSError):  # (already held by someone else: as good)
            sock.bind(("", port))
            sock.listen()
        yield


def test_the_test_clusters_start_while_something_holds_port_8787():
    """The suite runs beside a notebook's cluster, another engineer's run, or a parallel one of its own."""
    with holding(DEFAULT_DASHBOARD), local_cluster(n_workers=1, processes=False) as cluster:
        assert cluster.scheduler.http_server.port != DEFAULT_DASHBOARD


@pytest.fixture
def doomed() -> Iterator[tuple[distributed.LocalCluster, distributed.Client]]:
    """A cluster of its own, for the test that closes it under a call."""
    cluster = local_cluster(n_workers=1, threads_per_worker=1, processes=True)
    client = distributed.Client(cluster, set_as_default=False)
    try:
        yield cluster, client
    finally:
        client.close()
        cluster.close()


def sleeper_tool(app: Fusion, client: distributed.Client | None) -> None:
    @app.f.action("sleeper").handle
    async def sleeper(input, ctx):
        job = fnb_dask.run(ctx, sleeps, 120, client=client)
        async for event in job:
            yield event
        yield respond(await job)


async def test_the_cluster_closed_under_a_call_is_one_sentence(doomed):
    cluster, client = doomed
    app = Fusion("doomed")
    sleeper_tool(app, client)
    running = anyio.Event()
    call = app.start("sleeper", on_progress=lambda e: running.set())
    with anyio.fail_after(30):
        await running.wait()
    async with anyio.create_task_group() as group:
        group.start_soon(anyio.to_thread.run_sync, cluster.close)
        with anyio.fail_after(30):  # no hang: the nanny kills the busy worker, then the scheduler goes
            result = await call.wait()
    assert result.error is not None and result.error.code == "DASK_UNAVAILABLE"
    assert (
        result.error.message
        == 'Tool "sleeper" cannot run its work on Dask: the Dask cluster went away while it ran this call.'
    )
    again = await app.call("sleeper")  # and every call after it, at once
    assert again.error is not None and again.error.code == "DASK_UNAVAILABLE"
    assert await app.wait_background(10)


async def unavailable(app_name: str) -> str:
    """The error message of a call to a Dask tool with no client given; its code must be DASK_UNAVAILABLE."""
    app = Fusion(app_name)
    sleeper_tool(app, None)
    result = await app.call("sleeper")
    assert result.error is not None and result.error.code == "DASK_UNAVAILABLE"
    return result.error.message


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_on_trio_it_is_one_sentence(anyio_backend):
    assert await unavailable("trio") == (
        'Tool "sleeper" cannot run its work on Dask: fusion_nb.dask runs on asyncio only '
        "(distributed's Client is asyncio-only) and this server runs on trio."
    )


async def test_without_any_client_it_is_one_sentence():
    with pytest.raises(ValueError):
        distributed.default_client()  # (no other test's client is alive here)
    assert await unavailable("nowhere") == (
        'Tool "sleeper" cannot run its work on Dask: no Dask client was given and none is running.'
    )


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )


def test_import_fusion_nb_does_not_import_distributed():
    done = run_python(
        """
        import sys
        import fusion_nb, fusion_nb.engine
        print("distributed" in sys.modules, "dask" in sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_without_distributed_the_import_names_the_extra():
    done = run_python(
        """
        import sys
        sys.modules["distributed"] = None  # as if the dask extra were not installed
        import fusion_nb
        try:
            import fusion_nb.dask
        except ImportError as exc:
            print(exc)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "fusion_nb.dask needs Dask's distributed scheduler, which is not installed: pip install 'fusion-nb[dask]'."
    )


def test_a_bad_total_is_one_sentence():
    task = fnb_dask.DaskTask("key", "topic")  # (off a worker: reports go nowhere)
    with pytest.raises(ValueError, match=r"^task.report\(\): total must be a positive number, got 0.$"):
        task.report(1, 0)
    task.report(50)  # a percentage
    assert not task.stopped()
