"""Where sync bodies run, and what happens to a thread whose call was aborted.

Sync bodies run on ``WORKERS``, one process-wide pool of long-lived worker threads:
a call takes an idle worker (a new thread starts only when none is idle) and the
worker goes back to the pool when the body returns; a worker idle for
``WorkerThreads.idle_timeout`` seconds ends. anyio's own pool cannot be used for
this: on asyncio it ties each worker to the loop's "root task", and a loop run by
``run_forever`` (ipykernel runs its loop through tornado) has none, so anyio ties
the worker to the request's task and every sync call served from a kernel started
(and stopped) an OS thread of its own. Our workers belong to no task and no loop:
the result comes back through the loop's thread-safe scheduler (``Backend.loop_scheduler``),
so one pool serves asyncio and trio alike.

A body that raises ``SystemExit`` or ``KeyboardInterrupt`` (``sys.exit``, argparse,
click) must not stop the server or the kernel: an asyncio task that raises either
re-raises it out of the event loop. The worker turns any exception that is not an
``Exception`` into ``BodyExited`` (an ``Exception`` whose ``original`` is the raised
one), so the call fails with INTERNAL_ERROR naming ``SystemExit``, like any crash.

A thread cannot be killed. When its call is aborted the call answers CANCELLED at
once, but the body goes on until it returns (or notices ``ctx.signal.aborted``),
and until then it still holds its tool's slots: a limit counts bodies that really
run. While its call is live a body counts against anyio's default thread limiter,
like any ``to_thread`` work; once aborted it leaves that limiter and becomes
*abandoned*, so a body that ignores its signal can never starve other sync tools.
Abandoned threads are bounded per app: when ``max_abandoned`` of them run, new sync
calls of a tool that has abandoned threads get SERVER_BUSY.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import queue
import threading
from collections import Counter
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio
import anyio.to_thread

from ._background import Event, current_backend, new_event, nothing, wait_through_cancel
from ._errors import Aborted, threads_busy
from ._signal import AbortSignal

T = TypeVar("T")
log = logging.getLogger("fusion_nb")


class BodyExited(Exception):
    """A sync body raised ``SystemExit``, ``KeyboardInterrupt`` or another non-``Exception``.

    Carried to the loop as an ordinary exception (``original`` is what the body
    raised, also its ``__cause__``) so it fails the call instead of the process.
    """

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"the tool's sync body raised {type(original).__name__}")
        self.original = original
        self.__cause__ = original


class _Outcome(Generic[T]):
    """One job's result, filled in the worker thread and read on the loop once ``done`` is set."""

    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = new_event()
        self.value: T | None = None
        self.error: Exception | None = None


class WorkerThreads:
    """Long-lived daemon worker threads, reused by every sync call of the process.

    ``submit(job, then)`` hands ``job`` to an idle worker, or starts one; ``started``
    counts the threads ever started (tests read it). Idle workers are reused newest
    first, so a steady trickle of calls keeps one thread warm and lets the rest expire.
    """

    def __init__(self, idle_timeout: float = 10.0) -> None:
        self.idle_timeout = idle_timeout
        #: worker threads started so far (a new one only when no worker was idle)
        self.started = 0
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[tuple[Callable[[], None], Callable[[], None]]]] = []

    @property
    def idle(self) -> int:
        """Workers waiting for a job right now."""
        return len(self._idle)

    def forget_workers(self) -> None:
        """In a forked child: the parent's threads did not come along, so none is idle here."""
        self._lock = threading.Lock()
        self._idle = []

    def submit(self, job: Callable[[], None], then: Callable[[], None]) -> None:
        """Run ``job()`` in a worker thread, then ``then()`` once the worker is idle again.

        Neither may raise. ``then`` is where the loop is told: the worker is back in
        the pool first, so the call that follows (often started by that very wake-up)
        finds it there instead of starting another thread.
        """
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                self.started += 1
        if inbox is not None:
            inbox.put((job, then))
            return
        threading.Thread(target=self._work, args=(job, then), name="fusion-nb worker", daemon=True).start()

    def _work(self, job: Callable[[], None], then: Callable[[], None]) -> None:
        inbox: queue.SimpleQueue[tuple[Callable[[], None], Callable[[], None]]] = queue.SimpleQueue()
        while True:
            job()
            with self._lock:
                self._idle.append(inbox)
            then()
            del job, then
            try:
                job, then = inbox.get(timeout=self.idle_timeout)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:  # nobody took this worker: it ends
                        self._idle.remove(inbox)
                        return
                job, then = inbox.get()  # taken just as it timed out: its job is on the way


