"""Tasks shared by every worker behind one endpoint, through Redis (SPEC 15; the ``redis`` extra).

``fusion-nb serve --workers N`` behind a load balancer sends a client's ``tasks/get``
to whichever worker is next, rarely the one running the task. With
``share_tasks(app, "redis://...")`` (``fusion-nb serve --task-store redis://...``)
every worker writes its tasks to Redis and reads the others' from there:

* **records**: each task is one JSON value (``TaskRecord``: status, last message,
  times, the result or the question once there is one) kept for the task's ttl,
  indexed per owner and in total (sorted sets scored by expiry, so the bounds hold
  across workers). Changes are written by one writer per worker, coalesced: a burst
  of progress messages costs one write per task per turn, and each write is
  announced on a channel so a worker waiting on the task hears of it at once.
* **relays**: a cancel or an answer given to another worker's task is published on
  that worker's channel; it aborts or resumes the call as for a local task (its
  cleanup runs there).
* **leases**: each worker keeps a key alive (renewed every third of ``lease``); a
  task whose worker's key has lapsed turns ``failed`` ("The worker running this task
  stopped.") for whoever reads it next, so a worker killed with ``kill -9`` leaves
  no task ``working`` forever.
* **fencing**: every write is a compare-and-set in one Lua script: a final record is
  never overwritten, and a worker writes its own tasks only while its lease stands. A
  worker whose lease lapsed (frozen, throttled, cut off from Redis) learns it at its
  next write or renewal: it stops its tasks (their cleanup runs; they read ``failed``
  as the others said) and carries on under a new lease. Before, a worker resumed after
  a freeze ran on the tasks the others had declared stopped and overwrote their
  ``failed`` with ``completed``.
* **restarts**: Redis holds an epoch key; a worker that finds it gone (Redis restarted
  empty) writes its tasks' records again at once (within a third of the lease).

When Redis cannot be reached every task operation answers one sentence naming the
store (never its password) within ``timeout`` seconds; calls that are not tasks go
on working, and a worker's own tasks stay reachable through it.

Runs on asyncio (the ``redis`` package's client is asyncio's).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Hashable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .engine import App, InputResponse, Task, TaskRecord, Tasks, TaskStatus, ToolError, tasks_of

log = logging.getLogger("fusion_nb")

__all__ = ["DEFAULT_LEASE", "STOPPED", "RedisTasks", "reach", "share_tasks", "shown_url"]

DEFAULT_LEASE = 15.0
"""Seconds a worker's lease lasts unrenewed: its tasks turn failed this long after it dies."""
STOPPED = "The worker running this task stopped."
"""The status message of a task whose worker died."""
EXPIRED = "The task expired; its result was freed."
FENCED = (
    "fusion-nb: this worker's task lease lapsed (frozen or cut off from the task store for over %g s): "
    "the other workers declared its %d tasks stopped, so they were stopped here too"
)
WRITE_INTERVAL = 0.05
"""Seconds between two writes of one worker's changed tasks (each write carries all of them)."""
TTL_GRACE = 60.0
"""Seconds a record outlives its task's ttl while the task runs (its worker stops it at the ttl, then
removes the record once its cleanup has run; this bounds what a worker dying just then leaves)."""
UNAVAILABLE = "TASK_STORE_UNAVAILABLE"

_FINAL = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})

#: Write one record unless that would break the fencing rule; returns what happened.
#: KEYS: the record, the store's epoch, the lease of the worker the record names.
#: ARGV: the record's JSON, its expiry in ms, the epoch the writer knows, and "own"
#: (the writer runs the task: only while its lease stands) or "stop" (another worker's
#: task, marked failed: only while that worker's lease is lapsed). "epoch": the store
#: restarted since the writer last looked; "final": the record has ended, kept as is.
_WRITE = """
if redis.call('GET', KEYS[2]) ~= ARGV[3] then return 'epoch' end
local leased = redis.call('EXISTS', KEYS[3]) == 1
if ARGV[4] == 'own' and not leased then return 'fenced' end
local current = redis.call('GET', KEYS[1])
if current then
  local status = cjson.decode(current)['status']
  if status == 'completed' or status == 'failed' or status == 'cancelled' then return 'final' end
end
if ARGV[4] ~= 'own' and (leased or not current) then return 'kept' end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 'ok'
"""
#: Renew a lease that still stands (a lapsed one is never brought back). KEYS: the
#: epoch, the lease; ARGV: the epoch the worker knows, the lease in ms.
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 'epoch' end
if redis.call('PEXPIRE', KEYS[2], ARGV[2]) == 0 then return 'fenced' end
return 'ok'
"""


def shown_url(url: str) -> str:
    """``url`` as it may be printed: the password (and user) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


