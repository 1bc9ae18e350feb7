"""Interactive tools from cells: an inline form resumes the awaiting cell; scripted answers run unattended."""

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.kernel]

REFUND = '''%%fusion_tool f.mutation("billing.refund").with_string("id", "Invoice ID").interactive()
"""Refund an invoice after a person approves it."""
approved = read_input("confirm")
if approved is None:
    fields = {"confirm": ask.boolean("Approve the refund")}
    return require_input.elicit(f"Refund invoice {input.id}?", fields, state={"id": input.id})
return f"refunded {read_request_state()['id']}" if approved else "declined"
'''


async def test_inline_form_resumes_the_awaiting_cell(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(REFUND)
    cell = kernel.submit("print(await billing_refund(id='inv-7'))")
    submit = (
        await kernel.wait_until(lambda: kernel.find_widgets("ButtonModel", description="Submit"), what="the form")
    )[0]
    (checkbox,) = kernel.find_widgets("CheckboxModel")
    kernel.set_value(checkbox, value=True)
    kernel.click(submit)
    await kernel.finished(cell)
    assert cell.status == "ok" and cell.stdout.strip() == "refunded inv-7"
    assert kernel.widgets[submit]["disabled"] is True, "a submitted form cannot be submitted again"


async def test_scripted_answers_for_unattended_runs(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(REFUND)
    cell = await kernel.run(
        "from fusion_nb.notebook import script_answers\nscript_answers({'confirm': False})\n"
        "print(await billing_refund(id='inv-8'))"
    )
    assert cell.stdout.strip() == "declined"
    assert kernel.find_widgets("ButtonModel", description="Submit") == []


async def test_without_a_widget_frontend_input_fails_fast(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(REFUND)
    cell = await kernel.run(
        "import os\nos.environ['FUSION_NB_WIDGETS'] = '0'\nawait billing_refund(id='inv-9')", ok=False
    )
    assert cell.error["ename"] == "ToolError" and "ELICITATION_UNSUPPORTED" in cell.error["evalue"]
