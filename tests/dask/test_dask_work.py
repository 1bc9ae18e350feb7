"""fusion_nb.dask on a real LocalCluster (worker processes and worker threads): progress, abort, errors.

The worker functions live in ``dask_work`` and coordinate with the tests through named
``distributed.Event`` objects, so every test waits for an event, never for a duration.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
import uuid
from typing import Any

import anyio
import distributed
import pytest
from dask_work import cooperative, fails, many_reports, report_then_wait, stubborn
from mcp import Client

from fusion_nb import Call, Fusion, ProgressEvent, respond
from fusion_nb import dask as fnb_dask
from fusion_nb.mcp import mcp_server

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


def on_dask_tool(
    app: Fusion,
    client: distributed.Client,
    fn: Any,
    name: str = "work",
    timeout: float | None = None,
    jobs: list[fnb_dask.DaskWork] | None = None,
) -> None:
    """A tool whose body runs ``fn(task, *args)`` on Dask, forwarding its progress and returning its result.

    Its string arguments ``a`` and ``b`` (optional) are ``fn``'s; ``jobs`` collects each call's ``DaskWork``.
    """
    builder = app.f.action(name).with_string("a", "first argument", optional=True)
    builder = builder.with_string("b", "second argument", optional=True)
    if timeout is not None:
        builder = builder.timeout(timeout)

    @builder.handle
    async def work(input, ctx):
        args = [value for value in (input.a, input.b) if value is not None]
        job = fnb_dask.run(ctx, fn, *args, client=client)
        if jobs is not None:
            jobs.append(job)
        async for event in job:
            yield event
        yield respond(await job)


def names(*parts: str) -> list[str]:
    """Fresh names for scheduler events, one per part, unique per test run."""
    token = uuid.uuid4().hex[:8]
    return [f"test-{part}-{token}" for part in parts]


async def event_wait(client: distributed.Client, name: str, timeout: float) -> bool:
    return bool(await anyio.to_thread.run_sync(distributed.Event(name, client=client).wait, timeout))


async def event_is_set(client: distributed.Client, name: str) -> bool:
    return bool(await anyio.to_thread.run_sync(distributed.Event(name, client=client).is_set))


async def event_set(client: distributed.Client, name: str) -> None:
    await anyio.to_thread.run_sync(distributed.Event(name, client=client).set)


async def event_forget(client: distributed.Client, *names: str) -> None:
    """Clear the test's events: the scheduler then drops them (no state left behind)."""
    for name in names:
        await anyio.to_thread.run_sync(distributed.Event(name, client=client).clear)


async def running(app: Fusion, tool: str, args: dict[str, str]) -> tuple[Call, list[ProgressEvent]]:
    """Start a call and wait for its first progress event: then its function runs on the worker."""
    seen: list[ProgressEvent] = []
    first = anyio.Event()

    def on_progress(event: ProgressEvent) -> None:
        seen.append(event)
        first.set()

    call = app.start(tool, args, on_progress=on_progress)
    with anyio.fail_after(30):
        await first.wait()
    return call, seen


async def test_progress_arrives_while_the_function_runs(app, dask_client):
    (go,) = names("go")
    on_dask_tool(app, dask_client, report_then_wait)
    call, seen = await running(app, "work", {"a": go})
    assert not call.settled, "the progress came only after the function had returned"
    assert seen[0] == ProgressEvent(10.0, "started")
    await event_set(dask_client, go)
    with anyio.fail_after(30):
        result = await call.wait()
    assert not result.is_error, result.error
    assert result.value == "done"
    assert seen[-1] == ProgressEvent(100.0, "finished")
    await event_forget(dask_client, go)


async def test_progress_is_coalesced_and_only_increases(app, dask_client):
    seen: list[float] = []
    on_dask_tool(app, dask_client, many_reports)
    with anyio.fail_after(30):
        result = await app.call("work", {"a": "5000"}, on_progress=lambda e: seen.append(e.percent))
    assert result.value == 5000
    assert seen[-1] == 100
    assert len(seen) < 500, f"{len(seen)} progress events for 10,000 reports"
    assert all(a <= b for a, b in itertools.pairwise(seen)), seen


