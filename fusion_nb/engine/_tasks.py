"""Tasks: calls that outlive the request that started them (SPEC 10).

A client that cannot wait minutes for a tool's answer gets a task instead: an
unguessable id it polls while the call runs detached. The pieces here are the
protocol-free part both MCP eras and the job tools share:

- ``TaskOptions``: what ``.task(...)`` on the builder declares for a tool;
- ``Task``: one detached call with an owner, a status (``TaskStatus``), the last
  progress message, times, a ttl, and the question it waits on, if any;
- ``TaskStore``: where tasks are kept (a small protocol; ``MemoryTaskStore`` is the
  default, a shared store can replace it without the rest changing);
- ``Tasks``: creates, finds, answers and cancels tasks for one app, enforcing the
  bounds per owner and in total, and freeing tasks whose ttl has passed.

An owner is whatever identifies a client (the bearer token's client id); every
lookup takes one, and a task of another owner is indistinguishable from no task,
so one client can neither see nor touch another's work. Cancelling a task aborts
its call: its cleanup runs and its slots free, exactly as for any aborted call.

Expiry is driven by a clock (``anyio.current_time`` by default, so the event
loop's): a task's ttl counts from its creation, and every access sweeps tasks whose
ttl has passed, so memory is bounded by the bounds. A task still running at its ttl
is stopped then by a timer on the loop (no access needed): its call is aborted and
the task stays visible, ``cancelled``, until its cleanup has run; only then does it
go (from a shared store too). Before, it vanished at once while its code ran on for
seconds, work nobody could see or stop.
"""

from __future__ import annotations

import builtins
import heapq
import itertools
import logging
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ._background import Event, current_backend, new_event, spawn
from ._call import Call, CallStatus
from ._channel import InputChannel
from ._errors import CANCELLED, SERVER_BUSY, ToolError
from ._interactive import ACCEPT, InputQuestion, InputRequest, InputResponse
from ._result import CallResult
from ._streaming import ProgressEvent

if TYPE_CHECKING:
    from ._app import App
    from ._task_records import SharedTasks, TaskRecord

log = logging.getLogger("fusion_nb")

TASK_MODES = ("optional", "required")
#: seconds ``Tasks.stop`` waits for another worker's task to turn cancelled before it returns
RELAYED_STOP_WAIT = 5.0
#: the longest ttl a tool or a request may ask for (seconds): a week
MAX_TTL = 7 * 24 * 3600.0


