"""Every call settles and every limit holds, whatever a carelessly written handler does (issue 10).

One test (or one parametrized family) per numbered symptom of issue 10, items 1-8, each
failing on the engine before the fix for the reason the issue gives and passing after
it; all on asyncio and trio unless the symptom is asyncio's own. Only the public API is
used: ``fusion_nb.Fusion``, the ``fusion_nb.engine`` exports, ``call.status``,
``call.cancel()``, ``call.wait()``, ``call.watch()`` and ``app.stats()`` (TEAM.md item 7).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import pytest
from engine_helpers import assert_idle, fusion_tasks, run_in_mode, start_inline, until

from fusion_nb import Fusion
from fusion_nb.engine import (
    CANCELLED,
    INTERNAL_ERROR,
    SERVER_BUSY,
    TIMEOUT,
    Aborted,
    Call,
    CallResult,
    ToolError,
    progress,
    respond,
)

pytestmark = pytest.mark.anyio

KINDS = ("async", "async_gen", "sync", "sync_gen")
MODES = ("detached", "inline")
SECRET_PATH = "/srv/acme/secrets/db-credentials.ini"


@pytest.fixture
async def make_app() -> AsyncIterator[Callable[..., Fusion]]:
    """Apps with options of their own (grace, max_abandoned_threads), leak-checked afterwards."""
    apps: list[Fusion] = []

    def make(**options: Any) -> Fusion:
        app = Fusion("settling", **{"grace": 2.0, **options})
        apps.append(app)
        return app

    yield make
    for app in apps:
        assert await app.wait_background(5), "background tasks did not finish"
        assert_idle(app)
    assert fusion_tasks() == []


@pytest.fixture
def app(make_app: Callable[..., Fusion]) -> Fusion:
    """The default app (grace 2 s), leak-checked by ``make_app``."""
    return make_app()


def mentions_call(record: logging.LogRecord, call: Call) -> bool:
    """The record's own message names the call id (not merely its traceback)."""
    return re.search(rf"(?<!\d){re.escape(str(call.id))}(?!\d)", record.getMessage()) is not None


