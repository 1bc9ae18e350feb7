"""Run a tool's heavy work on a Dask cluster: progress from the worker, a cooperative stop on abort.

Inside a tool body (an ``async def`` with ``yield``, or a ``%%fusion_tool`` cell)::

    from fusion_nb import dask as fnb_dask

    def simulate(task, steps):            # runs on a Dask worker
        for step in range(steps):
            task.raise_if_stopped()       # the call was aborted: stop here
            crunch(step)
            task.report(step + 1, steps, "simulating")
        return "done"

    @f.action("simulate").with_integer("steps", "how many").handle
    async def run_simulation(input, ctx):
        work = fnb_dask.run(ctx, simulate, input.steps)   # the default client, or client=...
        async for event in work:          # the worker's progress, as the tool's own
            yield event
        yield respond(await work)         # the function's result (or its exception)

What it does, and why:

- **Progress.** ``task.report(progress, total=None, message=None)`` on the worker is sent
  with ``Worker.log_event`` to one topic per client (``Client.subscribe_topic``: Dask's
  Pub/Sub was removed in 2025.4). It is coalesced twice: the worker sends at most one
  event per 50 ms (the latest; a timer on the worker's loop sends one that waited), and
  the tool sees only the latest event each time it gets to run. Progress that goes
  backwards is dropped on the worker, so what reaches the caller only increases.
- **Abort.** Whatever aborts the call (the client's cancel, Stop, the kernel interrupt, the
  tool's timeout) cancels the tool body; the helper then cancels the Dask future *and*
  tells the workers to stop the task (``Client.run``: a flag in the worker process that
  ``task.stopped()`` reads without a network round trip). A running Dask task is never
  interrupted by ``Future.cancel()`` (measured: it runs on to its end), so the stop is
  cooperative: **a function that never calls ``stopped()`` or ``raise_if_stopped()`` runs
  to its end on the worker**, exactly as a thread body that ignores ``ctx.signal`` does.
  The call itself settles CANCELLED at once either way; the result of such a task is
  discarded.
- **Errors.** An exception raised by the function on the worker is raised again in the
  tool body (Dask carries it back), so the engine answers ``INTERNAL_ERROR`` with the
  exception's class and an error id and logs the worker's traceback under that id; the
  client never sees the exception's text or traceback.
- **At most once.** When the Dask worker running the function dies (killed, out of memory),
  Dask would run it again on another worker and the tool would answer ok: the function
  ran twice (entered on two pids). Now the first run claims its key on the scheduler
  before the function starts; a rescheduled run finds the claim, does not call the
  function, and the call fails with ``DASK_UNAVAILABLE`` in one sentence naming the lost
  worker. A tool whose work is safe to repeat opts into Dask's reruns with
  ``run(..., rerun=True)``. (Two scheduler round trips on the worker per call, and one to
  forget the claim.)
- **The cluster going away.** If the scheduler goes away while a call runs on it, the
  call fails at once with ``DASK_UNAVAILABLE``: "the Dask cluster went away while it
  ran this call". It does not hang (the client cancels its futures when it loses the
  scheduler). No client, a closed client, and trio fail the same way, in one sentence.

Limits:

- **asyncio only.** distributed's ``Client`` runs on asyncio (tornado); on trio the helper
  fails with one sentence. The client may be asynchronous on the tool's own loop or a
  plain one with its own loop thread (``Client(cluster)`` in a notebook): the helper
  drives Dask on the client's loop either way.
- **Pickling.** The function, its arguments and its result travel to and from the workers
  with Dask's serialisation (cloudpickle): a notebook-defined function is fine, an open
  file, a lock or a live connection is not. The function's return value must be picklable.
  ``fusion-nb`` must be installed on the workers (the task runs through this module).
- **Progress messages** are strings (the worker's events must be msgpack-serialisable).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import math
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

try:
    import distributed
except ImportError:  # pragma: no cover - exercised by a subprocess test without distributed
    raise ImportError(
        "fusion_nb.dask needs Dask's distributed scheduler, which is not installed: pip install 'fusion-nb[dask]'."
    ) from None

import anyio

from fusion_nb.engine import Context, ProgressEvent, ToolError, progress
from fusion_nb.engine.lowlevel import current_backend

__all__ = ["DASK_UNAVAILABLE", "DaskTask", "DaskWork", "Stopped", "WorkerLost", "run"]

log = logging.getLogger("fusion_nb")

#: the error code of a call that could not run on Dask (no client, trio, the cluster went away)
DASK_UNAVAILABLE = "DASK_UNAVAILABLE"

#: at most one progress event per this many seconds leaves a worker (the latest waits for the next)
PROGRESS_INTERVAL = 0.05
#: how long an aborted call waits for the cluster to take its cancel and stop request
STOP_TIMEOUT = 5.0
#: how many stop requests a worker process remembers for tasks it has not (yet) started
_REMEMBERED_STOPS = 1024


class Stopped(Exception):
    """Raised on the worker by ``task.raise_if_stopped()`` once the call was aborted."""


class WorkerLost(Exception):
    """Raised on the worker instead of running the function again: the worker that ran it first died."""

    def __init__(self, worker: str) -> None:
        super().__init__(worker)
        self.worker = worker


#: the scheduler metadata under which each at-most-once task's first worker is recorded
_CLAIMS = "fusion-nb-started"


def _claim(key: str) -> None:
    """On the worker, before the function: record this worker as the one running ``key``, once.

    A claim already there means a worker ran it before and died (Dask rescheduled it):
    raise ``WorkerLost`` naming that worker instead of running the function twice.
    """
    from distributed.utils import sync

    worker = distributed.get_worker()
    path = [_CLAIMS, key]
    first = sync(worker.loop, worker.scheduler.get_metadata, keys=path, default=None)
    if first is not None:
        raise WorkerLost(str(first))
    sync(worker.loop, worker.scheduler.set_metadata, keys=path, value=worker.address)


def _forget_claim(key: str, dask_scheduler: Any = None) -> None:
    """On the scheduler (``Client.run_on_scheduler``), once the call has ended: drop ``key``'s claim."""
    claims = dask_scheduler.task_metadata.get(_CLAIMS) if dask_scheduler is not None else None
    if isinstance(claims, dict):
        claims.pop(key, None)


