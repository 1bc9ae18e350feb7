"""Interactive tools from cells: an inline form resumes the awaiting cell; scripted answers run unattended."""

import pytest

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

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
    # the form a person would have seen is still there, answered and marked as scripted
    outcomes = [s["value"] for s in kernel.widgets.values() if "answered by script" in str(s.get("value", ""))]
    assert len(outcomes) == 1 and "Submitted" in outcomes[0], outcomes
    (submit,) = kernel.find_widgets("ButtonModel", description="Submit")
    assert kernel.widgets[submit]["disabled"] is True, "nothing left to click"


async def test_without_a_widget_frontend_input_fails_fast(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(REFUND)
    cell = await kernel.run(
        "import os\nos.environ['FUSION_NB_WIDGETS'] = '0'\nawait billing_refund(id='inv-9')", ok=False
    )
    assert cell.error["ename"] == "NoWayToAsk" and "ELICITATION_UNSUPPORTED" in cell.error["evalue"]  # (a ToolError)


NAIVE = '''%%fusion_tool f.action("onboard")
"""The trap: asks while read_input is None (a decline leaves it None too)."""
name = read_input("name")
if name is None:
    return require_input.elicit("Who is joining?", {"name": ask.string("Full name")})
return f"welcome, {name}"
'''


async def form_buttons(kernel):
    return await kernel.wait_until(
        lambda: (
            {
                label: kernel.find_widgets("ButtonModel", description=label)[0]
                for label in ("Submit", "Decline", "Dismiss")
                if kernel.find_widgets("ButtonModel", description=label)
            }
            if kernel.find_widgets("ButtonModel", description="Dismiss")
            else None
        ),
        what="the form",
    )


@pytest.mark.parametrize(
    ("button", "line"),
    [
        ("Decline", "ToolError: [DECLINED] Tool \"onboard\": the person declined 'Who is joining?'"),
        ("Dismiss", "Cancelled: Tool \"onboard\": the person dismissed 'Who is joining?' without answering"),
    ],
)
async def test_a_person_saying_no_ends_the_question_in_the_notebook(kernel, button, line):
    await kernel.run("%load_ext fusion_nb\n%colors nocolor")
    await kernel.run(NAIVE)
    cell = kernel.submit("await onboard()")
    buttons = await form_buttons(kernel)
    kernel.click(buttons[button])
    await kernel.finished(cell)
    assert cell.status == "error"
    assert cell.error["traceback"][0].startswith(line), cell.error["traceback"]
    assert len(kernel.find_widgets("ButtonModel", description="Submit")) == 1, "the form came back"


async def test_stop_ends_the_cell_with_one_plain_line_like_an_interrupt(kernel):
    await kernel.run("%load_ext fusion_nb\nimport anyio")
    await kernel.run('%%fusion_tool slow\ntry:\n    await anyio.sleep(3600)\nfinally:\n    print("cleaned")')
    cell = kernel.submit("await slow()")
    (stop,) = await kernel.wait_until(lambda: kernel.find_widgets("ButtonModel", description="Stop"), what="Stop")
    kernel.click(stop)
    await kernel.finished(cell)
    assert cell.error["traceback"] == ["Stopped: slow was stopped; its cleanup ran."], cell.error
    assert "Recovery" not in "".join(cell.error["traceback"])
