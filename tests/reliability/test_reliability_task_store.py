"""Attacks on the Redis task store with real workers (issue 44, 2 and 11): a frozen worker.

Two ``fusion-nb serve task_app --task-store redis://...`` workers (A, B) behind the
shipped nginx config, Debian's ``redis-server``, a lease of 1 s. Each attack records
its figures (``FIGURES.attack``), printed every run.

* frozen worker: A is stopped with SIGSTOP past its lease while its tasks run; B
  declares them stopped; A is resumed with SIGCONT. Every task must stay terminal
  exactly once as B first said (before: A overwrote ``failed`` with ``completed`` and
  the real result, after running the work on), A must stop its tasks (their cleanup
  runs), and a client that retried on B must not see the job done twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from reliability_support import FIGURES

sys.path.insert(0, str(Path(__file__).parent.parent / "cli"))
sys.path += [str(Path(__file__).parent.parent / "mcp"), str(Path(__file__).parent.parent / "redis")]

from eras import client_for  # tests/mcp: the SDK clients of both eras
from mcp import types
from served import served
from tasks_client import Tasks as TasksExtension
from tasks_client import listen_request
from test_redis_tasks import FINAL, LEASE, STOPPED, TOKEN, Modern, WireError, read_mark, topology  # the CLI wire
from test_shared_tasks import two_workers  # tests/redis: two workers in this process on one Redis

from fusion_nb.mcp import mcp_server

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # the subject is the servers


def ending(task: dict) -> tuple:
    """What a 2026 ``tasks/get`` says of a task's end: status, message, and whether its result is an error."""
    result = task.get("result") or {}
    return task["status"], task.get("statusMessage"), bool(result.get("isError"))


def reopened_after_end(states: list[tuple]) -> bool:
    """Whether a task read as not final after it was first read final."""
    first = next((index for index, state in enumerate(states) if state[0] in FINAL), len(states))
    return any(state[0] not in FINAL for state in states[first:])


