"""Notebook 03's "press ■" cell does what its prose promises, when a person sets the flag.

The stored notebook keeps ``PRESS_INTERRUPT = False`` so nbval runs it unattended in half a
second; this test runs the notebook's own cells with the flag set, waits for the bar to move,
sends the kernel an interrupt (what ■ does) and checks the prose: the cell stops promptly,
the handler's ``finally`` runs, and the kernel goes on.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "03-cancellation.ipynb"
FLAG_OFF = "PRESS_INTERRUPT = False"


def code_cells() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]


def bar_moved(kernel, earlier: set[str]) -> bool:
    """A widget created since ``earlier`` shows a numeric value above 0 (the new call's bar moved)."""
    return any(
        isinstance(state.get("value"), int | float) and not isinstance(state.get("value"), bool) and state["value"] > 0
        for comm_id, state in kernel.widgets.items()
        if comm_id not in earlier
    )


def printed(kernel) -> str:
    return "".join(m["content"].get("text", "") for m in kernel.iopub if m["msg_type"] == "stream")


async def test_pressing_interrupt_on_the_long_cell_stops_it_and_releases_the_connection(kernel):
    cells = code_cells()
    (index,) = [i for i, cell in enumerate(cells) if FLAG_OFF in cell]
    for cell in cells[:index]:
        await kernel.run(cell)
    earlier = set(kernel.widgets)  # the bars of earlier cells moved too
    long_cell = kernel.submit(cells[index].replace(FLAG_OFF, "PRESS_INTERRUPT = True"))
    await kernel.wait_until(lambda: bar_moved(kernel, earlier), what="the long call's bar to move")
    sent = time.monotonic()
    await kernel.interrupt()
    await kernel.finished(long_cell, timeout=30)
    latency = time.monotonic() - sent
    assert long_cell.status == "error", "an interrupted cell ends with an error"
    assert latency < 10, f"the interrupt took {latency:.1f} s"
    await kernel.wait_until(lambda: "connection released" in printed(kernel), what="the handler's finally")
    assert (await kernel.run("print('still here')")).stdout == "still here\n"
