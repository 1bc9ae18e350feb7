"""Tasks shared through a real Redis by two workers in one process (``fusion_nb.redis_tasks``).

Each "worker" is its own app (same name, same tools) with its own ``Tasks``, as two
``fusion-nb serve`` processes are; only Redis connects them. A task started on A is
found, waited on, collected, answered and cancelled from B, its cleanup running on A;
a worker whose lease lapsed leaves its tasks failed; the bounds hold across workers;
an unreachable store is one sentence and never a hang. (The same through nginx and
real worker processes: ``tests/cli/test_redis_tasks.py``.)
"""

from __future__ import annotations

import contextlib

import anyio
import pytest
import redis.asyncio as aioredis
from eras import client_for
from mcp import types
from raw_peer import RawError, raw_peer
from tasks_client import DetailedTask, listen_request
from tasks_client import Tasks as TasksExtension

from fusion_nb import Fusion, ask, progress, read_input, require_input, respond
from fusion_nb.engine import InputResponse, TaskStatus, ToolError, tasks_of
from fusion_nb.mcp import enable_job_tools, mcp_server
from fusion_nb.mcp.tasks import detailed_task
from fusion_nb.redis_tasks import STOPPED, share_tasks, shown_url

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # the redis package's client is asyncio's


def worker_app(cleaned: anyio.Event | None = None) -> Fusion:
    app = Fusion("shared-tasks", grace=2.0)

    @app.f.action("train").with_integer("steps").task(poll_interval=0.05).handle
    async def train(input, ctx):
        for step in range(input.steps):
            yield progress((step + 1) / input.steps, f"step {step + 1}")
            await anyio.sleep(0.01)
        yield respond(f"trained {input.steps} steps")

    @app.f.action("stuck").task("required", poll_interval=0.05).handle
    async def stuck(input, ctx):
        try:
            yield progress(1, "entered")
            await anyio.sleep_forever()
        finally:
            if cleaned is not None:
                cleaned.set()

    @app.f.action("confirm").task(poll_interval=0.05).handle
    async def confirm(input, ctx):
        go = read_input("go")
        return f"go={go}" if go is not None else require_input.elicit("Go ahead?", {"go": ask.boolean("Proceed")})

    return app


@contextlib.asynccontextmanager
async def two_workers(url: str, *, lease: float = 15.0, cleaned: anyio.Event | None = None, **bounds: int):
    a, b = worker_app(cleaned), worker_app()
    for app in (a, b):
        for name, value in bounds.items():
            setattr(tasks_of(app), name, value)
    async with (
        share_tasks(a, url, lease=lease, worker="a") as store_a,
        share_tasks(b, url, lease=lease, worker="b") as store_b,
    ):
        yield tasks_of(a), tasks_of(b), store_a
        with anyio.fail_after(5):  # every change written, no wait left behind
            while store_a.waiters or store_b.waiters:
                await anyio.sleep(0.01)
    for app in (a, b):
        await app.aclose()
        assert app.active_calls == []


async def test_a_task_started_on_a_is_found_waited_on_and_collected_on_b(redis_server):
    async with two_workers(redis_server.url) as (a, b, _):
        task = await a.start("alice", "train", {"steps": 5})
        copy = await b.find("alice", task.id)
        assert copy is not None and copy.remote and copy.tool_name == "train"
        with anyio.fail_after(10):
            await copy.wait()
        assert copy.status == TaskStatus.COMPLETED and copy.status_message == "step 5"
        assert copy.result is not None and copy.result.content[0]["text"] == "trained 5 steps"
        assert [t.id for t in await b.find_all("alice")] == [task.id]
        assert await b.find("bob", task.id) is None and await b.find_all("bob") == []


async def test_a_cancel_on_b_aborts_the_call_on_a_and_its_cleanup_runs(redis_server):
    cleaned = anyio.Event()
    async with two_workers(redis_server.url, cleaned=cleaned) as (a, b, _):
        task = await a.start("alice", "stuck")
        copy = await b.find("alice", task.id)
        assert copy is not None
        while copy.status_message != "entered":
            await copy.wait_change()
        await b.stop(copy)
        with anyio.fail_after(5):
            await cleaned.wait()
            await copy.wait()
        assert task.status == copy.status == TaskStatus.CANCELLED


async def test_a_question_asked_on_a_is_answered_on_b(redis_server):
    async with two_workers(redis_server.url) as (a, b, _):
        task = await a.start("alice", "confirm")
        copy = await b.find("alice", task.id)
        assert copy is not None
        with anyio.fail_after(5):
            while copy.status != TaskStatus.INPUT_REQUIRED:
                await copy.wait_change()
        assert copy.question is not None and copy.question.request.message == "Go ahead?"
        assert copy.question.request.schema == task.question.request.schema  # the form survives the trip
        assert await b.respond(copy, "other", InputResponse("accept", {"go": True})) == (
            f'Task "{task.id}" (tool "confirm") asks for input "go", not "other".'
        )
        assert await b.respond(copy, "go", InputResponse("accept", {"go": True})) is None
        with anyio.fail_after(5):
            await copy.wait()
        assert copy.result is not None and copy.result.content[0]["text"] == "go=True"