@pytest.mark.timeout(300)
async def test_a_worker_frozen_past_its_lease_never_rewrites_an_end_nor_runs_on(tmp_path, redis):
    async with topology(tmp_path, redis) as (a, b, _url, http):
        on_a, on_b = Modern(http, a.url), Modern(http, b.url)
        logs = [tmp_path / f"work{index}.log" for index in range(3)]
        works = [await on_a.start("work", n=200, delay=0.05, log=str(log)) for log in logs]  # 10 s each
        held = await on_a.start("hold", mark=str(tmp_path / "hold.mark"))
        ids = [*works, held]
        with anyio.fail_after(30):
            while not all(log.exists() for log in logs):
                await anyio.sleep(0.05)
        for task_id in ids:
            await on_b.until(task_id, "working")

        seen: dict[str, list[tuple]] = {task_id: [] for task_id in ids}  # what B said, poll by poll

        async def watch(client: Modern) -> None:
            while True:
                for task_id in ids:
                    seen[task_id].append(ending(await client.get(task_id)))
                await anyio.sleep(0.05)

        os.kill(a.process.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(watch, on_b)
                with anyio.fail_after(10 * LEASE + 10):
                    while not all(seen[task_id] and seen[task_id][-1][0] in FINAL for task_id in ids):
                        await anyio.sleep(0.05)
                declared_in = time.monotonic() - stopped_at
                retries = [await on_b.start("work", n=3, log=str(tmp_path / f"retry{i}.log")) for i in range(3)]
                os.kill(a.process.pid, signal.SIGCONT)
                resumed = time.time()
                await read_mark(tmp_path / "hold.mark")  # A stopped its tasks: the cleanup ran there
                await on_b.until(retries[-1], *FINAL)
                group.cancel_scope.cancel()
        finally:
            os.kill(a.process.pid, signal.SIGCONT)
        answers = {task_id: {ending(await client.get(task_id)) for client in (on_a, on_b)} for task_id in ids}
        retried = [ending(await on_b.get(task_id)) for task_id in retries]

    def steps(log: Path) -> list[str]:
        return log.read_text().splitlines() if log.exists() else []

    ran_on = sum(1 for log in logs for line in steps(log) if float(line.split()[1]) > resumed)
    done_twice = sum(1 for log in logs if steps(log)[-1:] and steps(log)[-1].endswith("done"))
    rewritten = sum(1 for task_id in ids if len({state for state in seen[task_id] if state[0] in FINAL}) > 1)
    reopened = sum(1 for task_id in ids if reopened_after_end(seen[task_id]))
    FIGURES.attack(
        "worker frozen past its lease",
        tasks=len(ids),
        declared_stopped_s=round(declared_in, 2),
        ends_rewritten=rewritten,
        ends_reopened=reopened,
        steps_run_after_resume=ran_on,
        run_twice=done_twice,
        a_and_b_disagree=sum(1 for states in answers.values() if len(states) != 1),
    )
    for task_id in ids:
        assert answers[task_id] == {(s := seen[task_id][-1])}, (task_id, answers[task_id], s)
        assert s[1] == STOPPED and (s[0] == "failed" or s[2]), s
    assert rewritten == reopened == done_twice == 0
    assert [state[0] for state in retried] == ["completed"] * 3 and not any(state[2] for state in retried)


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_a_running_task_at_its_ttl_is_stopped_before_its_record_goes(tmp_path, request, store):
    """Issue 44, 11: ``brief`` (ttl 1.5 s, a 0.5 s cleanup) polled until it is gone; nobody cancels it.

    Before: in memory the poll at the ttl removed it while its cleanup ran on (2 to 6 s of
    code nobody could see); with Redis the record expired at the ttl on every worker while
    the code ran on in its worker until something there swept it. Now the worker stops it
    at the ttl and the record goes only once the cleanup has run.
    """
    mark = tmp_path / "brief.mark"
    async with contextlib.AsyncExitStack() as stack:
        if store == "redis":
            _a, b, _url, http = await stack.enter_async_context(topology(tmp_path, request.getfixturevalue("redis")))
            runs_on, polled_on = Modern(http, _a.url), Modern(http, b.url)
        else:
            worker = await stack.enter_async_context(served("task_app", env={"FUSION_NB_TOKEN": TOKEN}))
            http = await stack.enter_async_context(httpx.AsyncClient(timeout=httpx.Timeout(30)))
            runs_on = polled_on = Modern(http, worker.url)
        task_id = await runs_on.start("brief", mark=str(mark))
        started = time.time()
        states: list[str] = []
        with anyio.fail_after(60):
            while True:
                try:
                    states.append((await polled_on.get(task_id))["status"])
                except WireError as error:
                    assert "no task" in error.message, error.message
                    gone = time.time()
                    break
                await anyio.sleep(0.05)
            cleaned_when_gone = mark.exists()
            ended = float((await read_mark(mark)).split()[1])
    FIGURES.attack(
        f"running task at its ttl ({store})",
        ttl_s=1.5,
        record_went_after_s=round(gone - started, 2),
        cleanup_ended_after_s=round(ended - started, 2),
        code_ran_unseen_s=round(max(0.0, ended - gone), 2),
    )
    assert cleaned_when_gone, f"the record went {ended - gone:.2f} s before the cleanup ended"
    assert states[-1] == "cancelled" or states[-1] == "completed", states[-3:]


@pytest.mark.timeout(300)
async def test_redis_restarted_empty_loses_no_task(tmp_path, redis):
    """Issue 44, 4: Redis killed and started again empty under an ended, a running and an asking task.

    Before, the tasks that did not change (ended, a long step, a question waiting) existed
    only on their own worker: the other answered "there is no task" to get, cancel and
    update. Now every worker writes its tasks back within a third of its lease, and until
    then a worker that misses one says so in one sentence.
    """
    async with topology(tmp_path, redis) as (a, b, url, http):
        on_a, on_b, balanced = Modern(http, a.url), Modern(http, b.url), Modern(http, url)
        ended = await on_a.start("work", n=0)
        running = await on_a.start("hold", mark=str(tmp_path / "hold.mark"))
        asking = await on_a.start("confirm")
        await on_b.until(ended, *FINAL)
        await on_b.until(running, "working")
        await on_b.until(asking, "input_required")
        await anyio.to_thread.run_sync(redis.stop)
        await anyio.to_thread.run_sync(redis.start)  # empty: no persistence
        restarted = time.monotonic()
        lost = refused = 0
        sentences: set[str] = set()
        expected = {ended: "completed", running: "working", asking: "input_required"}
        for task_id, status in expected.items():
            for client in (on_b, balanced, on_a):
                with anyio.fail_after(30):
                    while True:
                        try:
                            seen = await client.get(task_id)
                        except WireError as error:
                            if "no task" in error.message:
                                lost += 1
                                raise AssertionError(f"lost after the restart: {error.message}") from None
                            refused += 1
                            sentences.add(error.message)
                            await anyio.sleep(0.1)
                            continue
                        assert seen["status"] == status, seen
                        break
        back_in = time.monotonic() - restarted
        (key,) = (await on_b.get(asking))["inputRequests"]
        answer = {key: {"action": "accept", "content": {"go": True}}}
        assert (await on_b.request("tasks/update", taskId=asking, inputResponses=answer))["resultType"] == "complete"
        assert (await on_b.until(asking, *FINAL))["status"] == "completed"
        await on_b.cancel(running)
        cleaned = await read_mark(tmp_path / "hold.mark")
    FIGURES.attack(
        "Redis restarted empty",
        tasks=len(expected),
        readable_everywhere_after_s=round(back_in, 2),
        said_in_one_sentence=refused,
        lost=lost,
    )
    assert cleaned.startswith("cleaned by ")
    for sentence in sentences:
        assert "\n" not in sentence and "restarted" in sentence, sentence


async def test_a_listen_streams_final_status_is_in_the_store_before_it_is_pushed(redis):
    """Issue 44, 5: a 2026 listen stream on A hears ``completed``; at once, B's ``tasks/get`` must agree.

    Before, A pushed the status from its live task while the write to Redis was still
    coalescing: 6 of 30 reads on the other worker right after still said ``working``.
    """
    rounds, agreed = 30, 0
    heard = TasksExtension()
    async with (
        two_workers(redis.url) as (a, b, _),
        client_for(mcp_server(a.app), "2026-stream", extensions=[heard]) as client,
    ):
        for _ in range(rounds):
            task = await a.start(None, "train", {"steps": 3})
            async with anyio.create_task_group() as group:

                async def listen(task_id: str = task.id) -> None:
                    await client.session.send_request(listen_request([task_id]), types.SubscriptionsListenResult)

                group.start_soon(listen)
                with anyio.fail_after(10):
                    await heard.hear(task.id, "completed")
                other = await b.find(None, task.id)
                agreed += other is not None and other.status == "completed"
                group.cancel_scope.cancel()
    FIGURES.attack("listen final, get elsewhere", rounds=rounds, consistent=agreed)
    assert agreed == rounds
