"""One rule for calls a cell starts, and outputs that read right before their widgets load."""

import json
import re

import pytest

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

VIEW = "application/vnd.jupyter.widget-view+json"
QUICK = "%%fusion_tool quick\nyield progress(50, 'half')\nreturn 'hi'"


def displays(cell):
    return [m for m in cell.messages if m["msg_type"] == "display_data" and VIEW in m["content"]["data"]]


def updates(cell):
    return [m for m in cell.messages if m["msg_type"] == "update_display_data"]


def results(cell):
    return [m["content"]["data"]["text/plain"] for m in cell.messages if m["msg_type"] == "execute_result"]


async def loaded(kernel):
    await kernel.run("%load_ext fusion_nb\nimport fusion_nb")
    await kernel.run(QUICK)


async def test_every_way_a_cell_starts_a_call_shows_one_view_and_the_value_once(kernel):
    await loaded(kernel)
    for code, out in [
        ("await quick()", "'hi'"),
        ("await fusion_nb.default_app.call('quick')", "CallResult(value='hi')"),
        ("await quick.start().wait()", None),
    ]:
        cell = await kernel.run(code)
        assert len(displays(cell)) == 1, (code, "one live view")
        (update,) = updates(cell)
        text = update["content"]["data"]["text/plain"]
        assert text.startswith("quick: ✔ done 100%"), (code, text)
        assert "hi" not in text, "the view shows the status, Out[n] the value"
        if out is not None:
            assert results(cell) == [out], code


async def test_a_started_call_shows_its_live_view_and_no_stale_repr(kernel):
    await loaded(kernel)
    cell = await kernel.run("call = quick.start()\ncall")
    assert results(cell) == [], "no <Call ... queued> as Out[n]: the view above is the call"
    assert len(displays(cell)) == 1
    await kernel.run("await call.wait()")
    (update,) = updates(cell)
    data = update["content"]["data"]
    assert data["text/plain"].startswith("quick: ✔ done 100%")
    assert "✔ done" in data["text/html"] and "width:100%" in data["text/html"], "HTML fallback: the final state"
    again = await kernel.run("call")
    assert len(displays(again)) == 1 and results(again) == [], "a settled call shown later: its final view"


async def test_waiting_for_the_background_leaves_no_stray_output(kernel):
    await loaded(kernel)
    cell = await kernel.run("quick.start()\nawait fusion_nb.default_app.wait_background()")
    assert results(cell) == [] and cell.stdout == "", "no Out[n]: True"
    slow = "%%fusion_tool slow\nimport anyio\nawait anyio.sleep(3600)"
    await kernel.run(slow)
    timed_out = await kernel.run("call = slow.start()\nawait fusion_nb.default_app.wait_background(0.01)")
    assert "still running when wait_background timed out" in timed_out.stdout
    other = await kernel.run("x = await fusion_nb.default_app.wait_background(0.01)\nx")
    assert results(other) == ["False"], "only a cell ending in the await itself is rewritten"
    await kernel.run("call.cancel()")


async def test_fusion_help_prints_usage_once_without_markup(kernel):
    await kernel.run("%load_ext fusion_nb")
    for code in ("%fusion help", "%fusion"):
        shown = (await kernel.run(code)).stdout
        assert shown.count("Usage: %fusion") == 1 and "::" not in shown, shown
        assert "inspect" in shown and "--no-auth" in shown


async def test_inspect_shows_the_definition_on_the_wire_and_recent_traffic(kernel):
    await kernel.run("import os\nos.environ['FUSION_NB_WIDGETS'] = '0'")
    await loaded(kernel)
    await kernel.run("%%fusion_tool f.query('weather').with_string('city', 'City name')\nreturn input.city")
    await kernel.run("await quick()\nawait weather(city='Oslo')")
    shown = (await kernel.run("%fusion inspect quick")).stdout
    definition = json.loads(shown[: shown.index("\n}\n") + 2])
    assert definition["name"] == "quick" and definition["inputSchema"]["type"] == "object"
    traffic = shown[shown.index("\n}\n") + 3 :]
    assert re.search(r"#\d+ quick \(cell\) → tools/call \+0 ms \{\}", traffic), traffic
    assert "← notifications/progress" in traffic and "50% half" in traffic
    assert re.search(r"← result \+\d+ ms", traffic) and "weather" not in traffic, "filtered by tool"
    everything = (await kernel.run("%fusion inspect")).stdout
    assert '"name": "weather"' in everything and 'weather (cell) → tools/call +0 ms {"city":"Oslo"}' in everything
    unknown = (await kernel.run("%fusion inspect nope")).stdout
    assert unknown.strip() == "No tool matches 'nope' (tools: quick, weather)."
