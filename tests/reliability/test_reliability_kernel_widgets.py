"""A kernel that serves keeps no widget per call: the open-model count is flat over 1,000 served calls.

Before: every served call left 13 Layout/Style models open (``CallView.close()`` closed
its children, not their layouts and styles): 48 -> 20,888 live widgets after 1,600
calls. The calls here mix quick ones (no widget at all), failed ones, and long ones
that get a live row (whose every model must be closed when the call ends).
"""

from __future__ import annotations

import anyio
import pytest
from kernel_harness import serve_shout
from reliability_support import FIGURES

from fusion_nb.mcp import connect

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.reliability, pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

TOOLS = """
import warnings, ipywidgets, anyio, fusion_nb
from fusion_nb.notebook import current_host

release = anyio.Event()

@fusion_nb.default_app.f.action("nap").handle
async def nap(input, ctx):
    await release.wait()  # held past the panel's delay: it gets a live row
    return "rested"

@fusion_nb.default_app.f.action("fails").handle
async def fails(input, ctx):
    raise RuntimeError("no")

def open_models():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # still the registry of open models
        return len(ipywidgets.Widget.widgets)
"""

CALLS = 1_000


async def open_models(kernel) -> int:
    cell = await kernel.run("print(open_models())")
    return int(cell.stdout)


async def test_widget_count_is_flat_over_a_thousand_served_calls(kernel):
    _, url, token = await serve_shout(kernel)
    await kernel.run(TOOLS)
    async with connect(url, token, mode="auto") as client:
        await client.call_tool("shout", {"text": "warm"})
        await client.call_tool("fails", {})
        await kernel.run("await anyio.sleep(1)")
        before = await open_models(kernel)
        live_seen = 0

        async def naps() -> None:
            nonlocal live_seen
            async with anyio.create_task_group() as group:
                for _ in range(3):
                    group.start_soon(client.call_tool, "nap", {})
                cell = await kernel.run(
                    "with anyio.fail_after(30):\n"
                    "    while len(current_host().panel.live) < 3:\n"
                    "        await anyio.sleep(0.05)\n"
                    "print(len(current_host().panel.live))\n"
                    "release.set()"
                )
                live_seen = int(cell.stdout)

        async with anyio.create_task_group() as group:
            group.start_soon(naps)
            for i in range(CALLS):
                tool = "fails" if i % 100 == 0 else "shout"
                await client.call_tool(tool, {} if tool == "fails" else {"text": str(i)})
    quiet = await kernel.run(
        "await anyio.sleep(1)\nprint(len(current_host().panel.live), current_host().panel.summary())"
    )
    after = await open_models(kernel)
    FIGURES.notes.append(
        f"kernel open widget models over {CALLS:,} served calls (+3 long, 10 failed): {before} -> {after}"
        f" ({live_seen} live rows seen mid-way)"
    )
    assert quiet.stdout.startswith("0 "), quiet.stdout
    assert live_seen == 3, "the long calls had live rows (so closing them was exercised)"
    assert after == before, f"open widget models {before} -> {after}"
    await kernel.run("%fusion stop")