#: the process's worker threads (threads are a process resource; every app shares them)
WORKERS = WorkerThreads()
if hasattr(os, "register_at_fork"):  # a forked worker process starts with no idle worker
    os.register_at_fork(after_in_child=WORKERS.forget_workers)


#: inside a sync body's worker thread: how to run a callback on its call's loop (``None`` on the loop)
on_loop: contextvars.ContextVar[Callable[[Callable[[], None]], object] | None] = contextvars.ContextVar(
    "fusion_nb_on_loop", default=None
)


async def run_in_worker(func: Callable[[], T]) -> T:
    """Run ``func()`` on ``WORKERS`` in the caller's context; wait for it even when cancelled.

    The await lasts until the thread has returned (``wait_through_cancel``), and a
    cancellation is raised after that. A non-``Exception`` from ``func`` arrives as
    ``BodyExited``.
    """
    outcome: _Outcome[T] = _Outcome()
    schedule = current_backend().loop_scheduler()
    context = contextvars.copy_context()
    context.run(on_loop.set, schedule)  # (``ctx.log`` from the body records its line on the loop)

    def job() -> None:
        try:
            outcome.value = context.run(func)
        except Exception as exc:
            outcome.error = exc
        except BaseException as exc:  # SystemExit, KeyboardInterrupt, ...: never into the loop
            outcome.error = BodyExited(exc)

    def then() -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
            schedule(outcome.done.set)

    WORKERS.submit(job, then)
    await wait_through_cancel(_until_set(outcome.done), nothing)
    if outcome.error is not None:
        error, outcome.error = outcome.error, None  # no reference cycle through the traceback
        raise error
    return outcome.value  # type: ignore[return-value]


async def _until_set(event: Event) -> None:
    """Wait for ``event``, deaf to cancellation (what ``wait_through_cancel`` needs of its work)."""
    with anyio.CancelScope(shield=True):
        await event.wait()


class ThreadPool:
    """Runs an app's sync bodies on ``WORKERS`` and counts the ones left behind by aborted calls."""

    __slots__ = ("abandoned", "max_abandoned", "running")

    def __init__(self, max_abandoned: int) -> None:
        if max_abandoned < 1:
            raise ValueError("max_abandoned_threads must be at least 1")
        self.max_abandoned = max_abandoned
        #: threads running a body right now, live or abandoned
        self.running = 0
        #: abandoned threads per tool name
        self.abandoned: Counter[str] = Counter()

    @property
    def abandoned_total(self) -> int:
        """Threads still running for calls that were already aborted."""
        return sum(self.abandoned.values())

    def admit(self, tool_name: str) -> None:
        """Refuse a new sync call of ``tool_name`` while its abandoned threads fill the pool."""
        mine = self.abandoned.get(tool_name, 0)
        if mine and self.abandoned_total >= self.max_abandoned:
            raise threads_busy(tool_name, mine, self.max_abandoned)

    async def run(self, func: Callable[[], T], tool_name: str, signal: AbortSignal) -> T:
        """Run ``func()`` in a worker thread and wait for it to return, whatever aborts.

        The waiting task is not released by cancellation before the thread ends (the
        call has already answered), so whoever holds the call's slots holds them
        exactly as long as the body runs.
        """
        default = anyio.to_thread.current_default_thread_limiter()
        borrower = object()
        await default.acquire_on_behalf_of(borrower)
        live = True

        def abandon(reason: str) -> None:
            nonlocal live
            if live:
                live = False
                default.release_on_behalf_of(borrower)
                self.abandoned[tool_name] += 1

        undo = signal.on_abort(abandon)
        self.running += 1
        try:
            return await run_in_worker(_reporting_late_errors(func, signal))
        finally:
            self.running -= 1
            undo()
            if live:
                default.release_on_behalf_of(borrower)
            else:
                self.abandoned[tool_name] -= 1
                if not self.abandoned[tool_name]:
                    del self.abandoned[tool_name]


def _reporting_late_errors(func: Callable[[], T], signal: AbortSignal) -> Callable[[], T]:
    """``func`` with any error it raises after its call was aborted logged (nobody else will see it)."""

    def body() -> T:
        try:
            return func()
        except Aborted:
            raise
        except BaseException as exc:
            if signal.aborted:
                log.error("%s raised during its cleanup after an abort", signal.label, exc_info=exc)
            raise

    return body


def describe_crash(exc: BaseException) -> BaseException:
    """The exception a crash report names: what the body raised, not the ``BodyExited`` carrying it."""
    return exc.original if isinstance(exc, BodyExited) else exc
