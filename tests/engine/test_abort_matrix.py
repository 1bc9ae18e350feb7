"""The abort matrix: every stage a call can be stuck in x every handler kind x both ways to abort.

Stages: queued behind a concurrency limit, waiting on a mutation's serializer, inside a
middleware, the handler's first step (before any yield), mid-stream (after a progress),
waiting for input from a channel that never answers. Handler kinds: async, async
generator, sync, sync generator (a sync body is "stuck" cooperatively: it polls
``ctx.signal`` every few ms, as the docs tell authors to). Aborts: ``call.cancel()``, or
cancelling the task that awaits the call. Modes: detached (``start``) and inline
(``app.run(request)``, run by its awaiting task). Every combination must settle
CANCELLED, run the cleanup it reached, and leave the app exactly as idle as before: no
call, slot, serializer, background task, thread or body still running
(``app.stats()``, TEAM.md item 7). Combinations that cannot exist (progress from a
handler that cannot yield) are not generated. Driven by events; a few-ms poll is used
only where a worker thread reports to the loop.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from engine_helpers import assert_idle, fusion_tasks, start_inline, until

from fusion_nb import Fusion
from fusion_nb.engine import CANCELLED, Call, InputChannel, ask, progress, require_input, respond

pytestmark = pytest.mark.anyio

STAGES = ("queued", "serializer", "middleware", "first_step", "mid_stream", "input")
KINDS = ("async", "async_gen", "sync", "sync_gen")
ABORTS = ("cancel_call", "cancel_waiter")
MODES = ("detached", "inline")
#: what must have been cleaned up once the aborted call is gone, per stage
CLEANUP = {
    "queued": [],
    "serializer": [],
    "middleware": ["middleware"],
    "first_step": ["handler"],
    "mid_stream": ["handler"],
    "input": ["handler", "channel"],
}


def applicable(stage: str, kind: str) -> bool:
    """Only a generator can be stuck after a progress event (a plain handler cannot yield one)."""
    return stage != "mid_stream" or kind.endswith("_gen")


CASES = [
    pytest.param(stage, kind, abort, mode, id=f"{stage}-{kind}-{abort}-{mode}")
    for stage in STAGES
    for kind in KINDS
    if applicable(stage, kind)
    for abort in ABORTS
    for mode in MODES
]


async def warm_thread_pool(threads: int = 3) -> None:
    """Start enough worker threads that the test's own bodies need no new ones (idle workers live on).

    Sync bodies run on the engine's process-wide workers, so a throwaway app's
    concurrent sync calls warm the same threads the app under test will use; the
    backend's own pool (trio's thread cache, which the loop may use for itself) is
    warmed too.
    """
    barrier = threading.Barrier(threads)
    async with anyio.create_task_group() as group:
        for _ in range(threads):
            group.start_soon(anyio.to_thread.run_sync, barrier.wait, 5)
    barrier = threading.Barrier(threads)
    warmer = Fusion("warm-up")
    warmer.f.action("wait").handle(lambda input, ctx: barrier.wait(5))
    calls = [warmer.start("wait", {}) for _ in range(threads)]
    for call in calls:
        assert not (await call.wait()).is_error


@pytest.fixture
async def matrix_app() -> AsyncIterator[Fusion]:
    """A fresh app, checked afterwards for anything left (calls, slots, tasks, threads)."""
    app = Fusion("matrix", grace=2.0)
    yield app
    assert await app.wait_background(5), "background tasks did not finish"
    assert_idle(app)
    assert fusion_tasks() == []


# -- the scenario --------------------------------------------------------------------------


@dataclass
class Probe:
    """What the tool's pieces report; thread-safe (threading events, list appends)."""

    body_started: threading.Event = field(default_factory=threading.Event)
    stuck: threading.Event = field(default_factory=threading.Event)
    exited: threading.Event = field(default_factory=threading.Event)
    blocker_in: threading.Event = field(default_factory=threading.Event)
    in_middleware: threading.Event = field(default_factory=threading.Event)
    asked: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    tick: threading.Event = field(default_factory=threading.Event)  # set only to free bodies of a failed test
    cleanup: list[str] = field(default_factory=list)
    release_async: anyio.Event = field(default_factory=anyio.Event)

    def done(self, what: str) -> None:
        self.cleanup.append(what)
        if what == "handler":
            self.exited.set()