async def test_the_tasks_of_a_worker_whose_lease_lapsed_turn_failed(redis_server):
    async with two_workers(redis_server.url, lease=60) as (a, b, store_a):  # (no renewal for 20 s)
        task = await a.start("alice", "stuck")
        with anyio.fail_after(5):
            while task.status_message != "entered":
                await task.wait_change()
        # every write of A's own task renews A's lease, so a write still queued when the key
        # is pulled would bring the lease back (the task then stays "working" on B)
        await store_a.written(task)
        async with aioredis.Redis.from_url(redis_server.url) as raw:  # as if A died: its lease key lapses
            assert await raw.delete(f"fusion-nb:shared-tasks:worker:{store_a.worker}") == 1
        copy = await b.find("alice", task.id)
        assert copy is not None and copy.status == TaskStatus.FAILED and copy.status_message == STOPPED
        again = await b.find_all("alice")
        assert [(t.id, t.status) for t in again] == [(task.id, TaskStatus.FAILED)]
        detailed = detailed_task(copy, b)  # what a 2026 tasks/get inlines: why, not "no result"
        assert detailed["status"] == "failed" and "result" not in detailed  # (SEP-2663: a protocol-level failure)
        assert detailed["error"] == {"code": -32603, "message": STOPPED}
        await a.stop(task)


async def test_a_worker_whose_lease_lapsed_stops_its_tasks_and_never_rewrites_their_end(redis_server):
    """Fencing (issue 44, 2): B declared A's task stopped; A, carrying on, may not overwrite that.

    Before, A's next writes turned the record back to ``working`` and then ``completed``
    with the real result (a terminal status changed, work reported stopped went on).
    Now A's next write is refused, A stops the task (its cleanup runs) and answers what
    B answers; A's later tasks run under a new lease.
    """
    cleaned = anyio.Event()
    async with two_workers(redis_server.url, lease=60, cleaned=cleaned) as (a, b, store_a):  # (no renewal)
        held = await a.start("alice", "stuck")
        task = await a.start("alice", "train", {"steps": 300})  # about 3 s of progress writes
        with anyio.fail_after(5):
            while held.status_message != "entered" or task.status_message is None:
                await task.wait_change()
        await store_a.written(task)
        await store_a.written(held)
        fenced = store_a.worker
        async with aioredis.Redis.from_url(redis_server.url) as raw:  # as if A froze past its lease
            assert await raw.delete(f"fusion-nb:shared-tasks:worker:{fenced}") == 1
        for seen in (await b.find("alice", task.id), await b.find("alice", held.id)):
            assert seen is not None and (seen.status, seen.status_message) == (TaskStatus.FAILED, STOPPED)
        with anyio.fail_after(10):  # A's next progress write is refused: A stops both
            await cleaned.wait()
            await task.wait()
            while not task.call.settled:
                await anyio.sleep(0.01)
        assert (task.status, task.status_message) == (TaskStatus.FAILED, STOPPED)
        assert task.call.status == "cancelled" and store_a.worker != fenced
        for task_id in (task.id, held.id):
            for worker in (a, b):
                seen = await worker.find("alice", task_id)
                assert seen is not None and seen.remote, task_id  # A answers from the store, as B does
                assert (seen.status, seen.status_message) == (TaskStatus.FAILED, STOPPED)
        later = await a.start("alice", "train", {"steps": 2})  # under A's new lease
        copy = await b.find("alice", later.id)
        assert copy is not None
        with anyio.fail_after(10):
            await copy.wait()
        assert copy.status == TaskStatus.COMPLETED


async def test_the_bounds_hold_across_workers(redis_server):
    async with two_workers(redis_server.url, max_per_owner=2, max_total=3) as (a, b, _):
        made = [await a.start("alice", "stuck"), await b.start("alice", "stuck")]
        with pytest.raises(ToolError, match="this client already holds 2 tasks"):
            await a.start("alice", "stuck")
        made.append(await b.start("bob", "stuck"))
        with pytest.raises(ToolError, match="this server already holds 3 tasks"):
            await a.start("carol", "stuck")
        for task in made:
            await (a if task in a else b).stop(task)


