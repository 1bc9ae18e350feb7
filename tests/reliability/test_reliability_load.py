"""Load with aborts: many real MCP clients over loopback HTTP, 30% of their calls aborted mid-flight.

The server is served the way ``%fusion serve`` serves it (the project's listening
socket, uvicorn in this loop). Each round, N clients of one protocol era call a mix
of a quick tool, a streaming tool with progress, a concurrency-limited tool and a
destructive one; 30% of calls are aborted (2026: the client drops the POST; 2025:
the client sends ``notifications/cancelled``). After every round nothing may be
left: no live call, no background task, no held slot, every entered body cleaned
up, file descriptors and threads back to the baseline, memory flat across rounds.

asyncio only: uvicorn runs on asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import random
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent
from reliability_app import LIMITED_MAX_ACTIVE, Tally, make_reliability_app
from reliability_support import (
    FIGURES,
    Budget,
    LoadRound,
    engine_residue,
    long_budget,
    open_fds,
    percentile,
    rss_mb,
)

from fusion_nb import Fusion
from fusion_nb.mcp.uvicorn_server import in_loop_server, listening_socket

pytestmark = [pytest.mark.reliability, pytest.mark.anyio, pytest.mark.asyncio_only]

ERAS = {"2025": "legacy", "2026": "auto"}
ABORT_SHARE = 0.3
#: Every wait for the server to come back to rest is bounded by this many seconds.
SETTLE_DEADLINE = 15.0
#: A call's own deadline grows with the crowd (200 clients queue behind one another on 2 cores);
#: it still catches a call that never answers.
CALL_DEADLINE_PER_CLIENT = 0.2
#: Memory may grow this much between consecutive measured rounds (allocator noise), and in total.
RSS_STEP_MB = 12.0
RSS_TOTAL_MB = 24.0


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Client counts come from the budget: 10 and 50 bounded, also 200 in ``make reliability``."""
    if "clients" in metafunc.fixturenames:
        counts = Budget.choose(long_budget(metafunc.config)).load_clients
        metafunc.parametrize("clients", counts, ids=[f"{n}-clients" for n in counts])


class Served:
    """A Fusion app served over loopback HTTP in this event loop, plus what its bodies counted."""

    def __init__(self, app: Fusion, tally: Tally, url: str, token: str) -> None:
        self.app, self.tally, self.url, self.token = app, tally, url, token
        self.live: dict[str, Any] = {}  # calls started and not yet seen settled (via public hooks)
        app.on_call(self._track)

    def _track(self, call: Any) -> None:
        self.live[call.id] = call

        def settled(c: Any) -> None:
            if c.settled:
                self.live.pop(c.id, None)

        call.watch(settled)
        if call.settled:
            self.live.pop(call.id, None)

    def never_settled(self) -> list[Any]:
        for call_id in [i for i, c in self.live.items() if c.settled]:
            self.live.pop(call_id)
        return list(self.live.values())

    @contextlib.asynccontextmanager
    async def client(self, mode: str) -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {self.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
            Client(streamable_http_client(self.url, http_client=http), mode=mode) as client,
        ):
            yield client


@contextlib.asynccontextmanager
async def serve() -> AsyncIterator[Served]:
    app, tally = make_reliability_app("reliability-load")
    asgi = app.http_app()
    sock = listening_socket()
    port = sock.getsockname()[1]
    # no dictConfig: uvicorn's records reach the root logger, where the test counts tracebacks
    server = in_loop_server(asgi, log_config=None, log_level="warning")
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        yield Served(app, tally, f"http://127.0.0.1:{port}/mcp", asgi.token)
    finally:
        server.should_exit = True
        with anyio.fail_after(SETTLE_DEADLINE):
            await task
        sock.close()
        await app.aclose()


class RoundResult:
    """What one round's clients saw: latencies of completed calls, aborts, and protocol errors."""

    def __init__(self, clients: int) -> None:
        self.clients = clients
        self.latencies: list[float] = []
        self.completed = 0
        self.aborted = 0
        self.errors: list[str] = []


PLAN = [("echo", 0.3), ("stream", 0.3), ("limited", 0.2), ("wipe", 0.2)]


async def one_client(
    served: Served, mode: str, calls: int, rng: random.Random, out: RoundResult, session: Client | None
) -> None:
    """One client: (connect,) make ``calls`` calls of the mix, abort some mid-flight, (disconnect)."""
    try:
        async with contextlib.AsyncExitStack() as stack:
            client = session if session is not None else await stack.enter_async_context(served.client(mode))
            for _ in range(calls):
                tool = rng.choices([t for t, _ in PLAN], [w for _, w in PLAN])[0]
                abort = tool != "echo" and rng.random() < ABORT_SHARE / 0.7
                await one_call(client, tool, abort, rng, out)
    except Exception as exc:  # a client that could not even connect or close is a protocol error
        out.errors.append(f"client: {type(exc).__name__}: {exc}"[:300])