# -- on the worker ------------------------------------------------------------------------

#: keys of the tasks this process was told to stop (insertion-ordered, bounded)
_stops: dict[str, None] = {}


def _stop_here(key: str) -> None:
    """Run by ``Client.run`` in every worker process: the task ``key`` should stop.

    Remembered even when the task is not running here (yet): a task the scheduler sent
    just before its cancel still sees the stop when it starts. The memory is bounded;
    the task that ran forgets its own key when it ends.
    """
    _stops[key] = None
    while len(_stops) > _REMEMBERED_STOPS:
        del _stops[next(iter(_stops))]


class DaskTask:
    """What the function running on the worker gets first: report progress, check the stop.

    ``report(progress, total=None, message=None)``: ``progress`` out of ``total``, or a
    percentage when ``total`` is None. ``stopped()`` is True once the call was aborted;
    ``raise_if_stopped()`` raises ``Stopped`` then. Both are cheap (no network): call
    them as often as you like. Only the key and the topic travel to the worker.
    """

    def __init__(self, key: str, topic: str) -> None:
        self.key = key
        self.topic = topic
        self._lock = threading.Lock()
        self._worker: Any = None
        self._last = -1.0  # the highest percent accepted
        self._pending: dict[str, Any] | None = None  # the event waiting for the interval to pass
        self._sent_at = -math.inf
        self._timer_armed = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (DaskTask, (self.key, self.topic))

    def __repr__(self) -> str:
        return f"<DaskTask {self.key}>"

    # the function's API
    def stopped(self) -> bool:
        """Whether the call that started this task was aborted (then stop soon)."""
        return self.key in _stops

    def raise_if_stopped(self) -> None:
        """Raise ``Stopped`` if the call was aborted: a cheap checkpoint for loops."""
        if self.key in _stops:
            raise Stopped(f"the call that started Dask task {self.key} was aborted")

    def report(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress (``progress`` of ``total``, or a percentage); lower values than before are dropped."""
        if total is not None:
            if not total > 0:
                raise ValueError(f"task.report(): total must be a positive number, got {total!r}.")
            percent = 100.0 * float(progress) / float(total)
        else:
            percent = float(progress)
        if percent != percent:  # NaN
            return
        percent = min(100.0, max(0.0, percent))
        event = {"key": self.key, "percent": percent, "message": None if message is None else str(message)}
        with self._lock:
            if percent < self._last:
                return
            self._last = percent
            if self._timer_armed:
                self._pending = event  # the armed timer sends the latest
                return
            now = time.monotonic()
            wait = self._sent_at + PROGRESS_INTERVAL - now
            if wait > 0 and percent < 100.0 and self._worker is not None:
                self._pending = event
                self._timer_armed = True
            else:
                self._sent_at = now
                self._pending = None
                wait = 0.0
        if wait > 0:
            loop = self._worker.loop
            loop.add_callback(loop.call_later, wait, self._flush)
        else:
            self._send(event)

    # the wrapper's side
    def _begin(self) -> None:
        try:
            self._worker = distributed.get_worker()
        except ValueError:  # not on a worker (the function called directly, e.g. in a test)
            self._worker = None

    def _flush(self) -> None:
        """Send the event that waited (on the worker's loop, from the timer; or at the task's end)."""
        with self._lock:
            event, self._pending = self._pending, None
            self._timer_armed = False
            if event is not None:
                self._sent_at = time.monotonic()
        if event is not None:
            self._send(event)

    def _send(self, event: dict[str, Any]) -> None:
        if self._worker is not None:
            self._worker.log_event(self.topic, event)

    def _end(self) -> None:
        self._flush()
        _stops.pop(self.key, None)


def _run_task(
    fn: Callable[..., Any], task: DaskTask, args: tuple[Any, ...], kwargs: dict[str, Any], once: bool = False
) -> Any:
    """The Dask task: ``fn(task, *args, **kwargs)``, its last progress flushed, its stop flag forgotten.

    ``once``: claim the key first, so a run Dask reschedules after a worker died never starts.
    """
    task._begin()
    try:
        if once and task._worker is not None:
            _claim(task.key)
        return fn(task, *args, **kwargs)
    finally:
        task._end()


# -- on the tool's side --------------------------------------------------------------------


class _Topic:
    """One client's progress topic: routes each worker event to the call it belongs to.

    ``Client.subscribe_topic`` keeps a handler per topic for the client's life (unsubscribing
    does not drop it), so there is one topic per client, not one per call.
    """

    def __init__(self, client: Any) -> None:
        self.name = f"fusion-nb-progress-{client.id}"
        self.runs: dict[str, DaskWork] = {}
        client.subscribe_topic(self.name, self)

    def __call__(self, event: tuple[float, Any]) -> None:
        """On the client's loop: hand the event to its call (events of finished calls are dropped)."""
        msg = event[1]
        work = self.runs.get(str(msg.get("key"))) if isinstance(msg, dict) else None
        if work is not None:
            work._post(progress(msg["percent"], msg.get("message")))