class TaskStatus(StrEnum):
    """Where a task is, in the words both MCP eras use. The last three are final."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """How a tool runs as a task: ``mode`` optional or required, ``ttl`` and ``poll_interval`` in seconds."""

    mode: str = "optional"
    ttl: float = 3600.0
    poll_interval: float = 1.0

    def __post_init__(self) -> None:
        if self.mode not in TASK_MODES:
            raise ValueError(f'task mode must be "optional" or "required", got {self.mode!r}')
        if not 0 < self.ttl <= MAX_TTL:
            raise ValueError(f"a task ttl must be between 0 and {MAX_TTL:.0f} seconds, got {self.ttl!r}")
        if not 0 < self.poll_interval <= 3600:
            raise ValueError(f"a poll interval must be between 0 and 3600 seconds, got {self.poll_interval!r}")

    @property
    def required(self) -> bool:
        """Whether the tool refuses to run except as a task."""
        return self.mode == "required"


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Task:
    """One detached call seen as a task: id, owner, status, last message, times, ttl.

    ``question`` is the input request the call waits on while ``input_required``;
    ``result`` is the call's result once final (freed with the task at expiry).
    Listeners added with ``watch`` hear of every change (status notifications, views).
    """

    __slots__ = (
        "_answer",
        "_changed",
        "_final",
        "_follow",
        "_kept",
        "_listeners",
        "answered",
        "arguments",
        "call",
        "created",
        "expires_at",
        "id",
        "owner",
        "poll_interval",
        "question",
        "status",
        "status_message",
        "tool_name",
        "ttl",
        "updated",
    )

    def __init__(
        self,
        task_id: str,
        owner: Hashable,
        tool_name: str,
        arguments: Any,
        ttl: float,
        poll_interval: float,
        now: float,
    ) -> None:
        self.id = task_id
        self.owner = owner
        self.tool_name = tool_name
        self.arguments = arguments
        self.status = TaskStatus.WORKING
        self.status_message: str | None = None
        #: wall-clock times (``time.time()``) of creation and of the last change
        self.created = self.updated = time.time()
        #: seconds from creation the task is kept; ``expires_at`` is that moment on the store's clock
        self.ttl = ttl
        self.expires_at = now + ttl
        self.poll_interval = poll_interval
        self.call: Call | None = None
        self.question: InputQuestion | None = None
        #: the keys of ``question``'s parts answered so far (``require_input.all`` is answered piecemeal)
        self.answered: frozenset[str] = frozenset()
        self._answer: tuple[Event, dict[str, InputResponse]] | None = None
        self._final: Event | None = None
        self._changed: Event | None = None
        self._listeners: list[Callable[[Task], None]] = []
        #: a copy of a task another process runs: its result as recorded, and what keeps it current
        self._kept: CallResult | None = None
        self._follow: Callable[[Task], Awaitable[None]] | None = None

    @property
    def final(self) -> bool:
        """Whether the task has ended (completed, failed or cancelled)."""
        return self.status in FINAL

    @property
    def result(self) -> CallResult | None:
        """The call's result once the task is final (``None`` before)."""
        if not self.final:
            return None
        call = self.call
        return call.result if call is not None else self._kept

    @property
    def pending(self) -> builtins.list[InputRequest]:
        """The input requests the task waits on and has no answer to yet (several for ``require_input.all``)."""
        question = self.question
        if question is None:
            return []
        request = question.request
        return [part for part in request.parts or (request,) if part.key not in self.answered]

    @property
    def remote(self) -> bool:
        """Whether this is a copy of a task another process runs (read from a shared store)."""
        return self._follow is not None

    @property
    def created_at(self) -> str:
        """ISO 8601 creation time (UTC)."""
        return _iso(self.created)

    @property
    def updated_at(self) -> str:
        """ISO 8601 time of the last change (UTC)."""
        return _iso(self.updated)

    def watch(self, listener: Callable[[Task], None]) -> Callable[[], None]:
        """``listener(task)`` after every change; returns a function that unsubscribes."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def wait(self) -> None:
        """Wait until the task is final."""
        while self._follow is not None and not self.final:
            await self._follow(self)
        if not self.final:
            if self._final is None:
                self._final = new_event()
            await self._final.wait()

    async def wait_change(self) -> None:
        """Wait for the next change of status, message or question (of a copy: until it is refreshed)."""
        if self._follow is not None:
            await self._follow(self)
            return
        if self._changed is None:
            self._changed = new_event()
        await self._changed.wait()

    def _update(self, status: TaskStatus, message: str | None = None, *, keep_message: bool = False) -> None:
        if self.final:
            return
        self.status = status
        if not keep_message:
            self.status_message = message
        self.updated = time.time()
        if status in FINAL:
            self.question = None
            self.answered = frozenset()
            if self._final is not None:
                self._final.set()
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception:  # a view's bug never affects the task
                log.exception("fusion-nb: a listener of task %s failed", self.id)

    def __repr__(self) -> str:
        return f"<Task {self.id[:8]}… {self.tool_name} {self.status}>"

    # -- copies of tasks other processes run -----------------------------------------------------
    @classmethod
    def copy_of(cls, record: TaskRecord, follow: Callable[[Task], Awaitable[None]]) -> Task:
        """A task rebuilt from a shared store's ``record``; ``follow(task)`` waits for a change and refreshes it."""
        task = cls(record.id, record.owner, record.tool_name, None, record.ttl, record.poll_interval, 0.0)
        task._follow = follow
        task.refresh(record)
        return task

    def refresh(self, record: TaskRecord) -> None:
        """Take a copy's state from a newer ``record`` of the same task (listeners hear of a change)."""
        changed = (record.status, record.status_message, record.updated) != (
            self.status,
            self.status_message,
            self.updated,
        )
        self.status, self.status_message = record.status, record.status_message
        self.created, self.updated = record.created, record.updated
        self._kept = record.result
        self.answered = frozenset(record.answered)
        question, old = record.question, self.question
        if question is not None and old is not None and _same_question(question, old):
            question = old  # the same question: a transport that asked it must not ask again
        self.question = question
        if changed:
            for listener in list(self._listeners):
                listener(self)