@contextlib.asynccontextmanager
async def sessions(served: Served, mode: str, count: int) -> AsyncIterator[list[Client]]:
    """``count`` connected clients kept across rounds (all closed on exit)."""
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(served.client(mode)) for _ in range(count)]


async def one_call(client: Client, tool: str, abort: bool, rng: random.Random, out: RoundResult) -> None:
    progressed = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progressed.set()

    plans: dict[str, dict[str, Any]] = {
        "echo": {"text": "hello"},
        "stream": {"steps": 5, "delay": 0.01},
        "limited": {"delay": 0.02},
        "wipe": {"delay": 0.005},
    }
    arguments = plans[tool]
    expected = {"echo": "hello", "stream": "streamed 5", "limited": "done", "wipe": "wiped"}[tool]
    started = time.perf_counter()
    with anyio.CancelScope() as scope:
        if abort:

            async def aborter() -> None:
                if tool == "stream":
                    await progressed.wait()  # mid-stream, for sure
                else:
                    await anyio.sleep(rng.uniform(0, 0.03))  # queued or running
                scope.cancel()

            async with anyio.create_task_group() as group:
                group.start_soon(aborter)
                await call_and_check(client, tool, arguments, expected, on_progress, out)
                group.cancel_scope.cancel()
        else:
            await call_and_check(client, tool, arguments, expected, on_progress, out)
            out.latencies.append(time.perf_counter() - started)
    if scope.cancelled_caught:
        out.aborted += 1


async def call_and_check(
    client: Client, tool: str, arguments: dict[str, Any], expected: str, on_progress: Any, out: RoundResult
) -> None:
    deadline = SETTLE_DEADLINE + CALL_DEADLINE_PER_CLIENT * out.clients
    try:
        with anyio.fail_after(deadline):
            result = await client.call_tool(tool, arguments, progress_callback=on_progress)
    except TimeoutError:
        out.errors.append(f"{tool}: no answer within {deadline:g} s")
        return
    except Exception as exc:
        out.errors.append(f"{tool}: {type(exc).__name__}: {exc}"[:300])
        return
    block = result.content[0] if result.content else None
    text = block.text if isinstance(block, TextContent) else ""
    if result.is_error or text != expected:
        out.errors.append(f"{tool}: unexpected result {text[:200]!r}")
    else:
        out.completed += 1


async def eventually(predicate: Any, deadline: float = SETTLE_DEADLINE) -> bool:
    """Wait (bounded) until ``predicate()`` holds; the loop keeps serving meanwhile."""
    with anyio.move_on_after(deadline):
        while not predicate():
            await anyio.sleep(0.01)
        return True
    return bool(predicate())


async def run_round(
    served: Served, mode: str, clients: list[Client | None], calls: int, seed: int
) -> tuple[RoundResult, float]:
    """One round: every client (``None``: a fresh connection) makes its calls concurrently."""
    out = RoundResult(len(clients))
    rng = random.Random(seed)
    started = time.perf_counter()
    with anyio.fail_after(120):  # a round that cannot finish in two minutes is a hang
        async with anyio.create_task_group() as group:
            for index, session in enumerate(clients):
                group.start_soon(one_client, served, mode, calls, random.Random(rng.random() + index), out, session)
    return out, time.perf_counter() - started


def server_tracebacks(records: list[logging.LogRecord]) -> list[str]:
    """Server-side log records carrying a traceback (an aborted request is one quiet line, issue 11)."""
    return [
        f"{r.name}: {r.getMessage()[:120]}"
        for r in records
        if r.exc_info and not r.name.startswith(("mcp.client", "httpx", "httpcore"))
    ]


async def back_to_rest(served: Served, fds: int, threads: int) -> list[str]:
    """Wait (bounded) for the server to come back to rest; what did not is returned as leaks."""
    app, tally = served.app, served.tally
    leaks = []
    if not await app.wait_background(SETTLE_DEADLINE):
        leaks.append(f"background tasks still running after {SETTLE_DEADLINE:g} s: {app.background_tasks}")
    if not await eventually(lambda: not app.active_calls):
        leaks.append(f"active calls left: {app.active_calls}")
    if not await eventually(lambda: tally.entered == tally.cleaned):
        leaks.append(f"handlers entered {tally.entered} != cleanups finished {tally.cleaned}")
    if not await eventually(lambda: open_fds() <= fds):
        leaks.append(f"file descriptors {open_fds()} > baseline {fds}")
    if not await eventually(lambda: threading.active_count() <= threads):
        leaks.append(f"threads {threading.active_count()} > baseline {threads}")
    unsettled = served.never_settled()
    if unsettled:
        FIGURES.never_settled += len(unsettled)
        leaks.append(f"never-settled calls: {unsettled[:5]}")
    return leaks