_topics: weakref.WeakKeyDictionary[Any, _Topic] = weakref.WeakKeyDictionary()
_call_numbers = itertools.count(1)


def _unavailable(tool: str, what: str, recovery: str) -> ToolError:
    return ToolError(DASK_UNAVAILABLE, f'Tool "{tool}" cannot run its work on Dask: {what}.', recovery=recovery)


def run(
    ctx: Context, fn: Callable[..., Any], /, *args: Any, client: Any = None, rerun: bool = False, **kwargs: Any
) -> DaskWork:
    """Run ``fn(task, *args, **kwargs)`` on a Dask cluster for the call ``ctx``; returns its ``DaskWork``.

    ``client`` is a ``distributed.Client`` (default: the current default client). The work
    starts when the tool first iterates the ``DaskWork`` (its progress) or awaits it (its
    result); see the module docstring for aborts, errors and limits. It runs at most once:
    ``rerun=True`` lets Dask run it again when its worker dies (for work safe to repeat).
    """
    return DaskWork(ctx, fn, args, kwargs, client, rerun=rerun)


class DaskWork:
    """One function running on Dask for one call: ``async for`` its progress, ``await`` its result.

    Iterating yields the worker's progress as ``ProgressEvent`` (yield them from the tool
    body and they reach the caller and the bar like the tool's own); it ends when the
    function has returned, raising its exception if it failed. Awaiting returns the
    function's result (or raises). Cancelling either (the call's abort) stops the work.
    A body that leaves the ``async for`` early should ``await`` the work (or let the call
    end): the work goes on until then. ``key`` is the Dask task's key; ``cancelled`` is True
    once an abort has cancelled its future.
    """

    def __init__(
        self,
        ctx: Context,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        client: Any,
        *,
        rerun: bool = False,
    ) -> None:
        self._ctx = ctx
        self._once = not rerun
        self._fn = fn
        self._args = args
        self._kwargs = kwargs
        self._client = client
        self.key = f"fusion-nb-{getattr(fn, '__name__', 'function')}-{next(_call_numbers)}-{uuid.uuid4().hex[:12]}"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ended: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None
        self._lock = threading.Lock()
        self._pending: ProgressEvent | None = None
        self._woken = False
        self._outcome: tuple[bool, Any] | None = None
        self._client_loop: Any = None
        self._driver: asyncio.Task[None] | None = None  # the drive task, on the client's loop
        self._topic: _Topic | None = None
        #: True once an abort has cancelled the Dask future (the scheduler took the cancel)
        self.cancelled = False

    def __repr__(self) -> str:
        return f"<DaskWork {self.key}>"

    # -- starting -----------------------------------------------------------------------
    def _start(self) -> None:
        if self._ended is not None:
            return
        tool = self._ctx.tool.name
        if current_backend().name != "asyncio":
            raise _unavailable(
                tool,
                "fusion_nb.dask runs on asyncio only (distributed's Client is asyncio-only) "
                "and this server runs on trio",
                "Serve the app on asyncio (the default) to run tool work on Dask.",
            )
        loop = asyncio.get_running_loop()
        self._ctx.signal.raise_if_aborted()
        client = self._client
        if client is None:
            try:
                client = distributed.default_client()
            except ValueError:
                raise _unavailable(
                    tool,
                    "no Dask client was given and none is running",
                    "Create a distributed.Client first (it becomes the default), or pass client=.",
                ) from None
        if client.status != "running":
            raise _unavailable(
                tool, f"its Dask client is {client.status}", "Start the cluster and the client again, then retry."
            )
        self._client = client
        self._loop = loop
        self._ended = asyncio.Event()
        self._changed = asyncio.Event()
        topic = _topics.get(client)
        if topic is None:
            topic = _topics[client] = _Topic(client)
        self._topic = topic
        topic.runs[self.key] = self
        self._client_loop = client.loop.asyncio_loop
        self._call_on_client_loop(self._spawn_drive)

    def _call_on_client_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the client's loop (the tool's own, or another thread's), in the order asked."""
        self._client_loop.call_soon_threadsafe(fn)

    def _spawn_drive(self) -> None:
        """On the client's loop: start the drive task; whatever becomes of it, ``_drive_done`` follows."""
        assert self._topic is not None
        task = self._driver = self._client_loop.create_task(
            self._drive(self._topic.name), name=f"fusion-nb dask {self.key}"
        )
        task.add_done_callback(self._drive_done)

    def _cancel_drive(self) -> None:
        """On the client's loop (always after ``_spawn_drive``): cancel the drive, started or not."""
        if self._driver is not None:
            self._driver.cancel()

    def _drive_done(self, task: asyncio.Task[None]) -> None:
        """On the client's loop: the drive has ended (also when it was cancelled before its first step)."""
        self._driver = None
        if self._topic is not None:
            self._topic.runs.pop(self.key, None)
        if self._outcome is None:
            self._outcome = (False, None)
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # (the tool's loop has closed: nobody waits)
            self._loop.call_soon_threadsafe(self._finish)

    async def _drive(self, topic: str) -> None:
        """On the client's loop: submit, wait, and on cancellation cancel the future and stop the task."""
        client = self._client
        try:
            task = DaskTask(self.key, topic)
            future = client.submit(
                _run_task, self._fn, task, self._args, self._kwargs, self._once, key=self.key, pure=False
            )
            try:
                self._outcome = (True, await future)
            except asyncio.CancelledError:
                await self._stop_on_cluster(future)
                raise
            finally:
                future.release()  # the key leaves the cluster now, not when the last reference goes
                if self._once:
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(STOP_TIMEOUT):
                            await client.run_on_scheduler(_forget_claim, self.key)
        except asyncio.CancelledError:
            self._outcome = (False, None)
        except Exception as exc:
            self._outcome = (False, exc)

    async def _stop_on_cluster(self, future: Any) -> None:
        """Cancel the future (it never starts if it had not) and ask the workers to stop it (it may run)."""
        client = self._client
        try:
            async with asyncio.timeout(STOP_TIMEOUT):
                await client.cancel([future], reason="the fusion-nb call was aborted")
                self.cancelled = future.cancelled()
                await client.run(_stop_here, self.key, on_error="ignore")
        except Exception as exc:  # a cluster that is gone or slow: the call has settled anyway
            log.warning(
                "fusion-nb: could not stop Dask task %s of call %s cleanly (%s)",
                self.key,
                self._ctx.call_id,
                type(exc).__name__,
            )

    # -- events from the client's loop ---------------------------------------------------
    def _post(self, event: ProgressEvent) -> None:
        """Any thread: make ``event`` the waiting one and wake the tool's loop unless already woken."""
        loop = self._loop
        with self._lock:
            self._pending = event
            if self._woken or loop is None:
                return
            self._woken = True
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        with self._lock:
            self._woken = False
        if self._changed is not None:
            self._changed.set()

    def _finish(self) -> None:
        if self._ended is not None:
            self._ended.set()
        if self._changed is not None:
            self._changed.set()

    def _take(self) -> ProgressEvent | None:
        with self._lock:
            event, self._pending = self._pending, None
        return event

    # -- the tool's side -----------------------------------------------------------------
    def __aiter__(self) -> AsyncIterator[ProgressEvent]:
        return self._progress()

    async def _progress(self) -> AsyncIterator[ProgressEvent]:
        self._start()
        ended, changed = self._ended, self._changed
        assert ended is not None and changed is not None
        try:
            while True:
                await changed.wait()
                changed.clear()
                event = self._take()
                if event is not None:
                    yield event
                if ended.is_set():
                    break
        except BaseException:
            await self._abort()
            raise
        self._result()  # raises the function's error here too, so a failure is never missed

    def __await__(self) -> Generator[Any, None, Any]:
        return self._wait().__await__()

    async def _wait(self) -> Any:
        self._start()
        assert self._ended is not None
        try:
            await self._ended.wait()
        except BaseException:
            await self._abort()
            raise
        return self._result()

    async def _abort(self) -> None:
        """The tool body was cancelled (the call aborted): stop the work, wait for the cluster to take it."""
        ended = self._ended
        if ended is None or ended.is_set():
            return
        with contextlib.suppress(RuntimeError):  # (the client's loop has closed: its drive has ended)
            self._call_on_client_loop(self._cancel_drive)
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_TIMEOUT + 1):
            await ended.wait()

    def _result(self) -> Any:
        outcome = self._outcome
        assert outcome is not None
        ok, value = outcome
        if ok:
            return value
        if value is None:  # the drive was cancelled, but not by this call: the client's loop is closing
            raise _unavailable(
                self._ctx.tool.name,
                "its Dask client closed while it ran this call",
                "Start the cluster and the client again, then retry.",
            )
        if isinstance(value, concurrent.futures.CancelledError):  # not by us: the cluster's doing
            gone = getattr(value, "reason", "") == "scheduler-connection-lost" or self._client.status != "running"
            raise _unavailable(
                self._ctx.tool.name,
                "the Dask cluster went away while it ran this call"
                if gone
                else "its Dask task was cancelled on the cluster before it finished",
                "Check the cluster (is its scheduler running?) and call the tool again.",
            ) from None
        if isinstance(value, WorkerLost):
            raise ToolError(
                DASK_UNAVAILABLE,
                f'Tool "{self._ctx.tool.name}" lost its Dask work: the worker {value.worker} running it died, and '
                "the function is not run a second time (it may have done part of its work).",
                recovery="Call the tool again if its work is safe to repeat (or let the tool pass rerun=True).",
            ) from None
        if isinstance(value, Exception) and not isinstance(value, ToolError):
            value.add_note(f"(raised by Dask task {self.key} of call {self._ctx.call_id}, on a worker)")
        raise value
