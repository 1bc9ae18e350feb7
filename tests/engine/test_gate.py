"""The host's gate: calls wait before their bodies while its own work (a person's cell) runs.

Deterministic: the gate's admission interval is an hour unless a test lets the timer
admit, so only ``open()`` lets a held call through; events, not sleeps.
"""

import contextvars

import anyio
import pytest

from fusion_nb.engine import CANCELLED
from fusion_nb.engine.lowlevel import Gate

pytestmark = pytest.mark.anyio

HOUR = 3600.0
#: the calls a test's "cell" makes itself (the gate lets them through)
in_cell: contextvars.ContextVar[bool] = contextvars.ContextVar("in_cell", default=False)


def cell_gate(app, interval: float = HOUR, burst: int = 1) -> Gate:
    gate = app.gate = Gate(interval=interval, burst=burst, applies=lambda: not in_cell.get())
    return gate


def start_in_cell(app, name, args):
    token = in_cell.set(True)
    try:
        return app.start(name, args)
    finally:
        in_cell.reset(token)


async def test_a_call_waiting_behind_a_cell_completes_after_it(app):
    log = []

    @app.f.query("echo").with_string("text").handle
    async def echo(input, ctx):
        log.append(f"body {input.text}")
        return input.text

    gate = cell_gate(app)
    gate.close()  # the cell starts
    detached = app.start("echo", {"text": "detached"})
    inline = {}

    async def served():  # the MCP path: the call runs in the awaiting task
        inline["result"] = await app.run(app.request("echo", {"text": "inline"}))

    async with anyio.create_task_group() as group:
        group.start_soon(served)
        await anyio.wait_all_tasks_blocked()
        assert gate.waiting == 2 and log == [] and detached.status == "queued"
        log.append("cell ends")
        gate.open()
    assert (await detached.wait()).value == "detached" and inline["result"].value == "inline"
    assert log[0] == "cell ends" and sorted(log[1:]) == ["body detached", "body inline"]
    assert gate.waiting == 0


async def test_the_cells_own_calls_pass_a_closed_gate(app):
    @app.f.query("echo").with_string("text").handle
    async def echo(input, ctx):
        return input.text

    gate = cell_gate(app)
    gate.close()
    assert (await start_in_cell(app, "echo", {"text": "mine"}).wait()).value == "mine"
    assert gate.waiting == 0
    gate.open()


async def test_a_closed_gate_admits_a_bounded_share_in_order_and_loses_nothing(app):
    order = []

    @app.f.query("echo").with_string("text").handle
    async def echo(input, ctx):
        order.append(input.text)
        return input.text

    gate = cell_gate(app, interval=0.001, burst=2)
    gate.close()  # and never opened: the timer lets them through, two at a time
    calls = [app.start("echo", {"text": str(n)}) for n in range(7)]
    assert [(await call.wait()).value for call in calls] == [str(n) for n in range(7)]
    assert sorted(order) == [str(n) for n in range(7)] and gate.closed and gate.waiting == 0
    gate.open()


async def test_order_is_kept_within_a_mutation_queue_across_the_gate(app):
    """A mutation passes the gate behind its serializer: the cell's own call cannot overtake an agent's."""
    order = []

    @app.f.mutation("save").with_string("who").handle
    async def save(input, ctx):
        order.append(input.who)
        return input.who

    gate = cell_gate(app)
    gate.close()
    first = app.start("save", {"who": "agent 1"})
    await anyio.wait_all_tasks_blocked()
    mine = start_in_cell(app, "save", {"who": "cell"})
    await anyio.wait_all_tasks_blocked()  # (trio starts tasks in any order: queue them one by one)
    last = app.start("save", {"who": "agent 2"})
    await anyio.wait_all_tasks_blocked()
    assert order == [] and gate.waiting == 1  # agent 1 holds the serializer, waiting at the gate
    gate.open()
    for call in (first, mine, last):
        await call.wait()
    assert order == ["agent 1", "cell", "agent 2"]


async def test_nothing_is_lost_when_a_waiting_call_is_cancelled_or_its_caller_goes(app):
    ran = []

    @app.f.query("echo").with_string("text").handle
    async def echo(input, ctx):
        ran.append(input.text)
        return input.text

    gate = cell_gate(app)
    gate.close()
    a, b, c = (app.start("echo", {"text": t}) for t in "abc")
    gone = {}

    async def served():
        with anyio.CancelScope() as scope:
            gone["scope"] = scope
            await app.run(app.request("echo", {"text": "gone"}))

    async with anyio.create_task_group() as group:
        group.start_soon(served)
        await anyio.wait_all_tasks_blocked()
        assert gate.waiting == 4
        b.cancel()  # Stop in the panel while it waits
        gone["scope"].cancel()  # the client went (an interrupt of its request)
        await anyio.wait_all_tasks_blocked()
        assert gate.waiting == 2
        gate.open()
    assert (await a.wait()).value == "a" and (await c.wait()).value == "c"
    assert (await b.wait()).error.code == CANCELLED
    assert sorted(ran) == ["a", "c"] and gate.waiting == 0


async def test_a_gate_refuses_a_rate_that_admits_nothing():
    with pytest.raises(ValueError, match="at least one call"):
        Gate(burst=0)
    with pytest.raises(ValueError, match="positive"):
        Gate(interval=0)
