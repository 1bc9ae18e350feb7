"""The activity panel at machine speed: quick calls cost no widget, long ones get a live row with Stop.

Driven in-process on a real app (asyncio: the panel's timers use the running loop, as
in a kernel). Widget models are counted in ``ipywidgets.Widget.widgets`` (every open
model, layouts and styles included) and state messages by ``Widget.send_state``.
"""

from __future__ import annotations

import json
import time
import warnings

import anyio
import ipywidgets as w
import pytest
from fusion_nb.widgets import ActivityPanel, CallView
from widget_helpers import until

from fusion_nb import ask, progress, read_input, require_input
from fusion_nb.engine import DeferToClient, InputResponse
from fusion_nb.engine.lowlevel import Gate

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


@pytest.fixture
def sends(monkeypatch):
    """Every widget state message sent while the test runs, as ``(model, state keys)``."""
    sent: list[tuple[str, tuple[str, ...]]] = []
    original = w.Widget.send_state

    def send_state(self, key=None):
        sent.append((type(self).__name__, tuple(key) if isinstance(key, (list, tuple)) else (key,)))
        return original(self, key)

    monkeypatch.setattr(w.Widget, "send_state", send_state)
    return sent


@pytest.fixture
def tools(app):
    @app.f.query("add").with_number("a").with_number("b").handle
    async def add(input, ctx):
        return input.a + input.b

    @app.f.action("boom").handle
    async def boom(input, ctx):
        raise ValueError("the flux capacitor is out of flux")

    @app.f.action("long").handle
    async def long(input, ctx):
        yield progress(40, "crunching")
        await anyio.sleep_forever()

    return app


