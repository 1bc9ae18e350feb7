"""Typing into a widget while its cell awaits: every keystroke reaches the kernel.

ipywidgets' front end sends a model's next update only once the kernel has reported
``idle`` for the previous one. ipykernel 7.4 dispatches comm messages that arrive while
an async cell awaits without any status, so a form kept only the first keystroke
(issue 21: "Grace Hopper" arrived as "G"). ``fusion_nb/notebook/comm_status.py`` sends
the missing status; these tests drive a real kernel exactly as the browser's throttle
does (the next key only after the previous key's ``idle``).
"""

import pytest

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

ONBOARD = '''%%fusion_tool f.action("onboard")
"""Ask for a name, then greet."""
name = read_input("name")
if name is None:
    return require_input.elicit("Who is joining?", {"name": ask.string("Full name")})
return f"welcome, {name}"
'''

WAIT_FOR_TEXT = """import asyncio, ipywidgets
box = ipywidgets.Text(description="Name")
done = asyncio.get_running_loop().create_future()
box.observe(lambda change: change["new"].endswith("!") and not done.done() and done.set_result(change["new"]), "value")
display(box)
print("got", await done)
"""


async def test_a_form_receives_every_keystroke_typed_while_its_cell_awaits(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(ONBOARD)
    cell = kernel.submit("print(await onboard())")
    submit = (await kernel.wait_until(lambda: kernel.find_widgets("ButtonModel", description="Submit"), what="form"))[0]
    (text,) = kernel.find_widgets("TextModel", description="Full name")
    await kernel.type_into(text, "Grace Hopper")  # times out after "G" without the missing status
    kernel.click(submit)
    await kernel.finished(cell)
    assert cell.status == "ok" and cell.stdout.strip() == "welcome, Grace Hopper", cell.stdout


async def test_each_concurrent_comm_message_gets_exactly_one_busy_and_idle(kernel):
    await kernel.run("%load_ext fusion_nb")
    cell = kernel.submit(WAIT_FOR_TEXT)
    (text,) = await kernel.wait_until(lambda: kernel.find_widgets("TextModel", description="Name"), what="the box")
    await kernel.type_into(text, "Ada!")  # any widget of the kernel, not only fusion-nb's
    await kernel.finished(cell)
    assert cell.stdout.strip() == "got Ada!", cell.stdout
    keys = [m for m in kernel.iopub if m["msg_type"] == "comm_msg" and m["parent_header"].get("msg_type") == "comm_msg"]
    parents = {m["parent_header"]["msg_id"] for m in keys}  # the kernel's echo_update of each key
    assert len(parents) == 4
    for parent in parents:
        assert kernel.statuses(parent) == ["busy", "idle"], kernel.statuses(parent)
    # the kernel indicator follows every status: the still-running cell got its busy back, then its own idle last
    cell_states = kernel.statuses(cell.msg_id)
    assert cell_states[0] == "busy" and cell_states[-1] == "idle" and cell_states.count("idle") == 1, cell_states


async def test_unloading_restores_the_kernels_own_dispatch(kernel):
    """The contract this module mends: ipykernel itself sends no status for a concurrent comm message.

    If a later ipykernel sends it, this test fails: fusion-nb's status would then be a
    second ``idle`` (the throttle counts it below zero), so the shim must go.
    """
    await kernel.run("%load_ext fusion_nb\n%unload_ext fusion_nb")
    cell = kernel.submit(WAIT_FOR_TEXT)
    (text,) = await kernel.wait_until(lambda: kernel.find_widgets("TextModel", description="Name"), what="the box")
    sent = kernel.set_value(text, value="Ada!")
    await kernel.finished(cell)
    assert cell.stdout.strip() == "got Ada!"
    assert kernel.statuses(sent) == [], "ipykernel now reports status for concurrent comm messages: drop comm_status"
