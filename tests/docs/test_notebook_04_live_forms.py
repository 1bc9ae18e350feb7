"""Notebook 04's one switch: with ``LIVE_FORMS = True`` a call waits on its inline form.

The stored notebook scripts every answer (nbval runs it unattended); this test runs the
notebook's own cells with the switch flipped and checks that the refund call shows the form
instead of being answered, and that approving it there (the browser's comm messages) refunds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.kernel]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "04-interactive-input.ipynb"
SWITCH_OFF = "LIVE_FORMS = False"


@pytest.fixture
def anyio_backend():
    return "asyncio"  # jupyter_client's async API is asyncio-only


def code_cells() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]


def new_widgets(kernel, earlier: set[str], model: str, **state) -> list[str]:
    return [comm_id for comm_id in kernel.find_widgets(model, **state) if comm_id not in earlier]


async def test_live_forms_leave_the_refund_to_its_form(kernel):
    cells = code_cells()
    assert sum(SWITCH_OFF in cell for cell in cells) == 1, "one switch"
    (refund,) = [i for i, cell in enumerate(cells) if cell.startswith('answers({"confirm": True})')]
    for cell in cells[:refund]:
        await kernel.run(cell.replace(SWITCH_OFF, "LIVE_FORMS = True"))
    earlier = set(kernel.widgets)
    waiting = kernel.submit(cells[refund])
    (submit,) = await kernel.wait_until(
        lambda: new_widgets(kernel, earlier, "ButtonModel", description="Submit"), what="the refund form"
    )
    assert waiting.reply is None, "the call waits for the person"
    (approve,) = new_widgets(kernel, earlier, "CheckboxModel")
    kernel.set_value(approve, value=True)
    kernel.click(submit)
    await kernel.finished(waiting, timeout=30)
    assert waiting.status == "ok" and "'refunded 1250 cents'" in waiting.texts()