async def test_a_store_that_goes_away_is_one_sentence_and_local_tasks_still_answer(redis_server):
    async with two_workers(redis_server.url, lease=30) as (a, b, _):
        task = await a.start("alice", "stuck")
        redis_server.stop()
        with anyio.fail_after(10):
            assert await a.find("alice", task.id) is task  # A's own task: found without the store
            with pytest.raises(ToolError) as down:
                await b.find("alice", task.id)
            with pytest.raises(ToolError):
                await b.start("alice", "stuck")
        assert down.value.code == "TASK_STORE_UNAVAILABLE"
        assert down.value.message == f"The task store at {redis_server.url} cannot be reached (connection refused)."
        assert a.store.count() == 1 and b.store.count() == 0  # the refused start left nothing behind on B
        redis_server.start()  # empty: no persistence
        await a.stop(task)  # a change: A writes the task anew, as it writes every change
        with anyio.fail_after(10):
            while (copy := await b.find("alice", task.id)) is None:
                await anyio.sleep(0.05)
        assert copy.status == TaskStatus.CANCELLED and [t.id for t in await b.find_all("alice")] == [task.id]
        later = await a.start("alice", "stuck")  # and relays reach A again (its subscription came back)
        copy = await b.find("alice", later.id)
        assert copy is not None
        await b.stop(copy)
        with anyio.fail_after(10):
            await copy.wait()
        assert copy.status == TaskStatus.CANCELLED


async def test_an_unreachable_store_at_the_start_is_one_sentence_without_the_password():
    app = worker_app()
    with anyio.fail_after(10), pytest.raises(ToolError) as refused:
        async with share_tasks(app, "redis://:s3cret@127.0.0.1:1/0"):
            pass
    assert (
        refused.value.message == "The task store at redis://***@127.0.0.1:1/0 cannot be reached (connection refused)."
    )
    assert "s3cret" not in str(refused.value) and tasks_of(app).shared is None
    assert shown_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


async def test_both_wires_on_b_serve_a_task_that_runs_on_a(redis_server):
    """2025: created through A's wire, then got, listed, collected and cancelled through B's; 2026: got inline."""
    async with two_workers(redis_server.url) as (a, b, _):
        server_a, server_b = mcp_server(a.app), mcp_server(b.app)
        async with raw_peer(server_a) as on_a, raw_peer(server_b) as on_b:
            call = {"name": "train", "arguments": {"steps": 3}, "task": {"ttl": 60_000}}
            created = (await on_a.request("tools/call", call))["task"]
            seen = await on_b.request("tasks/get", {"taskId": created["taskId"]})
            assert seen["taskId"] == created["taskId"] and seen["status"] in ("working", "completed")
            with anyio.fail_after(10):
                collected = await on_b.request("tasks/result", {"taskId": created["taskId"]})
            assert collected["content"][0]["text"] == "trained 3 steps"
            assert collected["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": created["taskId"]}
            listed = (await on_b.request("tasks/list", {}))["tasks"]
            assert [(t["taskId"], t["status"]) for t in listed] == [(created["taskId"], "completed")]
            stuck = (await on_a.request("tools/call", {"name": "stuck", "arguments": {}, "task": {}}))["task"]
            answered = await on_b.request("tasks/cancel", {"taskId": stuck["taskId"]})
            assert (answered["taskId"], answered["status"]) == (stuck["taskId"], "cancelled")  # then answered
            with anyio.fail_after(10):
                while (await on_b.request("tasks/get", {"taskId": stuck["taskId"]}))["status"] != "cancelled":
                    await anyio.sleep(0.02)
            with pytest.raises(RawError, match="already ended"):
                await on_b.request("tasks/cancel", {"taskId": stuck["taskId"]})
        task = await a.start(None, "train", {"steps": 2})
        async with client_for(server_b, "2026-stream", extensions=[TasksExtension()]) as client:
            with anyio.fail_after(10):
                while True:
                    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.id))
                    detailed = await client.session.send_request(request, DetailedTask)
                    if detailed.status == "completed":
                        break
                    await anyio.sleep(0.02)
        assert detailed.result is not None and detailed.result["content"][0]["text"] == "trained 2 steps"


async def test_job_tools_on_b_wait_for_and_cancel_jobs_that_run_on_a(redis_server):
    cleaned = anyio.Event()
    async with two_workers(redis_server.url, cleaned=cleaned) as (a, b, _):
        for tasks in (a, b):
            enable_job_tools(tasks.app, wait=10)
        job = await a.start(None, "train", {"steps": 3})
        waited = await b.app.call("jobs.wait", {"job_id": job.id})
        assert waited.content[0]["text"] == "trained 3 steps"
        stuck = await a.start(None, "stuck")
        while stuck.status_message != "entered":
            await stuck.wait_change()
        cancelled = await b.app.call("jobs.cancel", {"job_id": stuck.id})
        assert cancelled.content[0]["text"] == f'Job {stuck.id} (tool "stuck") is cancelled.'
        with anyio.fail_after(5):
            await cleaned.wait()
        unknown = await b.app.call("jobs.wait", {"job_id": "nope"})
        assert unknown.is_error and 'There is no job "nope" for this client' in unknown.content[0]["text"]