@pytest.mark.parametrize("era", list(ERAS))
async def test_load_with_aborts(era: str, clients: int, budget: Budget, caplog: pytest.LogCaptureFixture) -> None:
    """Rounds of N clients with 30% aborts; after each: no error, no leak, limits held, memory flat.

    (``make test`` runs 3 rounds per client count, ``make reliability`` 5.)
    """
    mode = ERAS[era]
    caplog.set_level(logging.INFO)
    async with serve() as served:
        warm, _ = await run_round(served, mode, [None] * (10 if budget.reconnect_each_round else 2), 2, seed=0)
        assert not warm.errors, warm.errors[:5]
        await back_to_rest(served, open_fds() + 1000, threading.active_count() + 1000)
        gc.collect()
        fds, threads = open_fds(), threading.active_count()
        served.tally.reset_peaks()
        rounds: list[LoadRound] = []
        async with contextlib.AsyncExitStack() as stack:
            if budget.reconnect_each_round:
                kept: list[Client | None] = [None] * clients
                round_fds = fds
            else:  # sessions stay open: a round may leave one pooled connection per client, no more
                kept = list(await stack.enter_async_context(sessions(served, mode, clients)))
                warm, _ = await run_round(served, mode, kept, 1, seed=0)
                assert not warm.errors, warm.errors[:5]
                await back_to_rest(served, open_fds() + 1000, threads)
                round_fds = open_fds() + clients
            for number in range(1, budget.load_rounds + 1):
                caplog.clear()
                result, seconds = await run_round(served, mode, kept, budget.calls_per_client, seed=number)
                leaks = await back_to_rest(served, round_fds, threads)
                tracebacks = server_tracebacks(caplog.records)
                gc.collect()
                row = LoadRound(
                    era=era,
                    clients=clients,
                    round=number,
                    calls=result.completed + result.aborted,
                    aborted=result.aborted,
                    protocol_errors=len(result.errors),
                    seconds=seconds,
                    p50_ms=1000 * percentile(result.latencies, 0.5),
                    p99_ms=1000 * percentile(result.latencies, 0.99),
                    rss_mb=rss_mb(),
                    server_tracebacks=len(tracebacks),
                    leaks=leaks,
                )
                rounds.append(row)
                FIGURES.rounds.append(row)
                assert not result.errors, f"round {number}: {len(result.errors)} protocol errors: {result.errors[:5]}"
                assert not leaks, f"round {number}: {leaks}"
                assert not tracebacks, (
                    f"round {number}: the server logged {len(tracebacks)} tracebacks: {tracebacks[:3]}"
                )
        final = await back_to_rest(served, fds, threads)  # every client gone: back to the baseline exactly
        assert not final, f"after the clients left: {final}"
        tally = served.tally
        FIGURES.entered += tally.entered
        FIGURES.cleaned += tally.cleaned
        FIGURES.peak("limited", tally.peak["limited"], LIMITED_MAX_ACTIVE)
        FIGURES.peak("wipe (destructive)", tally.peak["wipe"], 1)
        assert tally.peak["limited"] <= LIMITED_MAX_ACTIVE, f"{tally.peak['limited']} limited bodies ran at once"
        assert tally.peak["wipe"] <= 1, f"{tally.peak['wipe']} destructive bodies ran at once"
        assert sum(r.aborted for r in rounds) > 0, "no call was aborted: the test did not test aborts"
        measured = [r.rss_mb for r in rounds[1:]]  # the first measured round still fills caches
        for before, after in itertools.pairwise(measured):
            assert after - before <= RSS_STEP_MB, f"RSS grew {after - before:.1f} MB in one round: {measured}"
        assert max(measured) - measured[0] <= RSS_TOTAL_MB, f"RSS grew over the rounds: {measured}"
        residue = engine_residue(served.app)  # slots, serializers, abandoned threads: needs app.stats()
        assert not residue, residue


async def test_sequential_calls_do_not_wait_for_delayed_acks() -> None:
    """20 sequential calls over the project's own listening socket: median well under 40 ms (TCP_NODELAY)."""
    async with serve() as served:
        headers = {
            "Authorization": f"Bearer {served.token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "echo",
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "echo",
                "arguments": {"text": "ping"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        latencies = []
        async with httpx.AsyncClient(timeout=10) as http:
            for index in range(25):
                started = time.perf_counter()
                response = await http.post(served.url, json=body, headers=headers)
                if index >= 5:  # the first calls import and warm caches
                    latencies.append(time.perf_counter() - started)
                assert response.status_code == 200, response.text
        median = 1000 * percentile(latencies, 0.5)
        FIGURES.notes.append(f"sequential call over the kernel-style socket: p50 {median:.1f} ms")
        assert median < 15, f"median sequential call took {median:.1f} ms: delayed ACKs (TCP_NODELAY missing?)"