class RedisTasks:
    """The ``SharedTasks`` of one app's ``Tasks`` in Redis; ``running()`` opens it (``share_tasks``).

    ``worker`` names this process in task records (a random suffix keeps a restarted
    worker from claiming the tasks of the process it replaces); ``timeout`` bounds
    every Redis operation, in seconds.
    """

    def __init__(
        self,
        tasks: Tasks,
        url: str,
        *,
        lease: float = DEFAULT_LEASE,
        worker: str | None = None,
        timeout: float = 2.0,
    ) -> None:
        if not lease > 0:
            raise ValueError(f"the task lease must be a positive number of seconds, got {lease!r}")
        _check_url(url)
        self.tasks = tasks
        self.url = url
        self.lease = lease
        self.timeout = timeout
        self._name = f"{worker or 'worker'}-{secrets.token_hex(4)}"
        self._incarnation = 1
        #: this process's current identity in records and leases (a new one after each fencing)
        self.worker = f"{self._name}.1"
        self.redis = _client(url, timeout)
        self._cas = self.redis.register_script(_WRITE)
        self._renew_lease = self.redis.register_script(_RENEW)
        prefix = f"fusion-nb:{tasks.app.name}:"
        self._task_key = prefix + "task:"
        self._owner_key = prefix + "owner:"
        self._all_key = prefix + "all"
        self._lease_key = prefix + "worker:"
        self._relay_channel = prefix + "relay:"
        self._changed_channel = prefix + "changed:"
        self._epoch_key = prefix + "epoch"
        self._epoch = ""
        self._owned: dict[str, Any] = {}  # task id -> unwatch, for the tasks written under ``worker``
        self._repairing = anyio.Lock()
        self._restored_at = -float("inf")  # (monotonic) when this worker last found the store restarted
        self._pending: dict[str, Task] = {}  # local tasks changed since the last write
        self._wake: anyio.Event | None = None  # (made on the loop, in ``running``)
        self._writing = anyio.Lock()
        self._followers: dict[str, set[anyio.Event]] = {}  # task id -> the waiters on its next change
        self._quiet_until = 0.0  # (a down store is logged once per 10 s, not per operation)

    @property
    def waiters(self) -> int:
        """Waits on other workers' tasks in progress, and changes not yet written (0 when idle: a leak check)."""
        return sum(len(waiters) for waiters in self._followers.values()) + len(self._pending)

    # -- lifetime ---------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[RedisTasks]:
        """Reach Redis (one sentence and ``ToolError`` if it cannot), hold the lease, write, relay, listen."""
        self._wake = anyio.Event()
        async with self.redis:
            await self._op(self.redis.ping())
            await self._claim()
            pubsub = self.redis.pubsub()
            await self._op(pubsub.psubscribe(self._relay_channel + self._name + ".*"))
            await self._op(pubsub.psubscribe(self._changed_channel + "*"))
            async with anyio.create_task_group() as group:
                group.start_soon(self._keep_lease)
                group.start_soon(self._listen, pubsub)
                group.start_soon(self._write_changes)
                unshare = self.tasks.share(self)
                try:
                    yield self
                finally:
                    unshare()
                    with anyio.move_on_after(self.timeout * 2, shield=True):
                        with contextlib.suppress(ToolError, RedisError, OSError):
                            await self._flush()  # the final statuses of tasks a drain just ended
                            await self.redis.delete(self._lease_key + self.worker)
                    group.cancel_scope.cancel()
            with anyio.move_on_after(self.timeout, shield=True):
                await pubsub.aclose()

    async def _claim(self) -> None:
        """Learn the store's epoch (made if Redis has none: a new or restarted store) and take a lease."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self._epoch_key, secrets.token_hex(8), nx=True)
        pipe.get(self._epoch_key)
        pipe.set(self._lease_key + self.worker, "1", px=_ms(self.lease))
        _, self._epoch, _ = await self._op(pipe.execute())

    async def _keep_lease(self) -> None:
        while True:
            await anyio.sleep(self.lease / 3)
            for task_id in [task_id for task_id in self._owned if self.tasks.store.get(task_id) is None]:
                self._owned.pop(task_id)()  # swept at its ttl here: nothing left to write again
            try:
                worker = self.worker
                keys = [self._epoch_key, self._lease_key + worker]
                outcome = await self._op(self._renew_lease(keys=keys, args=[self._epoch, _ms(self.lease)]))
                await self._react(worker, outcome)
            except ToolError as error:
                self._log_down(error)

    async def _react(self, worker: str, *outcomes: str) -> None:
        """After a write or a renewal as ``worker``: write all again if the store restarted; stop if fenced."""
        if worker != self.worker:
            return  # (an outcome for an identity already left behind)
        if "epoch" in outcomes:
            await self._restore()
        elif "fenced" in outcomes:
            await self._fence()

    async def _restore(self) -> None:
        """Redis restarted empty: take the new epoch and a lease, and write this worker's tasks again."""
        async with self._repairing:
            self._restored_at = time.monotonic()
            await self._claim()
            own = [task for task_id in self._owned if (task := self.tasks.store.get(task_id)) is not None]
            worker = self.worker
            outcomes = await self._write([TaskRecord.of(task, worker) for task in own])
        log.warning("fusion-nb: the task store restarted empty; this worker wrote its %d tasks again", len(own))
        if "fenced" in outcomes.values():
            await self._react(worker, "fenced")

    async def _fence(self) -> None:
        """This worker's lease lapsed: stop the tasks written under it and carry on under a new one.

        The other workers may already have marked those tasks failed (and a client may
        have started the job again): running them on would do the work twice and could
        never be reported, since a final record is never overwritten.
        """
        async with self._repairing:
            owned, self._owned = self._owned, {}
            self._incarnation += 1
            self.worker = f"{self._name}.{self._incarnation}"
            for task_id, unwatch in owned.items():
                unwatch()
                self._pending.pop(task_id, None)
                self.tasks.forget(task_id, STOPPED)
            await self._claim()
        log.warning(FENCED, self.lease, len(owned))

    # -- SharedTasks -------------------------------------------------------------------------------
    async def add(self, task: Task) -> None:
        """Write a new local task's record and index it; its changes are written from now on."""
        worker = self.worker
        record = TaskRecord.of(task, worker)
        unwatch = task.watch(self._changed)
        outcome = (await self._write([record])).get(task.id, "ok")
        if outcome in ("epoch", "fenced"):
            await self._react(worker, outcome)
            record = TaskRecord.of(task, self.worker)
            await self._write([record])
        self._owned[task.id] = unwatch
        if (task.status, task.status_message, task.updated) != (record.status, record.status_message, record.updated):
            self._changed(task)  # it changed while the record was on its way: write the newer state after it

    async def fetch(self, task_id: str) -> Task | None:
        """A copy of the task with this id, kept current while a caller waits on it; ``None`` if none.

        Right after Redis restarted empty a task of another worker is missing until that
        worker writes it again (within a third of its lease): then this says so in one
        sentence (``TASK_STORE_UNAVAILABLE``, retry shortly) instead of "there is no task".
        """
        record = await self._record(task_id)
        if record is None:
            if not await self._restarting():
                return None
            record = await self._record(task_id)
            if record is None:
                raise self._refilling()
        return Task.copy_of((await self._alive([record]))[0], self._follow)

    async def _restarting(self) -> bool:
        """Whether the store restarted empty within a lease (its workers may not have written their tasks yet)."""
        if await self._op(self.redis.get(self._epoch_key)) != self._epoch:
            await self._restore()
        return time.monotonic() - self._restored_at < self.lease

    def _refilling(self) -> ToolError:
        seconds = max(1, round(self.lease - (time.monotonic() - self._restored_at)))
        return ToolError(
            UNAVAILABLE,
            f"The task store at {shown_url(self.url)} restarted empty moments ago and its workers are "
            "writing their tasks back; this task is not there yet.",
            recovery=f"Retry in {seconds} s.",
            retry_after=seconds,
        )

    async def owned(self, owner: Hashable) -> list[Task]:
        """Copies of ``owner``'s tasks on every worker, oldest first."""
        key = self._owner_key + _owner_json(owner)
        await self._op(self.redis.zremrangebyscore(key, "-inf", _ms(time.time())))
        ids: list[str] = await self._op(self.redis.zrange(key, 0, -1))
        if not ids:
            return []
        raw: list[str | None] = await self._op(self.redis.mget([self._task_key + task_id for task_id in ids]))
        loaded = [_loads(value) for value in raw]
        records = await self._alive([record for record in loaded if record is not None])
        return sorted((Task.copy_of(record, self._follow) for record in records), key=lambda task: task.created)

    async def owned_page(self, owner: Hashable, after: Any, limit: int) -> tuple[list[Task], Any]:
        """Copies of up to ``limit`` of ``owner``'s tasks after the mark ``after``, and the next page's mark.

        Reads one page, not the index: ZRANGE of that rank range and one MGET of its
        records (before, a list read every id and every record: 3.3 s at 100,000
        tasks). The index is ordered by expiry; a mark is ``[id, score]`` of the
        page's last task, found again by ZRANK (by score if it expired meanwhile).
        """
        key = self._owner_key + _owner_json(owner)
        pipe = self.redis.pipeline(transaction=False)
        pipe.zremrangebyscore(key, "-inf", _ms(time.time()))
        start = 0
        if after is not None:
            last, score = after
            pipe.zrank(key, str(last))
            pipe.zcount(key, "-inf", f"({float(score)}")
            _, found, before = await self._op(pipe.execute())
            start = found + 1 if found is not None else int(before)
            pipe = self.redis.pipeline(transaction=False)
        pipe.zrange(key, start, start + limit, withscores=True)  # (one more than the page: is there a next?)
        replies = await self._op(pipe.execute())
        ranged: list[tuple[str, float]] = replies[-1]
        page, more = ranged[:limit], len(ranged) > limit
        if not page:
            return [], None
        raw: list[str | None] = await self._op(self.redis.mget([self._task_key + task_id for task_id, _ in page]))
        loaded = [_loads(value) for value in raw]
        records = await self._alive([record for record in loaded if record is not None])
        last_id, last_score = page[-1]
        mark = [last_id, last_score] if more else None
        return [Task.copy_of(record, self._follow) for record in records], mark

    async def count(self, owner: Hashable | None = None) -> int:
        """Tasks held (running or kept for their result) by ``owner``, or by everybody, on every worker."""
        key = self._all_key if owner is None else self._owner_key + _owner_json(owner)
        pipe = self.redis.pipeline(transaction=False)
        pipe.zremrangebyscore(key, "-inf", _ms(time.time()))
        pipe.zcard(key)
        _, counted = await self._op(pipe.execute())
        return int(counted)

    async def cancel(self, task: Task) -> None:
        """Ask the worker running ``task`` to abort it; a worker nobody hears is dead: the task fails."""
        await self._relay(task, {"op": "cancel"})

    async def answer(self, task: Task, key: str, response: InputResponse) -> None:
        """Hand an answer to the worker running ``task`` (it checks the answer as for any call)."""
        await self._relay(
            task, {"op": "answer", "key": key, "action": str(response.action), "content": response.content}
        )

    # -- reading ------------------------------------------------------------------------------------
    async def _record(self, task_id: str) -> TaskRecord | None:
        value: str | None = await self._op(self.redis.get(self._task_key + task_id))  # (decoded: str)
        return _loads(value)

    async def _alive(self, records: list[TaskRecord]) -> list[TaskRecord]:
        """``records``, with each running task of a worker whose lease lapsed turned ``failed`` (and written)."""
        workers = sorted({r.worker for r in records if r.status not in _FINAL and r.worker != self.worker})
        if not workers:
            return records
        alive = await self._op(self.redis.mget([self._lease_key + worker for worker in workers]))
        dead = {worker for worker, lease in zip(workers, alive, strict=True) if lease is None}
        if not dead:
            return records
        now = time.time()
        stopped = {
            record.id: dataclasses.replace(
                record, status=TaskStatus.FAILED, status_message=STOPPED, updated=now, question=None
            )
            for record in records
            if record.status not in _FINAL and record.worker in dead
        }
        outcomes = await self._write(list(stopped.values()), own=False)  # (one round trip for all of them)
        if "epoch" in outcomes.values():
            await self._react(self.worker, "epoch")
        refused = [task_id for task_id, outcome in outcomes.items() if outcome != "ok"]
        if refused:  # ended meanwhile (or its worker came back after a restart): what the store holds now
            current = await self._op(self.redis.mget([self._task_key + task_id for task_id in refused]))
            for task_id, value in zip(refused, current, strict=True):
                kept = _loads(value)
                if kept is not None:
                    stopped[task_id] = kept
                else:
                    del stopped[task_id]
        return [stopped.get(record.id, record) for record in records]

    async def _follow(self, task: Task) -> None:
        """Wait for a copy's next change (or a recheck, for a worker that died silently), then refresh it."""
        event = anyio.Event()
        waiters = self._followers.setdefault(task.id, set())
        waiters.add(event)
        try:
            with anyio.move_on_after(max(0.05, min(task.poll_interval, self.lease / 2))):
                await event.wait()
        finally:
            waiters.discard(event)
            if not waiters and self._followers.get(task.id) is waiters:
                del self._followers[task.id]
        record = await self._record(task.id)
        if record is None and await self._restarting():
            return  # the store restarted: its worker writes it back shortly (the copy keeps what it had)
        if record is None:
            record = dataclasses.replace(
                TaskRecord.of(task, self.worker),
                status=TaskStatus.FAILED,
                status_message=EXPIRED,
                updated=time.time(),
                question=None,
            )
        else:
            record = (await self._alive([record]))[0]
        task.refresh(record)

    # -- writing ------------------------------------------------------------------------------------
    def _changed(self, task: Task) -> None:
        """A local task changed (a ``Task.watch`` listener): the writer writes its latest state soon."""
        self._pending[task.id] = task
        if self._wake is not None:
            self._wake.set()

    async def _write_changes(self) -> None:
        while True:
            assert self._wake is not None
            await self._wake.wait()
            self._wake = anyio.Event()
            try:
                await self._flush()
            except ToolError as error:
                self._log_down(error)
                await anyio.sleep(1)  # (kept pending: written once the store is back)
                self._wake.set()
            else:
                await anyio.sleep(WRITE_INTERVAL)  # coalesce: a burst of progress is one write per task

    async def written(self, task: Task) -> None:
        """Return once ``task``'s latest change is in Redis (at once when nothing of it waits).

        A worker answers for its own task from the live task; another worker answers from
        the record. Waiting here before a worker answers keeps one client, sent to either
        worker by the load balancer, from reading ``completed`` and then ``working``.
        """
        if task.id in self._pending or self._writing.locked():
            try:
                await self._flush()  # (after a write in flight, which may already hold it)
            except ToolError as error:  # the store is down: this worker still answers for its own task
                self._log_down(error)

    async def _flush(self) -> None:
        async with self._writing:  # one write at a time, so ``written`` can wait for one in flight
            pending, self._pending = self._pending, {}
            if not pending:
                return
            worker = self.worker
            try:
                outcomes = await self._write([TaskRecord.of(task, worker) for task in pending.values()])
            except BaseException:
                self._pending = {**pending, **self._pending}
                raise
        await self._react(worker, *outcomes.values())

    async def _write(self, records: list[TaskRecord], *, own: bool = True) -> dict[str, str]:
        """Write ``records`` for the rest of their ttl, index them, announce each; one round trip.

        Each record goes through the fencing rule (``_WRITE``); returns each one's outcome
        ("ok", "final", "fenced", "epoch", "kept"). ``own``: records of tasks this worker
        runs; else another worker's tasks being marked failed. An expired task stays gone.
        """
        now = time.time()
        pipe = self.redis.pipeline(transaction=False)
        written: list[str] = []
        for record in records:
            expires = record.created + record.ttl
            left = expires - now
            if record.status not in _FINAL or (own and record.id in self._owned and left <= 0):
                left += TTL_GRACE  # (running, or stopped at its ttl: ``remove`` deletes it after the cleanup)
            if left <= 0:
                continue
            written.append(record.id)
            keys = [self._task_key + record.id, self._epoch_key, self._lease_key + record.worker]
            args: list[str | int] = [_dumps(record), max(1, _ms(left)), self._epoch, "own" if own else "stop"]
            await self._cas(keys=keys, args=args, client=pipe)  # (queued: run by ``execute``)
            for key in (self._owner_key + _owner_json(record.owner), self._all_key):
                pipe.zadd(key, {record.id: _ms(expires)})
                pipe.pexpireat(key, _ms(expires), nx=True)  # an index lives as long as its longest-lived task
                pipe.pexpireat(key, _ms(expires), gt=True)
            pipe.publish(self._changed_channel + record.id, "1")
        if not written:
            return {}
        replies = await self._op(pipe.execute())
        step = len(replies) // len(written)
        return {task_id: str(replies[index * step]) for index, task_id in enumerate(written)}

    async def remove(self, task: Task) -> None:
        """Delete the record of this worker's ``task`` (stopped at its ttl, its cleanup run)."""
        unwatch = self._owned.pop(task.id, None)
        if unwatch is None:
            return  # (not written under this worker's current lease)
        unwatch()
        async with self._writing:  # (after a write in flight, which may hold the task's last change)
            self._pending.pop(task.id, None)
            pipe = self.redis.pipeline(transaction=False)
            pipe.delete(self._task_key + task.id)
            for key in (self._owner_key + _owner_json(task.owner), self._all_key):
                pipe.zrem(key, task.id)
            pipe.publish(self._changed_channel + task.id, "1")
            try:
                await self._op(pipe.execute())
            except ToolError as error:  # the record then goes at its ttl and grace
                self._log_down(error)

    # -- relaying -----------------------------------------------------------------------------------
    async def _relay(self, task: Task, message: dict[str, Any]) -> None:
        record = await self._record(task.id)
        if record is None or record.status in _FINAL:
            return
        message.update(id=task.id, owner=task.owner)
        with anyio.move_on_after(self.timeout):
            while not await self._op(self.redis.publish(self._relay_channel + record.worker, json.dumps(message))):
                # nobody heard: the worker died (its lease lapsed: the task fails now), or it is
                # resubscribing after a Redis restart (its lease stands: try again shortly)
                if (await self._alive([record]))[0].status in _FINAL:
                    return
                await anyio.sleep(0.1)

    async def _listen(self, pubsub: Any) -> None:
        """Relays to this worker and change announcements of every task (wakes the copies waited on)."""
        while True:
            try:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=self.lease / 3)
            except (RedisError, OSError) as error:
                self._log_down(_unavailable(self.url, self.timeout, error))
                await anyio.sleep(1)
                continue
            if message is None:
                continue
            channel = str(message.get("channel", ""))
            if channel.startswith(self._changed_channel):
                for event in self._followers.pop(channel[len(self._changed_channel) :], ()):
                    event.set()
            elif channel.startswith(self._relay_channel):
                self._apply(message.get("data"))

    def _apply(self, data: object) -> None:
        """Do what another worker relayed for one of this worker's tasks."""
        try:
            relayed = json.loads(str(data))
            task_id, owner, op = relayed["id"], relayed["owner"], relayed["op"]
        except (ValueError, KeyError, TypeError):
            log.warning("fusion-nb: ignored a malformed task relay: %.80r", data)
            return
        if op == "cancel":
            self.tasks.cancel(owner, task_id)
        elif op == "answer":
            response = InputResponse(str(relayed.get("action")), relayed.get("content"))
            self.tasks.answer(owner, task_id, str(relayed.get("key")), response)

    # -- failures -----------------------------------------------------------------------------------
    async def _op(self, operation: Awaitable[Any]) -> Any:
        """Await one Redis operation, bounded; a failure is the one-sentence ``TASK_STORE_UNAVAILABLE``."""
        try:
            with anyio.fail_after(self.timeout * 2):
                return await operation
        except (RedisError, OSError, TimeoutError) as error:
            raise _unavailable(self.url, self.timeout, error) from None

    def _log_down(self, error: ToolError) -> None:
        now = time.monotonic()
        if now >= self._quiet_until:
            self._quiet_until = now + 10
            log.warning("fusion-nb: %s", error.message)