def _same_question(one: InputQuestion, other: InputQuestion) -> bool:
    return (one.request.key, one.request.message, one.problems) == (
        other.request.key,
        other.request.message,
        other.problems,
    )


class TaskStore(Protocol):
    """Where tasks are kept. Lookups are by id; ``Tasks`` checks owners and bounds."""

    def put(self, task: Task) -> None:
        """Keep ``task`` (its id is new)."""

    def get(self, task_id: str) -> Task | None:
        """The task with this id, or ``None``."""

    def remove(self, task_id: str) -> Task | None:
        """Forget the task with this id; returns it, or ``None`` when there was none."""

    def owned(self, owner: Hashable) -> list[Task]:
        """The tasks of ``owner``, oldest first."""

    def count(self, owner: Hashable | None = None) -> int:
        """How many tasks ``owner`` has (all owners together when ``None``)."""

    def __iter__(self) -> Iterator[Task]:
        """Every task, oldest first."""


#: where a page of an owner's tasks starts: after the task of this (position, id, created time)
PageMark = tuple[int, str, float]


class MemoryTaskStore:
    """The default store: a dict in this process (a kernel restart loses its tasks).

    Indexed per owner, so one owner's list and count cost that owner's tasks, never
    everybody's (before, ``owned`` compared every task's owner: one client's
    ``tasks/list`` grew with all the others' tasks).
    """

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}
        self._by_owner: dict[Hashable, dict[str, Task]] = {}

    def put(self, task: Task) -> None:
        """Keep ``task``."""
        self._tasks[task.id] = task
        self._by_owner.setdefault(task.owner, {})[task.id] = task

    def get(self, task_id: str) -> Task | None:
        """The task with this id, or ``None``."""
        return self._tasks.get(task_id)

    def remove(self, task_id: str) -> Task | None:
        """Forget a task; returns it."""
        task = self._tasks.pop(task_id, None)
        if task is not None:
            mine = self._by_owner.get(task.owner)
            if mine is not None:
                mine.pop(task_id, None)
                if not mine:
                    del self._by_owner[task.owner]
        return task

    def owned(self, owner: Hashable) -> list[Task]:
        """The tasks of ``owner``, oldest first."""
        return list(self._by_owner.get(owner, {}).values())

    def page(self, owner: Hashable, after: PageMark | None, limit: int) -> tuple[list[Task], PageMark | None]:
        """Up to ``limit`` of ``owner``'s tasks after ``after`` (oldest first), and the mark of the next page.

        Finds its place by position (a C-speed skip), checked against the id: when
        tasks before it were freed meanwhile, it looks the id up, else the creation time.
        """
        mine = self._by_owner.get(owner, {})
        start = 0
        if after is not None:
            position, last, created = after
            if next(itertools.islice(mine, position, None), None) == last:
                start = position + 1
            else:
                ids = list(mine)
                start = ids.index(last) + 1 if last in mine else sum(1 for t in mine.values() if t.created <= created)
        tasks = list(itertools.islice(mine.values(), start, start + limit))
        if not tasks or start + len(tasks) >= len(mine):
            return tasks, None
        end = start + len(tasks) - 1
        return tasks, (end, tasks[-1].id, tasks[-1].created)

    def count(self, owner: Hashable | None = None) -> int:
        """Tasks of ``owner``, or of everybody."""
        return len(self._tasks) if owner is None else len(self._by_owner.get(owner, ()))

    def __iter__(self) -> Iterator[Task]:
        return iter(list(self._tasks.values()))