async def test_abort_stops_a_cooperative_function_within_a_second(app, dask_client):
    (ended,) = names("ended")
    on_dask_tool(app, dask_client, cooperative)
    call, _ = await running(app, "work", {"a": ended})
    started = time.monotonic()
    call.cancel()
    assert call.settled and call.result is not None
    assert call.result.error is not None and call.result.error.code == "CANCELLED"
    assert await event_wait(dask_client, ended, 1.0), "the function did not stop within 1 s"
    assert time.monotonic() - started < 1.5
    with anyio.fail_after(10):
        await call.wait_stopped()
    await event_forget(dask_client, ended)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["plain-client", "asynchronous-client"])
async def test_an_abort_right_after_the_start_leaves_nothing_behind(app, dask_client, asynchronous):
    """Aborts after 0 to 11 loop turns (before the body runs, before the drive or the task starts, while it
    runs): each call settles CANCELLED and its body ends promptly, on either kind of client loop."""
    async with contextlib.AsyncExitStack() as stack:
        client = dask_client
        if asynchronous:
            address = dask_client.scheduler.address
            client = await stack.enter_async_context(distributed.Client(address, asynchronous=True))
        on_dask_tool(app, client, cooperative)
        for turns in range(12):
            (ended,) = names("ended")
            call = app.start("work", {"a": ended})
            for _ in range(turns):
                await anyio.sleep(0)
            call.cancel()
            assert call.result is not None and call.result.error is not None
            assert call.result.error.code == "CANCELLED"
            with anyio.fail_after(fnb_dask.STOP_TIMEOUT / 2):  # not the stop's own timeout: the drive ended
                await call.wait_stopped()
            await event_forget(dask_client, ended)


async def test_a_timeout_stops_a_cooperative_function_and_settles_timeout(app, dask_client):
    (ended,) = names("ended")
    on_dask_tool(app, dask_client, cooperative, timeout=1.0)
    with anyio.fail_after(30):
        result = await app.call("work", {"a": ended})
    assert result.error is not None and result.error.code == "TIMEOUT"
    assert await event_wait(dask_client, ended, 2.0), "the timeout did not stop the function"
    await event_forget(dask_client, ended)


async def test_abort_cancels_the_dask_future(app, dask_client):
    """The abort cancels the Dask future (the function, which never checks the stop, still runs)."""
    release, ended = names("release", "ended")
    jobs: list[fnb_dask.DaskWork] = []
    on_dask_tool(app, dask_client, stubborn, jobs=jobs)
    call, _ = await running(app, "work", {"a": release, "b": ended})
    (job,) = jobs
    processing = await anyio.to_thread.run_sync(dask_client.processing)
    assert [tuple(keys) for keys in processing.values()] == [(job.key,)]
    assert not job.cancelled
    call.cancel()
    with anyio.fail_after(10):
        await call.wait_stopped()  # the body's cleanup (cancel and stop) has run
    assert job.cancelled, "the Dask future was not cancelled"
    assert not await event_is_set(dask_client, ended)  # (the function itself runs on: it never checks)
    await event_set(dask_client, release)
    assert await event_wait(dask_client, ended, 30)
    await event_forget(dask_client, release, ended)


async def test_a_function_that_never_checks_the_stop_runs_to_its_end(app, dask_client):
    """The documented limit: the call settles CANCELLED at once, the worker runs the function on."""
    release, ended = names("release", "ended")
    on_dask_tool(app, dask_client, stubborn)
    call, _ = await running(app, "work", {"a": release, "b": ended})
    call.cancel()
    assert call.result is not None and call.result.error is not None
    assert call.result.error.code == "CANCELLED"
    with anyio.fail_after(10):
        await call.wait_stopped()  # the tool body has let go: the helper does not wait for the worker
    assert not await event_is_set(dask_client, ended), "the stubborn function was interrupted after all"
    await event_set(dask_client, release)
    assert await event_wait(dask_client, ended, 30), "the function did not run to its end"
    await event_forget(dask_client, release, ended)