async def reach(url: str, *, timeout: float = 2.0) -> None:
    """Check that the Redis at ``url`` answers (``ToolError``, one sentence, if not): a server's start-up check."""
    _check_url(url)
    async with _client(url, timeout) as client:
        try:
            with anyio.fail_after(timeout * 2):
                await client.ping()
        except (RedisError, OSError, TimeoutError) as error:
            raise _unavailable(url, timeout, error) from None


def _check_url(url: str) -> None:
    if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"a task store URL starts with redis://, rediss:// or unix://; got {shown_url(url)!r:.80}")


def _client(url: str, timeout: float) -> aioredis.Redis:
    return aioredis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1),  # one reconnect for a stale pooled connection, no more
    )


def _unavailable(url: str, timeout: float, error: BaseException) -> ToolError:
    """The one sentence for a store that cannot be reached: which store (no password) and why, briefly."""
    text = str(error)
    if isinstance(error, TimeoutError | RedisTimeoutError):
        reason = f"no answer within {timeout:g} s"
    elif isinstance(error, ConnectionRefusedError) or "Connect call failed" in text or "Error 111" in text:
        reason = "connection refused"
    else:
        reason = text.splitlines()[0] if text else type(error).__name__
        reason = reason if len(reason) <= 80 else reason[:77] + "..."
    return ToolError(
        UNAVAILABLE,
        f"The task store at {shown_url(url)} cannot be reached ({reason}).",
        recovery="Calls that are not tasks still work; retry the task operation shortly.",
        retry_after=5,
    )


@contextlib.asynccontextmanager
async def share_tasks(
    app: App, url: str, *, lease: float = DEFAULT_LEASE, worker: str | None = None, timeout: float = 2.0
) -> AsyncIterator[RedisTasks]:
    """Share ``app``'s tasks with every worker using the Redis at ``url`` while the block runs.

    Raises ``ToolError`` (``TASK_STORE_UNAVAILABLE``, one sentence) when Redis cannot
    be reached at the start. Tasks started through any transport inside the block are
    visible to, and can be polled, collected, answered and cancelled from, every
    worker sharing the same Redis and app name.
    """
    async with RedisTasks(tasks_of(app), url, lease=lease, worker=worker, timeout=timeout).running() as store:
        yield store


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _owner_json(owner: Hashable) -> str:
    return json.dumps(owner if owner is None or isinstance(owner, str) else str(owner))


def _dumps(record: TaskRecord) -> str:
    return json.dumps(record.to_json(), separators=(",", ":"))


def _loads(value: str | None) -> TaskRecord | None:
    if value is None:
        return None
    try:
        return TaskRecord.from_json(json.loads(value))
    except ValueError as error:
        log.warning("fusion-nb: ignored %s in the task store", error)
        return None