class _TaskChannel(InputChannel):
    """The input channel of a task's call: its question waits on the task until answered.

    The task goes ``input_required`` with the question, and back to ``working`` when
    ``Tasks.answer`` delivers a response (an invalid answer is asked again, its
    problems as the status message). ``can_answer`` says whether the client can
    answer this kind of request at all; when it cannot the call fails at once with
    ``ELICITATION_UNSUPPORTED``, as for any call.
    """

    can_reask = True
    asks_together = True  # every part of a ``require_input.all`` in ``inputRequests`` at once

    def __init__(self, task: Task, can_answer: Callable[[InputRequest], bool]) -> None:
        self.task = task
        self.can_answer = can_answer

    async def ask(self, question: InputQuestion) -> InputResponse | None:
        """Wait on the task for the client's answer (cancelled with the call)."""
        task, request = self.task, question.request
        if not all(self.can_answer(part) for part in request.parts or (request,)):
            return None
        answered: dict[str, InputResponse] = {}
        event = new_event()
        task.question = question
        task.answered = frozenset()
        task._answer = (event, answered)
        message = " ".join(question.problems) if question.problems else request.message
        task._update(TaskStatus.INPUT_REQUIRED, message)
        try:
            await event.wait()
        finally:
            task._answer = None
            task.question = None
            task.answered = frozenset()
        task._update(TaskStatus.WORKING, None)
        if request.parts:
            return InputResponse(ACCEPT, dict(answered))
        return answered[request.key]