def engine_records(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[logging.LogRecord]:
    """The engine's own log records at ``level`` or above."""
    return [r for r in caplog.records if r.name.startswith("fusion_nb") and r.levelno >= level]


def raising(kind: str, make_exc: Callable[[], BaseException]) -> Callable[..., Any]:
    """A handler of ``kind`` that raises ``make_exc()`` (generators after one progress event)."""
    if kind == "async":

        async def handler(input: Any, ctx: Any) -> Any:
            raise make_exc()

        return handler
    if kind == "async_gen":

        async def agen(input: Any, ctx: Any) -> Any:
            yield progress(10)
            raise make_exc()

        return agen
    if kind == "sync":

        def sync(input: Any, ctx: Any) -> Any:
            raise make_exc()

        return sync

    def sgen(input: Any, ctx: Any) -> Any:
        yield progress(10)
        raise make_exc()

    return sgen


def returning(kind: str, value: Any) -> Callable[..., Any]:
    """A handler of ``kind`` that returns ``value`` at once (generators after one progress event)."""
    if kind == "async":

        async def handler(input: Any, ctx: Any) -> Any:
            return value

        return handler
    if kind == "async_gen":

        async def agen(input: Any, ctx: Any) -> Any:
            yield progress(50)
            yield respond(value)

        return agen
    if kind == "sync":
        return lambda input, ctx: value

    def sgen(input: Any, ctx: Any) -> Any:
        yield progress(50)
        return value

    return sgen


async def run_to_result(call: Call) -> CallResult:
    """The call's result, or a clear failure instead of a hang when it never settles."""
    with anyio.fail_after(5):
        return await call.wait()


@contextlib.contextmanager
def release_on_exit(*events: Any) -> Iterator[None]:
    """Set the events that let stuck bodies end even when the test fails (no hang, no stray thread)."""
    try:
        yield
    finally:
        for event in events:
            event.set()


# -- 1. Aborted raised without any abort -------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
async def test_1_a_handler_raising_aborted_without_an_abort_settles_internal_error(
    app: Fusion, kind: str, mode: str
) -> None:
    """Before the fix: detached, the call stayed ``running`` forever; inline, ``Call.wait`` failed an assert."""
    app.f.action("liar").handle(raising(kind, lambda: Aborted(CANCELLED)))
    call, result = await run_in_mode(app, mode, "liar")
    assert result.error is not None and result.error.code == INTERNAL_ERROR, result
    assert "Aborted" in result.error.message
    assert call.status == "failed"
    assert call not in app.active_calls


# -- 2. a CancelledError the engine did not cause (asyncio) -------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("source", ["future", "task"])
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # trio has no cancellation without a scope
async def test_2_a_foreign_cancellation_settles_internal_error_and_the_awaiting_task_survives(
    app: Fusion, anyio_backend: str, source: str, mode: str
) -> None:
    """Before the fix the CancelledError escaped: the call never settled (or killed its awaiting task)."""
    loop = asyncio.get_running_loop()
    awaited: asyncio.Future[Any] = (
        loop.create_future() if source == "future" else loop.create_task(asyncio.sleep(3600), name="someone else's")
    )
    entered = anyio.Event()

    @app.f.action("fragile").handle
    async def fragile(input: Any, ctx: Any) -> Any:
        entered.set()
        return await awaited

    calls: list[Call] = []
    app.on_call(calls.append)
    outcome: list[Any] = []

    async def waiter() -> None:
        try:
            outcome.append(await (app.run(app.request("fragile")) if mode == "inline" else app.start("fragile").wait()))
        except asyncio.CancelledError:
            outcome.append("the foreign cancellation escaped into the awaiting task")
            return
        await asyncio.sleep(0)  # a task with a pending cancellation would raise here
        task = asyncio.current_task()
        assert task is not None
        outcome.append(task.cancelling())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(waiter)
            await entered.wait()
            awaited.cancel()  # somebody else cancels what the handler awaits
    result, (call,) = outcome[0], calls
    assert isinstance(result, CallResult), result
    assert result.error is not None and result.error.code == INTERNAL_ERROR, result
    assert "CancelledError" in result.error.message
    assert call.status == "failed" and call not in app.active_calls
    assert outcome[1] == 0, "the awaiting task was left with a cancellation request"


# -- 3. a call's slot is held only while its body runs ---------------------------------------


async def test_3_a_request_never_run_holds_no_slot(app: Fusion) -> None:
    """Before the fix an un-awaited inline handle took the only slot at ``start()``: every later call was refused.

    A request is data until it runs; runs in either mode leave the slot free.
    """

    @app.f.action("single").concurrency(1, 0).handle
    async def single(input: Any, ctx: Any) -> str:
        return "ran"

    forgotten = app.request("single")
    with anyio.fail_after(5):
        detached = await app.call("single")
        inline = await app.run(app.request("single"))
    assert (detached.value, inline.value) == ("ran", "ran"), (detached, inline)
    stats = app.stats()
    assert (stats.slots_active, stats.slots_queued) == (0, 0), stats
    assert (await app.run(forgotten)).value == "ran"  # running it later is what takes the slot


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
async def test_3_5_a_settled_call_has_given_its_slot_back(app: Fusion, kind: str, mode: str) -> None:
    """Slots are held until the body stops, and no longer: a caller that got its answer may call again at once.

    (Guards the fix of items 3 and 5: releasing the slot after the call settles, e.g. in a
    done-callback, makes a sequential caller of a ``.concurrency(1, 0)`` tool see SERVER_BUSY.)
    """
    app.f.action("single").concurrency(1, 0).handle(returning(kind, "ran"))
    for _ in range(3):
        _, result = await run_in_mode(app, mode, "single")
        assert result.value == "ran", result


# -- 4. raising listeners and signal callbacks -------------------------------------------

LISTENER_CASES = [
    ("on_call", "finish"),
    ("on_call", "cancel"),
    ("on_call", "timeout"),
    ("on_abort", "cancel"),
    ("on_abort", "timeout"),
    ("watch", "finish"),
    ("watch", "cancel"),
    ("watch", "timeout"),
]


@pytest.mark.parametrize(("listener", "ending"), LISTENER_CASES)
async def test_4_a_raising_listener_or_abort_callback_never_stops_a_call_settling(
    app: Fusion, caplog: pytest.LogCaptureFixture, listener: str, ending: str
) -> None:
    """Before the fix ``start()`` raised (on_call), ``cancel()`` raised or the timeout worker
    returned unsettled (on_abort), and a watch failure was logged without the call id."""
    caplog.set_level(logging.DEBUG, logger="fusion_nb")
    entered = anyio.Event()

    def broken(*args: Any) -> None:
        raise RuntimeError("listener broke")

    builder = app.f.action("listened")
    if ending == "timeout":
        builder = builder.timeout(0.05)

    @builder.handle
    async def listened(input: Any, ctx: Any) -> str:
        if listener == "on_abort":
            ctx.signal.on_abort(broken)
        entered.set()
        if ending == "finish":
            return "finished"
        await anyio.sleep_forever()
        return "never"

    if listener == "on_call":
        app.on_call(broken)
    call = app.start("listened")  # returns normally
    if listener == "watch":
        call.watch(broken)
    if ending == "cancel":
        await entered.wait()
        assert call.cancel() is True  # returns normally
    result = await run_to_result(call)

    expected = {"finish": None, "cancel": CANCELLED, "timeout": TIMEOUT}[ending]
    assert (result.error.code if result.error else None) == expected, result
    assert call.status == {"finish": "done", "cancel": "cancelled", "timeout": "timed out"}[ending]
    assert call not in app.active_calls
    assert await app.wait_background(5)
    failures = [
        r
        for r in engine_records(caplog, logging.ERROR)
        if r.exc_info and isinstance(r.exc_info[1], RuntimeError) and str(r.exc_info[1]) == "listener broke"
    ]
    assert failures, "the listener's failure was not logged"
    assert all(mentions_call(r, call) for r in failures), [r.getMessage() for r in failures]


# -- 5. sync bodies that ignore their signal ---------------------------------------------


async def test_5_abandoned_sync_bodies_keep_their_slots_and_have_a_bounded_pool_of_their_own(
    make_app: Callable[..., Fusion],
) -> None:
    """Before the fix 120 aborted calls of a ``.concurrency(2, 0)`` tool ran 60 bodies at once on asyncio,
    and on trio the abandoned threads filled anyio's pool so an unrelated sync tool waited."""
    app = make_app(max_abandoned_threads=4)
    lock, release = threading.Lock(), threading.Event()
    inside: dict[str, int] = {"deaf": 0, "careless": 0}
    most: dict[str, int] = {"deaf": 0, "careless": 0}
    entered: dict[tuple[str, int], threading.Event] = {}

    def deaf_body(name: str) -> Callable[..., str]:
        def body(input: Any, ctx: Any) -> str:  # never looks at ctx.signal
            with lock:
                inside[name] += 1
                most[name] = max(most[name], inside[name])
            try:
                entered[name, input.i].set()
                release.wait(30)
                return "late"
            finally:
                with lock:
                    inside[name] -= 1

        return body

    app.f.action("deaf").with_integer("i").concurrency(2, 0).handle(deaf_body("deaf"))
    app.f.action("careless").with_integer("i").handle(deaf_body("careless"))
    app.f.action("unrelated").handle(lambda input, ctx: "prompt")

    async def start_and_abort(name: str, i: int) -> CallResult:
        entered[name, i] = threading.Event()
        call = app.start(name, {"i": i})
        if not call.settled:
            await until(entered[name, i].is_set)
            assert call.cancel()
        return await run_to_result(call)

    with release_on_exit(release):
        await deaf_scenario(app, release, start_and_abort, inside, most, entered)


async def deaf_scenario(
    app: Fusion,
    release: threading.Event,
    start_and_abort: Callable[[str, int], Any],
    inside: dict[str, int],
    most: dict[str, int],
    entered: dict[tuple[str, int], threading.Event],
) -> None:
    """The body of test 5 (the test wraps it so the deaf bodies are always let go)."""
    deaf = [await start_and_abort("deaf", i) for i in range(120)]
    codes = [r.error.code if r.error else None for r in deaf]
    assert codes[:2] == [CANCELLED, CANCELLED]
    assert set(codes[2:]) == {SERVER_BUSY}, "the two aborted bodies still run: their slots are still held"
    assert most["deaf"] <= 2

    # A tool without a limit fills the abandoned-thread pool, then is refused.
    careless = []
    for i in range(10):
        careless.append(await start_and_abort("careless", i))
        if careless[-1].error is not None and careless[-1].error.code == SERVER_BUSY:
            break
    assert [r.error.code for r in careless if r.error] == [CANCELLED, CANCELLED, SERVER_BUSY]
    busy = careless[-1].error
    assert busy is not None and "thread" in busy.message
    stats = app.stats()
    assert (stats.threads_abandoned, stats.threads_running) == (4, 4), stats
    assert most["careless"] <= 2

    with anyio.fail_after(2):  # generous: catches waiting on a starved pool, not a slow machine
        assert (await app.call("unrelated")).value == "prompt"

    release.set()
    assert await app.wait_background(5)
    assert inside == {"deaf": 0, "careless": 0}
    assert_idle(app)
    entered["deaf", 999] = threading.Event()
    again = await run_to_result(app.start("deaf", {"i": 999}))  # the tool takes calls again
    assert again.value == "late"


# -- 6. grace is one rule on both backends ---------------------------------------------


@pytest.mark.parametrize(
    ("anyio_backend", "cleanup"), [("asyncio", "shielded"), ("trio", "shielded"), ("asyncio", "plain")]
)
async def test_6_grace_only_warns_once_and_the_cleanup_runs_to_its_end_holding_its_slot(
    make_app: Callable[..., Fusion], caplog: pytest.LogCaptureFixture, anyio_backend: str, cleanup: str
) -> None:
    """Before the fix asyncio interrupted the cleanup after grace (trio did not), and both released the slot."""
    caplog.set_level(logging.DEBUG, logger="fusion_nb")
    app = make_app(grace=0.3)
    entered, may_finish, cleaned = anyio.Event(), anyio.Event(), anyio.Event()

    @app.f.action("tidy").with_string("role").concurrency(1, 0).handle
    async def tidy(input: Any, ctx: Any) -> str:
        if input.role == "probe":
            return "probe ran"
        try:
            entered.set()
            await anyio.sleep_forever()
        finally:
            # A cleanup that outlives grace (it ends when the test says so, well after grace).
            if cleanup == "shielded":
                with anyio.CancelScope(shield=True):
                    await may_finish.wait()
                    await anyio.sleep(0.01)
            else:
                await may_finish.wait()
                await anyio.sleep(0.01)
            cleaned.set()
        return "never"

    with release_on_exit(may_finish):
        await grace_scenario(app, caplog, entered, may_finish, cleaned)


async def grace_scenario(
    app: Fusion, caplog: pytest.LogCaptureFixture, entered: anyio.Event, may_finish: anyio.Event, cleaned: anyio.Event
) -> None:
    """The body of test 6 (the test wraps it so the cleanup is always let go)."""
    call = app.start("tidy", {"role": "slow"})
    await entered.wait()
    aborted_at = time.monotonic()
    assert call.cancel()
    result = await run_to_result(call)
    assert result.error is not None and result.error.code == CANCELLED  # the answer never waits for cleanup

    def overdue() -> list[logging.LogRecord]:
        return [r for r in engine_records(caplog, logging.WARNING) if "tidy" in r.getMessage()]

    await until(lambda: bool(overdue()))
    assert time.monotonic() - aborted_at >= 0.25, "warned before the grace period was over"
    assert not cleaned.is_set()
    busy = await app.call("tidy", {"role": "probe"})
    assert busy.error is not None and busy.error.code == SERVER_BUSY, "the slot was released before cleanup ended"
    assert app.stats().slots_active == 1

    may_finish.set()
    with anyio.fail_after(5):
        await cleaned.wait()  # never interrupted by the engine
    assert await app.wait_background(5)
    assert len(overdue()) == 1 and mentions_call(overdue()[0], call), [r.getMessage() for r in overdue()]
    assert (await app.call("tidy", {"role": "probe"})).value == "probe ran"


# -- 7. an exception raised in cleanup after an abort ------------------------------------


def breaking_cleanup(kind: str, stuck: threading.Event) -> Callable[..., Any]:
    """A handler stuck until aborted (sync kinds poll ``ctx.signal``) whose ``finally`` raises."""
    pause = threading.Event()
    if kind == "async":

        async def handler(input: Any, ctx: Any) -> Any:
            try:
                stuck.set()
                await anyio.sleep_forever()
            finally:
                raise RuntimeError("cleanup broke")

        return handler
    if kind == "async_gen":

        async def agen(input: Any, ctx: Any) -> Any:
            try:
                yield progress(10)
                stuck.set()
                await anyio.sleep_forever()
            finally:
                raise RuntimeError("cleanup broke")

        return agen
    if kind == "sync":

        def sync(input: Any, ctx: Any) -> Any:
            try:
                stuck.set()
                for _ in range(2000):  # (bounded: a failing test leaves no thread behind)
                    if ctx.signal.aborted:
                        break
                    pause.wait(0.005)
            finally:
                raise RuntimeError("cleanup broke")

        return sync

    def sgen(input: Any, ctx: Any) -> Any:
        try:
            yield progress(10)
            stuck.set()
            for _ in range(2000):
                if ctx.signal.aborted:
                    break
                pause.wait(0.005)
        finally:
            raise RuntimeError("cleanup broke")

    return sgen


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
async def test_7_an_exception_raised_in_cleanup_after_an_abort_is_logged(
    app: Fusion, caplog: pytest.LogCaptureFixture, kind: str, mode: str
) -> None:
    """Before the fix it vanished: no log record at any level."""
    caplog.set_level(logging.DEBUG, logger="fusion_nb")
    stuck = threading.Event()
    app.f.action("messy").handle(breaking_cleanup(kind, stuck))
    async with anyio.create_task_group() as group:
        call = await start_inline(group, app, app.request("messy")) if mode == "inline" else app.start("messy")
        await until(stuck.is_set)
        assert call.cancel()
    result = await run_to_result(call)
    assert result.error is not None and result.error.code == CANCELLED
    assert await app.wait_background(5)
    logged = [
        r
        for r in engine_records(caplog, logging.WARNING)
        if r.exc_info and isinstance(r.exc_info[1], RuntimeError) and str(r.exc_info[1]) == "cleanup broke"
    ]
    assert len(logged) == 1, [r.getMessage() for r in engine_records(caplog, logging.DEBUG)]
    assert "messy" in logged[0].getMessage() and mentions_call(logged[0], call), logged[0].getMessage()


# -- 8. nothing internal reaches a client ------------------------------------------------


def client_text(result: CallResult) -> str:
    """Everything a client of this result could read."""
    return json.dumps([result.content, result.structured_content, str(result.error)], default=str)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
async def test_8_an_unexpected_exception_gives_its_class_tool_and_error_id_never_its_text(
    app: Fusion, caplog: pytest.LogCaptureFixture, kind: str, mode: str
) -> None:
    """Before the fix the client read ``FileNotFoundError: [Errno 2] ... '/srv/acme/secrets/...'``."""
    caplog.set_level(logging.DEBUG, logger="fusion_nb")
    raised: list[BaseException] = []

    def missing_file() -> BaseException:
        exc = FileNotFoundError(2, "No such file or directory", SECRET_PATH)
        raised.append(exc)
        return exc

    app.f.action("report").handle(raising(kind, missing_file))
    _, result = await run_in_mode(app, mode, "report")

    assert result.error is not None and result.error.code == INTERNAL_ERROR, result
    shown = client_text(result)
    assert SECRET_PATH not in shown and "secrets" not in shown and "No such file" not in shown, shown
    assert "FileNotFoundError" in result.error.message and "report" in result.error.message
    error_id = result.error_id
    assert error_id and error_id in result.error.message
    assert result.exception is raised[0]  # the notebook still shows its own person the traceback
    records = [r for r in engine_records(caplog, logging.ERROR) if error_id in r.getMessage()]
    assert len(records) == 1 and records[0].exc_info and records[0].exc_info[1] is raised[0]


@pytest.mark.parametrize("kind", KINDS)
async def test_8_a_tool_error_reaches_the_client_unchanged(app: Fusion, kind: str) -> None:
    """The author's own message is the author's to write: it passes through as it is (paths included)."""
    authored = ToolError("QUOTA_EXCEEDED", "The quota for /home/ann is used up.", recovery="Free some space.")
    app.f.action("quota").handle(raising(kind, lambda: authored))
    result = await run_to_result(app.start("quota"))
    assert result.error is not None
    assert (result.error.code, result.error.message, result.error.recovery) == (
        "QUOTA_EXCEEDED",
        "The quota for /home/ann is used up.",
        "Free some space.",
    )
    assert str(result.error) in client_text(result)