async def test_a_worker_exception_is_an_internal_error_with_an_id(app, dask_client, caplog):
    on_dask_tool(app, dask_client, fails)
    with caplog.at_level(logging.ERROR, logger="fusion_nb"), anyio.fail_after(30):
        result = await app.call("work")
    error = result.error
    assert error is not None and error.code == "INTERNAL_ERROR"
    error_id = error.details["error_id"]
    assert error.message == f'Tool "work" failed with ValueError (error id {error_id}).'
    assert "secrets" not in str(error) and "db.ini" not in str(error.to_dict())
    logged = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged, "the error id is not in the server log"
    assert logged[0].exc_info is not None and "db.ini" in str(logged[0].exc_info[1])


async def test_the_result_comes_back_to_the_tool_body(app, dask_client):
    results: list[Any] = []

    @app.f.action("twice").handle
    async def twice(input, ctx):
        results.append(await fnb_dask.run(ctx, _add, 2, 3, client=dask_client))
        results.append(await fnb_dask.run(ctx, _add, 10, y=5, client=dask_client))
        return sum(results)

    with anyio.fail_after(30):
        result = await app.call("twice")
    assert results == [5, 15] and result.value == 20


def _add(task: fnb_dask.DaskTask, x: int, y: int = 0) -> int:
    return x + y


async def test_an_asynchronous_client_on_the_tools_own_loop(app, dask_client):
    """``Client(asynchronous=True)`` on the loop the tool runs on: the helper drives it in place."""
    (go,) = names("go")
    address = dask_client.scheduler.address
    async with distributed.Client(address, asynchronous=True) as client:
        on_dask_tool(app, client, report_then_wait)
        call, seen = await running(app, "work", {"a": go})
        await distributed.Event(go, client=client).set()
        with anyio.fail_after(30):
            result = await call.wait()
        assert result.value == "done" and seen[-1].percent == 100
        await distributed.Event(go, client=client).clear()


async def test_without_a_client_argument_the_default_client_runs_it(app, dask_client):
    assert distributed.default_client() is dask_client

    @app.f.action("default").handle
    async def default(input, ctx):
        return await fnb_dask.run(ctx, _add, 1, 2)

    with anyio.fail_after(30):
        result = await app.call("default")
    assert result.value == 3


async def test_a_closed_client_is_one_sentence(app, dask_client):
    other = await anyio.to_thread.run_sync(
        lambda: distributed.Client(dask_client.scheduler.address, set_as_default=False)
    )
    await anyio.to_thread.run_sync(other.close)

    @app.f.action("closed").handle
    async def closed(input, ctx):
        return await fnb_dask.run(ctx, _add, 1, client=other)

    result = await app.call("closed")
    assert result.error is not None and result.error.code == "DASK_UNAVAILABLE"
    assert result.error.message == 'Tool "closed" cannot run its work on Dask: its Dask client is closed.'


async def test_through_mcp_progress_result_and_cancel_by_the_client(app, dask_client):
    """The official SDK client, in memory: progress notifications, the result, and its cancel stops the work."""
    go, ended = names("go", "ended")
    on_dask_tool(app, dask_client, report_then_wait)
    on_dask_tool(app, dask_client, cooperative, name="forever")

    seen: list[float] = []
    first = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)
        first.set()

    async with Client(mcp_server(app)) as client:
        async with anyio.create_task_group() as group:
            results: list[Any] = []

            async def calling() -> None:
                results.append(await client.call_tool("work", {"a": go}, progress_callback=on_progress))

            group.start_soon(calling)
            with anyio.fail_after(30):
                await first.wait()
            await event_set(dask_client, go)
        (result,) = results
        assert not result.is_error and result.content[0].text == "done"
        assert seen[0] == 10 and seen[-1] == 100

        running = anyio.Event()

        async def on_forever(value: float, total: float | None, message: str | None) -> None:
            running.set()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: client.call_tool("forever", {"a": ended}, progress_callback=on_forever))
                await running.wait()
                group.cancel_scope.cancel()  # the client cancels its request
        assert await event_wait(dask_client, ended, 5.0), "the client's cancel did not stop the function"
    await event_forget(dask_client, go, ended)