class Tasks:
    """The tasks of one app: ``create`` starts one, ``get``/``list``/``answer``/``cancel`` reach it.

    ``max_per_owner`` and ``max_total`` bound how many tasks (running or kept for
    their result) exist; beyond them ``create`` raises ``SERVER_BUSY``. ``clock`` is
    the time expiry is measured on (``anyio.current_time``: the running loop's).
    """

    def __init__(
        self,
        app: App,
        *,
        store: TaskStore | None = None,
        max_per_owner: int = 100,
        max_total: int = 1_000,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        if max_per_owner < 1 or max_total < 1:
            raise ValueError("task bounds must be at least 1")
        self.app = app
        self.store: TaskStore = store if store is not None else MemoryTaskStore()
        self.max_per_owner = max_per_owner
        self.max_total = max_total
        self.clock = clock
        self._expiry: list[tuple[float, int, str]] = []
        self._expiring: set[str] = set()  # ids of tasks stopped at their ttl, freed once their cleanup ran
        self._order = itertools.count()
        self._listeners: list[Callable[[Task], None]] = []
        #: seconds ``jobs.wait`` waits; ``None`` while job tools are off (``enable_job_tools``)
        self.job_wait: float | None = None
        #: where other workers' tasks are found (``share``); ``None``: this process's tasks only
        self.shared: SharedTasks | None = None

    def share(self, shared: SharedTasks) -> Callable[[], None]:
        """Reach other workers' tasks through ``shared`` (and show them ours); returns a function that stops it."""
        if self.shared is not None:
            raise RuntimeError("these tasks are already shared through a store")
        self.shared = shared

        def stop() -> None:
            if self.shared is shared:
                self.shared = None

        return stop

    # -- creating --------------------------------------------------------------------------
    def create(
        self,
        owner: Hashable,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        ttl: float | None = None,
        request_info: Any = None,
        can_answer: Callable[[InputRequest], bool] = lambda request: True,
        resume: Mapping[str, Any] | None = None,
        response: InputResponse | None = None,
    ) -> Task:
        """Start ``name`` as a task of ``owner`` and return it at once (its call runs detached).

        ``ttl`` (seconds) is what the client asked for; the tool's own ttl is the most it
        gets. Raises ``ToolError``: ``SERVER_BUSY`` beyond the bounds, ``INVALID_INPUT``
        for a ttl out of range. A call refused before it runs (unknown tool, invalid
        arguments) still makes a task, already final, whose result says why. ``resume`` and
        ``response`` continue a call whose first rounds of input were asked without a task
        (a continuation and its answer, as ``App.request`` takes them).
        """
        self.sweep()
        self._check_bounds(name, self.store.count(), self.store.count(owner))
        return self._create(owner, name, args, ttl, request_info, can_answer, resume, response)

    def _check_bounds(self, name: str, total: int, mine: int) -> None:
        if total >= self.max_total:
            raise ToolError(
                SERVER_BUSY,
                f'Tool "{name}" cannot start a task: this server already holds {self.max_total} tasks.',
                recovery="Retry once running tasks end or their results expire.",
                retry_after=5,
            )
        if mine >= self.max_per_owner:
            raise ToolError(
                SERVER_BUSY,
                f'Tool "{name}" cannot start a task: this client already holds {self.max_per_owner} tasks.',
                recovery="Wait for some to end, or cancel the ones you no longer need.",
                retry_after=5,
            )

    def _create(
        self,
        owner: Hashable,
        name: str,
        args: Mapping[str, Any] | None,
        ttl: float | None,
        request_info: Any,
        can_answer: Callable[[InputRequest], bool],
        resume: Mapping[str, Any] | None = None,
        response: InputResponse | None = None,
    ) -> Task:
        tool = self.app.get(name)
        options: TaskOptions = (tool.task if tool is not None else None) or TaskOptions()
        kept = options.ttl if ttl is None else min(float(ttl), options.ttl)
        task = Task(secrets.token_urlsafe(24), owner, name, args, kept, options.poll_interval, self.clock())
        self.store.put(task)
        heapq.heappush(self._expiry, (task.expires_at, next(self._order), task.id))
        channel = _TaskChannel(task, can_answer)
        task.call = call = _start_call(self.app, task, name, args, request_info, channel, resume, response)
        if not call.settled:
            timer = current_backend().call_later(max(0.0, task.expires_at - self.clock()), lambda: self._at_ttl(task))
            call.watch(lambda changed: timer.cancel() if changed.settled else None)
        if self._listeners:
            for listener in list(self._listeners):
                listener(task)
        return task

    def on_task(self, listener: Callable[[Task], None]) -> Callable[[], None]:
        """``listener(task)`` hears of every task created (activity views); returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # -- reaching a task ---------------------------------------------------------------------
    def get(self, owner: Hashable, task_id: object) -> Task | None:
        """The task ``task_id`` if ``owner`` owns it and it has not expired; else ``None``."""
        self.sweep()
        if not isinstance(task_id, str):
            return None
        task = self.store.get(task_id)
        return task if task is not None and task.owner == owner else None

    def list(self, owner: Hashable) -> list[Task]:
        """The tasks of ``owner``, oldest first."""
        self.sweep()
        return self.store.owned(owner)

    def page(self, owner: Hashable, after: Any, limit: int) -> tuple[builtins.list[Task], Any]:
        """One page of ``owner``'s tasks after the mark ``after`` (``None``: the first), and the next page's mark.

        A mark is JSON data (``None`` after the last page). A store without ``page``
        of its own is read whole and cut.
        """
        self.sweep()
        paged = getattr(self.store, "page", None)
        if paged is not None:
            return paged(owner, None if after is None else tuple(after), limit)  # type: ignore[no-any-return]
        every = self.store.owned(owner)
        start = int(after or 0)
        return every[start : start + limit], (start + limit if start + limit < len(every) else None)

    def __iter__(self) -> Iterator[Task]:
        """Every task of every owner (the notebook's own views; never shown to a client)."""
        self.sweep()
        return iter(self.store)

    def cancel(self, owner: Hashable, task_id: object) -> Task | None:
        """Abort the task's call (its cleanup runs, its slots free); ``None`` when there is no such task."""
        task = self.get(owner, task_id)
        if task is not None and not task.final and task.call is not None:
            task.call.cancel(CANCELLED)
        return task

    def answer(self, owner: Hashable, task_id: object, key: str, response: InputResponse) -> str | None:
        """Deliver the client's answer to the question ``key`` the task waits on.

        Returns ``None`` when delivered, or one sentence saying why not (no such task,
        or it waits on no question of that key). The parts of a ``require_input.all`` are
        answered one by one: the task stays ``input_required`` until the last one is.
        """
        task = self.get(owner, task_id)
        if task is None:
            return f"There is no task {_shown(task_id)} for this client."
        pending = task._answer  # (``None`` unless the call waits on a question now)
        refusal = _not_asked(task, key if pending is not None else None)
        if refusal is not None or pending is None:
            return refusal
        event, answered = pending
        answered[key] = response
        task.answered = frozenset(answered)
        if task.pending:
            task._update(TaskStatus.INPUT_REQUIRED, keep_message=True)  # (listeners see what is left)
        else:
            event.set()
        return None

    def forget(self, task_id: str, message: str) -> Task | None:
        """Drop a task of this process it may no longer answer for; returns it, or ``None``.

        Why: a shared store fences a worker whose lease lapsed (others have declared its
        tasks ended); its work must stop and lookups must read the store's record from
        then on. The task turns ``failed`` with ``message`` (what the others say) and its
        call is aborted, its cleanup run.
        """
        task = self.store.remove(task_id)
        if task is None:
            return None
        task._update(TaskStatus.FAILED, message)
        if task.call is not None and not task.call.settled:
            task.call.cancel(CANCELLED)
        return task

    # -- across workers: what every transport calls ------------------------------------------------
    # The same operations as above, reaching the tasks of other workers too when a shared
    # store is attached (``share``): this process's own tasks are found first, live.

    async def start(
        self,
        owner: Hashable,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        ttl: float | None = None,
        request_info: Any = None,
        can_answer: Callable[[InputRequest], bool] = lambda request: True,
        resume: Mapping[str, Any] | None = None,
        response: InputResponse | None = None,
    ) -> Task:
        """``create``, bounded across workers and visible to all of them before its id is returned."""
        shared = self.shared
        self.sweep()
        if shared is not None:
            self._check_bounds(name, await shared.count(), await shared.count(owner))
        else:
            self._check_bounds(name, self.store.count(), self.store.count(owner))
        task = self._create(owner, name, args, ttl, request_info, can_answer, resume, response)
        if shared is None:
            return task
        try:
            await shared.add(task)
        except BaseException:
            if task.call is not None:
                task.call.cancel(CANCELLED)  # nobody could ever reach it
            self.store.remove(task.id)
            raise
        return task

    async def find(self, owner: Hashable, task_id: object) -> Task | None:
        """``get``, or a copy of ``owner``'s task ``task_id`` that another worker runs."""
        task = self.get(owner, task_id)
        if self.shared is None or not isinstance(task_id, str):
            return task
        if task is not None:
            await self.shared.written(task)  # what this worker says, every worker says from now on
            return task
        task = await self.shared.fetch(task_id)
        return task if task is not None and task.owner == owner else None

    async def published(self, task: Task) -> None:
        """Return once what this worker says of ``task`` every worker says (its change is in the shared store).

        A push of a status (a listen stream's) waits on this: a client told ``completed``
        whose next ``tasks/get`` reaches another worker must not read ``working`` there.
        """
        if self.shared is not None and not task.remote:
            await self.shared.written(task)

    async def find_all(self, owner: Hashable) -> builtins.list[Task]:
        """``list`` across workers: ``owner``'s tasks (ours live, others' as copies), oldest first."""
        mine = self.list(owner)
        if self.shared is None:
            return mine
        for task in mine:
            await self.shared.written(task)
        here = {task.id for task in mine}
        copies = [task for task in await self.shared.owned(owner) if task.id not in here]
        return sorted([*mine, *copies], key=lambda task: task.created)

    async def find_page(self, owner: Hashable, after: Any, limit: int) -> tuple[builtins.list[Task], Any]:
        """``page`` across workers: one page read from the shared store, this worker's tasks live in it.

        A shared store without ``owned_page`` is read whole (``find_all``) and cut. The
        page's order is the shared store's; a task of this worker is shown live.
        """
        if self.shared is None:
            return self.page(owner, after, limit)
        self.sweep()
        paged = getattr(self.shared, "owned_page", None)
        if paged is None:
            every = await self.find_all(owner)
            start = int(after or 0)
            return every[start : start + limit], (start + limit if start + limit < len(every) else None)
        copies, mark = await paged(owner, after, limit)
        return [self.store.get(copy.id) or copy for copy in copies], mark

    async def stop(self, task: Task) -> None:
        """Abort ``task``'s call, here or on the worker that runs it (its cleanup runs there)."""
        if task.final:
            return
        if task.remote and self.shared is not None:
            await self.shared.cancel(task)
            # as for a local task, answer once it is cancelled (its worker settles it at once; the
            # copy hears of it within a write or two), bounded: a worker that died leaves it failed
            with anyio.move_on_after(RELAYED_STOP_WAIT):
                await task.wait()
        else:
            self.cancel(task.owner, task.id)
            if self.shared is not None:
                await self.shared.written(task)

    async def respond(self, task: Task, key: str, response: InputResponse) -> str | None:
        """``answer`` for a task found by ``find``: delivered here or relayed; ``None``, or why not."""
        if not task.remote or self.shared is None:
            return self.answer(task.owner, task.id, key, response)
        refusal = _not_asked(task, key)
        if refusal is None:
            await self.shared.answer(task, key, response)
        return refusal

    # -- expiry --------------------------------------------------------------------------------
    def sweep(self) -> int:
        """Free every task whose ttl has passed; returns how many (one still running is stopped, freed after)."""
        now = self.clock()
        expiry, freed = self._expiry, 0
        while expiry and expiry[0][0] <= now:
            _, _, task_id = heapq.heappop(expiry)
            task = self.store.get(task_id)
            if task is None:
                continue
            freed += 1
            if task.call is not None and (not task.final or task.id in self._expiring):
                self._at_ttl(task)
                continue
            self.store.remove(task_id)
            task.call = None
        return freed

    def _at_ttl(self, task: Task) -> None:
        """``task`` reached its ttl while its call runs: stop it now, free it once its cleanup has run."""
        call = task.call
        if call is None or task.final or self.store.get(task.id) is not task:
            return
        self._expiring.add(task.id)
        task._update(TaskStatus.CANCELLED, f"The task reached its ttl ({task.ttl:g} s); its call was stopped.")
        call.cancel(CANCELLED)
        spawn(lambda: self._free_stopped(task, call), f"fusion-nb task {task.id[:8]} ttl")

    async def _free_stopped(self, task: Task, call: Call) -> None:
        await call.wait_stopped()
        self._expiring.discard(task.id)
        if self.store.get(task.id) is task:
            self.store.remove(task.id)
            task.call = None
            if self.shared is not None:
                await self.shared.remove(task)


def _start_call(
    app: App,
    task: Task,
    name: str,
    args: Mapping[str, Any] | None,
    request_info: Any,
    channel: InputChannel,
    resume: Mapping[str, Any] | None = None,
    response: InputResponse | None = None,
) -> Call:
    """The one place a task's call is started (detached: it outlives the request that made the task)."""

    def on_progress(event: ProgressEvent) -> None:
        if event.message and not task.final:
            task._update(task.status, event.message)

    request = app.request(
        name,
        args,
        on_progress=on_progress,
        request_info=request_info,
        channel=channel,
        resume=resume,
        response=response,
    )
    call = app.start(request)
    if call.settled:
        _settled(task, call)
    else:
        call.watch(lambda changed: _settled(task, changed) if changed.settled else None)
    return call


def _settled(task: Task, call: Call) -> None:
    """Move the task to the final status its call settled with."""
    result = call.result
    if result is None or task.final:
        return
    if call.status == CallStatus.CANCELLED:
        task._update(TaskStatus.CANCELLED, "The task was cancelled; its call was aborted.")
    elif result.error is not None:
        task._update(TaskStatus.FAILED, result.error.message)
    else:
        task._update(TaskStatus.COMPLETED, task.status_message, keep_message=True)


def _not_asked(task: Task, key: str | None) -> str | None:
    """Why ``task`` takes no answer for ``key`` (``None``: it is waiting on exactly that question)."""
    waiting = [request.key for request in task.pending]
    if not waiting or key is None:
        return f'Task {_shown(task.id)} (tool "{task.tool_name}") is {task.status} and asks for no input.'
    if key not in waiting:
        asked = ", ".join(f'"{one}"' for one in waiting)
        return f'Task {_shown(task.id)} (tool "{task.tool_name}") asks for input {asked}, not {_shown(key)}.'
    return None


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return text if len(text) <= 40 else text[:37] + "..."


_BY_APP: weakref.WeakKeyDictionary[App, Tasks] = weakref.WeakKeyDictionary()


def tasks_of(app: App) -> Tasks:
    """The tasks of ``app``, made on first use: every server of the app and the notebook share them."""
    tasks = _BY_APP.get(app)
    if tasks is None:
        tasks = _BY_APP[app] = Tasks(app)
    return tasks