async def test_a_2025_client_on_b_answers_the_question_of_a_task_on_a_through_tasks_result(redis_server):
    asked = []

    def person(method, params):
        asked.append((method, params["message"], params["_meta"]))
        return {"action": "accept", "content": {"go": True}}

    async with two_workers(redis_server.url) as (a, b, _):
        async with (
            raw_peer(mcp_server(a.app), elicitation={"form": {}}) as on_a,
            raw_peer(mcp_server(b.app), person, elicitation={"form": {}}) as on_b,
        ):
            created = (await on_a.request("tools/call", {"name": "confirm", "arguments": {}, "task": {}}))["task"]
            with anyio.fail_after(10):
                final = await on_b.request("tasks/result", {"taskId": created["taskId"]})
        assert final["content"] == [{"type": "text", "text": "go=True"}]
        related = {"io.modelcontextprotocol/related-task": {"taskId": created["taskId"]}}
        assert asked == [("elicitation/create", "Go ahead?", related)]


async def test_a_2026_listen_stream_on_b_hears_a_task_on_a_work_and_complete(redis_server):
    heard = TasksExtension()
    async with two_workers(redis_server.url) as (a, b, _):
        task = await a.start(None, "train", {"steps": 50})
        server_b = mcp_server(b.app)
        async with (
            client_for(server_b, "2026-stream", extensions=[heard]) as client,
            anyio.create_task_group() as group,
        ):

            async def listen() -> None:
                await client.session.send_request(listen_request([task.id]), types.SubscriptionsListenResult)

            group.start_soon(listen)
            with anyio.fail_after(10):
                first = await heard.hear(task.id, "working")  # followed while it runs on A
                done = await heard.hear(task.id, "completed")
            progressed = {h.status_message for h in heard.heard if h.status == "working"} - {None}
            assert first.result is None and progressed, heard.heard  # its progress, coalesced
            assert done.result is not None and done.result["content"][0]["text"] == "trained 50 steps"
            group.cancel_scope.cancel()
        with anyio.fail_after(10):
            while server_b.task_listen.watching:
                await anyio.sleep(0.01)


async def test_what_a_worker_answered_for_its_own_task_every_worker_answers_next(redis_server):
    """Read-your-writes across the load balancer: completed on A, then never working on B."""
    async with two_workers(redis_server.url) as (a, b, _):
        for _ in range(5):
            task = await a.start("alice", "train", {"steps": 1})
            await task.wait()  # (A's write of it is coalesced: not in Redis yet)
            assert (await a.find("alice", task.id)).status == TaskStatus.COMPLETED  # what A answers...
            copy = await b.find("alice", task.id)
            assert copy is not None and copy.status == TaskStatus.COMPLETED  # ...B answers right after


async def test_a_tasks_list_page_through_b_reads_one_page_of_records_from_redis(redis_server):
    """One page costs its own records (Redis' keyspace hits), not the owner's other tasks nor another owner's."""
    async with two_workers(redis_server.url, lease=60.0, max_per_owner=100) as (a, b, store_a):
        made = [await a.start(None, "train", {"steps": 1}) for _ in range(25)]
        others = [await a.start("bob", "train", {"steps": 1}) for _ in range(40)]
        for task in [*made, *others]:  # (settled and written: no write of theirs runs while pages are counted)
            with anyio.fail_after(10):
                await task.wait()
            await store_a.written(task)
        watcher = aioredis.from_url(redis_server.url, decode_responses=True)
        pages, params, reads = [], {}, []
        async with raw_peer(mcp_server(b.app, page_size=10)) as peer:
            while True:
                before = (await watcher.info("stats"))["keyspace_hits"]
                page = await peer.request("tasks/list", params)
                reads.append((await watcher.info("stats"))["keyspace_hits"] - before)
                pages.append([task["taskId"] for task in page["tasks"]])
                if "nextCursor" not in page:
                    break
                params = {"cursor": page["nextCursor"]}
            with pytest.raises(RawError, match=r"^tasks/list: the cursor 'forged' is not one this server gave"):
                await peer.request("tasks/list", {"cursor": "forged"})
        await watcher.aclose()
        listed = [task_id for page in pages for task_id in page]
        assert [len(page) for page in pages] == [10, 10, 5]
        assert sorted(listed) == sorted(task.id for task in made)
        assert max(reads) <= 10 + 5  # the page's 10 records, the index, a lease: never the 25 or bob's 40
