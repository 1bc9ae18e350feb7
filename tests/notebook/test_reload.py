"""A page that connects while a cell awaits a form (a reload, a second tab) never strands the call.

The kernel test plays the page as JupyterLab's widget manager does on load: it opens
ipywidgets' control comm. The cell awaiting the form lets go (the call keeps its form),
a re-run of the cell says what it queues behind, with a Stop for it and that form, and
``%fusion calls`` shows every live call with its form and Stop from any cell. The
browser test (tests/browser/test_frontends.py) reloads real pages.
"""

import uuid

import pytest

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

REFUND = """%%fusion_tool f.mutation("billing.refund").with_string("id", "Invoice ID").interactive()
approved = read_input("confirm")
if approved is None:
    return require_input.elicit(f"Refund invoice {input.id}?", {"confirm": ask.boolean("Approve the refund")})
return f"refunded {input.id}" if approved else "declined"
"""
CALL = "print(await billing_refund(id='inv-7'))"
ROW_STOP = "Cancel this call (its handler's cleanup runs)"


def page_connects(kernel) -> None:
    """What a page's widget manager sends as it loads: the control comm's ``comm_open``."""
    content = {"comm_id": uuid.uuid4().hex, "target_name": "jupyter.widget.control", "data": {}}
    kernel.kc.shell_channel.send(kernel.kc.session.msg("comm_open", content, metadata={"version": "1.0.0"}))


def texts_with(kernel, words: str) -> list[str]:
    return [str(s["value"]) for s in kernel.widgets.values() if words in str(s.get("value", ""))]


async def test_a_reload_lets_the_cell_go_and_a_rerun_shows_the_call_ahead_and_its_form(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(REFUND)
    first = kernel.submit(CALL)
    (submit,) = await kernel.wait_until(
        lambda: kernel.find_widgets("ButtonModel", description="Submit"), what="the form"
    )
    (approve,) = kernel.find_widgets("CheckboxModel")
    page_connects(kernel)
    await kernel.finished(first, timeout=30)
    said = "".join(first.error["traceback"]) if first.error else ""
    assert first.status == "error" and said.startswith("Let go: billing.refund (inv-7) still waits for an answer"), said
    assert "%fusion calls" in said and "Traceback" not in said

    rerun = kernel.submit(CALL)  # runs at once: nothing holds the kernel any more
    await kernel.wait_until(
        lambda: texts_with(kernel, "waiting for billing.refund (inv-7), which waits for an answer"),
        what="the re-run saying what it waits for",
    )
    await kernel.wait_until(
        lambda: kernel.find_widgets("ButtonModel", description="Stop billing.refund"), what="a Stop for the call ahead"
    )
    assert kernel.find_widgets("ButtonModel", description="Submit") == [submit], "the same form, not a copy"
    kernel.set_value(approve, value=True)  # answered where the re-run shows it
    kernel.click(submit)
    second = await kernel.wait_until(
        lambda: [b for b in kernel.find_widgets("ButtonModel", description="Submit", disabled=False) if b != submit],
        what="the re-run's own form",
    )
    (approve_again,) = [c for c in kernel.find_widgets("CheckboxModel") if c != approve]
    kernel.set_value(approve_again, value=True)
    kernel.click(second[0])
    await kernel.finished(rerun, timeout=30)
    assert rerun.status == "ok" and rerun.stdout.strip() == "refunded inv-7"
    calls = await kernel.run("%fusion calls")
    assert calls.stdout.strip() == "No call is running."


async def test_fusion_calls_shows_a_let_go_call_with_its_form_and_stop(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(REFUND)
    first = kernel.submit(CALL)
    (submit,) = await kernel.wait_until(
        lambda: kernel.find_widgets("ButtonModel", description="Submit"), what="the form"
    )
    stops = set(kernel.find_widgets("ButtonModel", description="Stop"))
    page_connects(kernel)
    await kernel.finished(first, timeout=30)
    await kernel.run("%fusion calls")
    assert kernel.find_widgets("ButtonModel", description="Submit") == [submit], "its form, the same model"
    (stop,) = [b for b in kernel.find_widgets("ButtonModel", description="Stop", tooltip=ROW_STOP) if b not in stops]
    kernel.click(stop)
    await kernel.wait_until(lambda: texts_with(kernel, "Not answered: the call was cancelled"), what="the form closed")
    assert (await kernel.run("%fusion calls")).stdout.strip() == "No call is running."


async def test_a_page_connecting_while_a_cell_runs_without_a_form_changes_nothing(kernel):
    await kernel.run("%load_ext fusion_nb\nimport anyio")
    await kernel.run('%%fusion_tool slow\nawait anyio.sleep(1.5)\nreturn "slept"')
    cell = kernel.submit("print(await slow())")
    await kernel.wait_until(lambda: kernel.find_widgets("ButtonModel", description="Stop"), what="the view")
    page_connects(kernel)
    await kernel.finished(cell, timeout=30)
    assert cell.status == "ok" and cell.stdout.strip() == "slept"