def open_models() -> int:
    """Open widget models (``Widget.widgets`` is deprecated in ipywidgets 8.1 but still the registry)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return len(w.Widget.widgets)


async def settle_flushes(panel: ActivityPanel) -> None:
    """Let the panel's pending flush run (it is paced on the loop's clock; bounded)."""
    with anyio.fail_after(5):
        while panel.coalescer.pending:
            await anyio.sleep(0.02)


async def test_quick_calls_make_no_widget_and_show_in_the_summary_only(tools, sends):
    panel = ActivityPanel(tools, delay=3600)
    models = open_models()
    started = anyio.current_time()
    for i in range(300):
        await tools.call("add", {"a": i, "b": 1})
    await settle_flushes(panel)
    elapsed = anyio.current_time() - started
    assert open_models() == models, "a quick call costs no widget model"
    assert panel.live == {} and list(panel.recent) == []
    assert "300 calls in the last minute, 0 failed" in panel.header.value
    assert "300 calls in the last minute, 0 failed" in panel.text()
    # coalesced: at most 10 messages a second in total (plus the first and the last flush)
    assert len(sends) <= 10 * elapsed + 2, (len(sends), elapsed)
    panel.close()


async def test_a_long_call_gets_a_live_row_whose_stop_cancels_it_and_closes_every_model(tools):
    baseline = open_models()
    panel = ActivityPanel(tools, delay=0.05)
    with_panel = open_models()
    call = tools.start("long", {})
    await until(call, lambda c: c.progress is not None)
    with anyio.fail_after(5):
        while call not in panel.live:
            await anyio.sleep(0.01)
    row = panel.live[call]
    await settle_flushes(panel)
    assert "crunching" in row.label.value and "long" in row.label.value and "local" in row.label.value
    assert "1 live" in panel.header.value
    row.stop_button.click()
    result = await call.wait()
    assert result.error is not None and result.error.code == "CANCELLED"
    assert panel.live == {} and panel.recent[0].call is call
    assert open_models() == with_panel, "the live row's widgets, layouts and styles are all closed"
    await settle_flushes(panel)
    assert "CANCELLED" in panel.board.value and "cancelled" in panel.text()
    assert "1 call in the last minute, 0 failed, 1 cancelled" in panel.header.value, "a Stop is no failure"
    panel.close()
    assert open_models() == baseline, "closing the panel closes all of its models"
    assert tools._call_listeners == []


async def test_a_call_waiting_for_input_is_live_at_once(app):
    @app.f.action("confirm").interactive().handle
    async def confirm(input, ctx):
        if read_input("ok") is None:
            return require_input.elicit("Go?", {"ok": ask.boolean("OK")})
        return "went"

    class Waits:
        can_reask = False

        async def ask(self, question):
            await anyio.sleep_forever()

    panel = ActivityPanel(app, delay=3600)
    call = app.start(app.request("confirm", {}, channel=Waits()))
    await until(call, lambda c: c.status == "waiting")
    assert call in panel.live
    await settle_flushes(panel)
    assert "waiting for input" in panel.live[call].label.value and "Go?" in panel.live[call].label.value
    call.cancel()
    await call.wait()
    panel.close()


async def test_a_failed_quick_call_is_listed_with_its_error_in_full(tools):
    panel = ActivityPanel(tools, delay=3600)
    result = await tools.call("boom", {})
    await settle_flushes(panel)
    assert result.error is not None
    assert "1 call in the last minute, 1 failed" in panel.header.value
    assert result.error.message in panel.board.value.replace("&quot;", '"'), "the whole error is reachable"
    assert "ValueError" in panel.board.value, "a crash's traceback is folded under the row"
    assert "boom" in panel.text() and "INTERNAL_ERROR" in panel.text()
    panel.close()


async def test_live_row_shows_arguments_bounded_and_the_caller(tools):
    panel = ActivityPanel(tools, delay=0, origin=lambda: "client")

    @tools.f.action("slow.echo").with_string("text").handle
    async def slow_echo(input, ctx):
        await anyio.sleep_forever()

    call = tools.start("slow.echo", {"text": "x" * 500})
    with anyio.fail_after(5):
        while call not in panel.live:
            await anyio.sleep(0.01)
    await settle_flushes(panel)
    label = panel.live[call].label.value
    assert "client" in label and "xxxx" in label and "x" * 200 not in label, "arguments are bounded on the row"
    call.cancel()
    await call.wait()
    await settle_flushes(panel)
    assert "x" * 500 in panel.board.value, "the row's details hold the full arguments"
    panel.close()


async def test_a_2026_multi_round_call_is_one_row(app):
    @app.f.mutation("refund").with_string("id").interactive().handle
    async def refund(input, ctx):
        if read_input("confirm") is None:
            return require_input.elicit(f"Refund {input.id}?", {"confirm": ask.boolean("Approve")})
        return "refunded" if read_input("confirm") else "kept"

    panel = ActivityPanel(app, delay=3600, origin=lambda: "client")
    first = await app.run(app.request("refund", {"id": "inv-7"}, channel=DeferToClient()))
    assert first.input_required is not None
    await settle_flushes(panel)
    assert "waiting for the client" in panel.board.value and "1 waiting for a client" in panel.header.value
    cont = json.loads(json.dumps(first.input_required["continuation"]))
    answer = InputResponse("accept", {"confirm": True})
    done = await app.run(app.request("refund", {"id": "inv-7"}, channel=DeferToClient(), resume=cont, response=answer))
    assert done.value == "refunded"
    await settle_flushes(panel)
    assert panel.total == 1, "two engine calls, one call to a person"
    assert "1 call in the last minute, 0 failed" in panel.header.value
    assert "waiting for" not in panel.board.value + panel.header.value
    # two clients asking the same thing at once: one waiting row, and the other still counted
    both = [
        app.start(app.request("refund", {"id": "inv-8"}, channel=DeferToClient())) for _ in range(2)
    ]  # at the same time
    for call in both:
        await call.wait()
    await settle_flushes(panel)
    assert len(panel.continuing) == 1 and panel.total == 2, "the replaced waiting row is counted as ended"
    panel.close()


async def test_call_view_close_closes_layouts_and_styles(tools):
    models = open_models()
    call = tools.start("long", {})
    view = CallView(call)
    assert open_models() > models
    call.cancel()
    await call.wait()
    view.close()
    assert open_models() == models, "a closed view leaves no model open"


async def test_rounds_nobody_continues_cost_a_bounded_memory(app):
    from fusion_nb.widgets.activity import MAX_WAITING

    @app.f.mutation("refund").with_string("id").interactive().handle
    async def refund(input, ctx):
        return require_input.elicit(f"Refund {input.id}?", {"confirm": ask.boolean("Approve")})

    panel = ActivityPanel(app, delay=3600)
    for number in range(MAX_WAITING + 5):
        assert (await app.run(app.request("refund", {"id": f"inv-{number}"}, channel=DeferToClient()))).input_required
    assert len(panel.continuing) == MAX_WAITING and panel.total == 5, "the oldest unanswered rounds count as ended"
    assert panel.live == {}
    panel.close()


async def test_a_task_an_agent_started_is_live_with_its_progress_and_stop_cancels_the_task(tools):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "mcp"))
    from raw_peer import raw_peer

    from fusion_nb.engine import tasks_of
    from fusion_nb.mcp import mcp_server
    from fusion_nb.mcp.server import calling_client

    tools.f.action("train").task().handle(tools.get("long").handler)
    panel = ActivityPanel(  # as the host reads it: a task's row is live at once, quick calls wait out the delay
        tools,
        delay=3600,
        origin=lambda: calling_client.get() or "local",
        at_once=lambda call, origin: origin.startswith("task for "),
    )
    async with raw_peer(mcp_server(tools)) as peer:
        created = await peer.request("tools/call", {"name": "train", "arguments": {}, "task": {}})
        task = tasks_of(tools).get(None, created["task"]["taskId"])
        with anyio.fail_after(5):
            while task.call not in panel.live:
                await anyio.sleep(0.01)
        row = panel.live[task.call]
        await settle_flushes(panel)
        assert "crunching" in row.label.value and "task for raw 0" in row.label.value
        row.stop_button.click()
        assert task.status == "cancelled"
        assert (await peer.request("tasks/get", {"taskId": task.id}))["status"] == "cancelled"
    panel.close()


async def test_an_image_answer_is_drawn_in_its_row_as_the_agent_received_it(app):
    from fusion_nb.engine import use_presenter
    from fusion_nb.mcp.rich import Presenter

    class Dot:
        def _repr_png_(self) -> bytes:
            return PNG_1X1

    remove = use_presenter(Presenter())
    try:
        gate = anyio.Event()

        @app.f.query("dot").handle
        async def dot(input, ctx):
            await gate.wait()  # long enough to get a row
            return Dot()

        panel = ActivityPanel(app, delay=0)
        call = app.start("dot", {})
        with anyio.fail_after(5):
            while call not in panel.live:
                await anyio.sleep(0.01)
        gate.set()
        result = await call.wait()
        await settle_flushes(panel)
        assert result.content[0]["type"] == "image"
        assert f'<img src="data:image/png;base64,{result.content[0]["data"]}"' in panel.board.value
        assert "image/png · 1x1 px · " in panel.board.value, "the image is captioned, not spelled out as base64"
        assert "[image/png" not in panel.board.value, "nor named in the row's text above the image"
        panel.close()
    finally:
        remove()


PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000005000100f8b6f80e0000000049454e44ae426082"
)


async def test_the_summary_says_how_many_calls_wait_on_the_running_cell(tools):
    gate = tools.gate = Gate(interval=3600)  # only opening lets them through
    panel = ActivityPanel(tools)
    try:
        assert "waiting on the running cell" not in panel.summary()
        gate.close()  # a cell starts
        calls = [tools.start("add", {"a": n, "b": 1}) for n in range(3)]
        await anyio.wait_all_tasks_blocked()
        assert panel.summary().endswith(" · 3 calls waiting on the running cell"), panel.summary()
        gate.open()  # it ends: they run, in order
        assert [(await call.wait()).value for call in calls] == [1, 2, 3]
        assert "waiting on the running cell" not in panel.summary()
        assert panel.summary().startswith("3 calls in the last minute, 0 failed")
    finally:
        panel.close()


async def test_the_summary_window_holds_a_count_per_second_not_an_entry_per_call(tools):
    """At 2,000 calls/s a tuple per call held ~10 MiB, and a served kernel's RSS followed the peak rate."""
    panel = ActivityPanel(tools)
    try:
        first = int(time.monotonic())
        for n in range(2000):
            await tools.call("add", {"a": n, "b": 0})
        last = int(time.monotonic())
        assert len(panel.ended) <= last - first + 1, len(panel.ended)
        assert sum(bucket[1] for bucket in panel.ended) == 2000
        assert panel.summary().startswith("2000 calls in the last minute, 0 failed")
    finally:
        panel.close()