class NeverAnswers(InputChannel):
    """An input channel whose person never answers; records that its wait was cleaned up."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def ask(self, *question: Any, **more: Any) -> Any:
        """Wait forever (until the call is aborted); the signature takes any form of the question."""
        try:
            self.probe.asked.set()
            await anyio.sleep_forever()
        finally:
            self.probe.done("channel")


def confirm_request() -> Any:
    """The input request every handler kind returns in the "input" stage."""
    return require_input.elicit("Go ahead?", {"ok": ask.boolean("Confirm")})


def make_handler(kind: str, stage: str, probe: Probe) -> Callable[..., Any]:
    """A handler of ``kind`` whose victim call gets stuck at ``stage``; a blocker call waits for release."""
    if kind == "async":

        async def handler(input: Any, ctx: Any) -> Any:
            if input.role == "blocker":
                probe.blocker_in.set()
                await probe.release_async.wait()
                return "blocker"
            probe.body_started.set()
            try:
                if stage == "input":
                    return confirm_request()
                probe.stuck.set()
                await anyio.sleep_forever()
            finally:
                probe.done("handler")

        return handler
    if kind == "async_gen":

        async def agen(input: Any, ctx: Any) -> Any:
            if input.role == "blocker":
                probe.blocker_in.set()
                await probe.release_async.wait()
                yield respond("blocker")
                return
            probe.body_started.set()
            try:
                if stage == "input":
                    yield respond(confirm_request())
                    return
                if stage == "mid_stream":
                    yield progress(50, "half way")
                probe.stuck.set()
                await anyio.sleep_forever()
            finally:
                probe.done("handler")

        return agen
    if kind == "sync":

        def sync(input: Any, ctx: Any) -> Any:
            if input.role == "blocker":
                probe.blocker_in.set()
                probe.release.wait(10)
                return "blocker"
            probe.body_started.set()
            try:
                if stage == "input":
                    return confirm_request()
                probe.stuck.set()
                while not probe.tick.wait(0.005):  # cooperative: stops at the first poll after the abort
                    ctx.signal.raise_if_aborted()
            finally:
                probe.done("handler")

        return sync

    def sgen(input: Any, ctx: Any) -> Any:
        if input.role == "blocker":
            probe.blocker_in.set()
            probe.release.wait(10)
            yield respond("blocker")
            return
        probe.body_started.set()
        try:
            if stage == "input":
                yield respond(confirm_request())
                return
            if stage == "mid_stream":
                yield progress(50, "half way")
            probe.stuck.set()
            while not probe.tick.wait(0.005):
                ctx.signal.raise_if_aborted()
        finally:
            probe.done("handler")

    return sgen


def register(app: Fusion, stage: str, kind: str, probe: Probe) -> None:
    """The tool under test: limited, serialized or wrapped in a stuck middleware, as ``stage`` needs."""
    builder = (app.f.mutation if stage == "serializer" else app.f.action)("victim").with_string("role")
    if stage == "queued":
        builder = builder.concurrency(1, 4)
    if stage == "middleware":

        async def stuck_middleware(ctx: Any, call_next: Callable[[], Any]) -> Any:
            try:
                probe.in_middleware.set()
                await anyio.sleep_forever()
                return await call_next()
            finally:
                probe.done("middleware")

        builder = builder.use(stuck_middleware)
    builder.handle(make_handler(kind, stage, probe))


async def reach(stage: str, call: Call, probe: Probe) -> None:
    """Return once the victim call is stuck exactly at ``stage``."""
    if stage in ("queued", "serializer"):
        await anyio.wait_all_tasks_blocked()
        assert call.status == ("queued" if stage == "queued" else "running")
    elif stage == "middleware":
        await until(probe.in_middleware.is_set)
    elif stage == "input":
        await until(lambda: probe.asked.is_set() and call.status == "waiting")
    else:
        await until(probe.stuck.is_set)
        if stage == "mid_stream":
            await until(lambda: call.progress is not None)
            assert call.progress is not None and call.progress.percent == 50
    assert not call.settled


@pytest.mark.parametrize(("stage", "kind", "abort", "mode"), CASES)
async def test_abort_matrix(matrix_app: Fusion, stage: str, kind: str, abort: str, mode: str) -> None:
    """One cell of the matrix; whatever fails, the probe lets every body and thread end."""
    probe = Probe()
    try:
        await abort_scenario(matrix_app, probe, stage, kind, abort, mode)
    finally:  # a failing case must not leave bodies or threads behind for the next one
        probe.release.set()
        probe.release_async.set()
        probe.tick.set()


async def abort_scenario(app: Fusion, probe: Probe, stage: str, kind: str, abort: str, mode: str) -> None:
    """Get a call stuck at ``stage``, abort it one way, then check it settled and left nothing behind."""
    await warm_thread_pool()
    threads_before = threading.active_count()
    register(app, stage, kind, probe)

    blocker = None
    if stage in ("queued", "serializer"):
        blocker = app.start("victim", {"role": "blocker"})
        await until(probe.blocker_in.is_set)

    request = app.request("victim", {"role": "victim"}, channel=NeverAnswers(probe))
    finals: list[str] = []

    async def waiter() -> None:
        await call.wait()

    async with anyio.create_task_group() as group:
        if mode == "inline":  # run by its awaiting task, as a transport runs it
            call = await start_inline(group, app, request)
        else:
            call = app.start(request)
            if abort == "cancel_waiter":
                group.start_soon(waiter)
        call.watch(lambda c: finals.append(str(c.status)) if c.settled else None)
        await reach(stage, call, probe)
        if abort == "cancel_call":
            assert call.cancel()
        else:
            group.cancel_scope.cancel()
    with anyio.fail_after(5):
        result = await call.wait()

    assert result.error is not None and result.error.code == CANCELLED, result
    assert call.status == "cancelled"

    probe.release.set()
    probe.release_async.set()
    if blocker is not None:
        with anyio.fail_after(5):
            assert not (await blocker.wait()).is_error
    assert await app.wait_background(5), "background tasks did not finish"

    # The engine only calls itself idle once every body has really stopped.
    if stage in ("first_step", "mid_stream", "input"):
        assert probe.exited.is_set(), "the app went idle while the aborted body was still running"
    if stage in ("queued", "serializer", "middleware"):
        assert not probe.body_started.is_set(), "the aborted call's handler ran"
    assert probe.cleanup == CLEANUP[stage]
    assert finals == ["cancelled"], "the call must settle exactly once"
    assert call.result is result
    assert_idle(app)
    assert fusion_tasks() == []
    # Pool threads idle on (the pool was warmed first); none may be added for good.
    await until(lambda: threading.active_count() <= threads_before, 2)
