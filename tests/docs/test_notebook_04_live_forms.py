"""Notebook 04 as a person runs it: its calls wait on inline forms (nothing to switch on).

nbval runs the notebook unattended with ``tests/notebooks_support/answers.json`` (the repository's ``conftest.py``);
this test runs the notebook's own cells in a kernel without those answers and checks that
the refund call waits on its form and that approving it there (the browser's comm messages,
the box ticked as a person ticks it) refunds; and that a Decline ends the call with the
notebook's own "refund declined", never the same form again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "04-interactive-input.ipynb"
REFUND_CALL = 'await billing_refund(id="inv-7")'


def code_cells() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]


def new_widgets(kernel, earlier: set[str], model: str, **state) -> list[str]:
    return [comm_id for comm_id in kernel.find_widgets(model, **state) if comm_id not in earlier]


@pytest.mark.parametrize(("button", "value"), [("Submit", "'refunded 1250 cents'"), ("Decline", "'refund declined'")])
async def test_the_refund_waits_on_its_form(kernel, button, value):
    cells = code_cells()
    assert not any("LIVE_FORMS" in cell for cell in cells), "no switch to find: forms are the default"
    refund = cells.index(REFUND_CALL)
    for cell in cells[:refund]:
        await kernel.run(cell)
    earlier = set(kernel.widgets)
    waiting = kernel.submit(cells[refund])
    (submit,) = await kernel.wait_until(
        lambda: new_widgets(kernel, earlier, "ButtonModel", description=button), what="the refund form"
    )
    assert waiting.reply is None, "the call waits for the person"
    if button == "Submit":
        (approve,) = new_widgets(kernel, earlier, "CheckboxModel")
        kernel.set_value(approve, value=True)
    kernel.click(submit)
    await kernel.finished(waiting, timeout=30)
    assert waiting.status == "ok" and value in waiting.texts(), waiting.texts()
    assert len(new_widgets(kernel, earlier, "ButtonModel", description="Submit")) == 1, "asked once"
