"""The interrupt button: an awaited call stops promptly; background calls stop while idle."""

import re
import time

import pytest

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

SLOW_TOOL = """%%fusion_tool slow
import anyio, time
try:
    print("started", flush=True)
    await anyio.sleep(3600)
finally:
    print(f"cleaned at {time.monotonic()}", flush=True)
"""


def printed(kernel, text):
    return any(m["msg_type"] == "stream" and text in m["content"]["text"] for m in kernel.iopub)


RECORD_SETTLING = """import fusion_nb, time
settled_at = {}
record = lambda c: c.settled and settled_at.setdefault(c.id, time.monotonic())
fusion_nb.default_app.on_call(lambda call: call.watch(record))
"""


def plain(lines):
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(lines))


async def interrupt_awaiting(kernel, code):
    """Run ``code`` (which awaits SLOW_TOOL), interrupt it once it started; return (cell, ms)."""
    before = len(kernel.iopub)
    cell = kernel.submit(code)
    await kernel.wait_until(
        lambda: any(m["msg_type"] == "stream" and "started" in m["content"]["text"] for m in kernel.iopub[before:]),
        what="the tool to start",
    )
    sent = time.monotonic()
    await kernel.interrupt()
    await kernel.finished(cell, timeout=30)
    return cell, (time.monotonic() - sent) * 1000


async def test_interrupting_an_awaiting_call_ends_the_cell_in_one_line_after_cleanup(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(SLOW_TOOL)
    await kernel.run(RECORD_SETTLING)
    await kernel.run("import asyncio\nawait asyncio.sleep(0)")  # the kernel's first async cell is warm
    cell, latency = await interrupt_awaiting(kernel, "await slow()")
    print(f"interrupt -> cell finished: {latency:.0f} ms")
    assert cell.status == "error" and cell.reply["content"]["ename"] == "CancelledError"
    assert cell.error["ename"] == "KeyboardInterrupt"
    assert plain(cell.error["traceback"]) == "Stopped: slow was stopped; its cleanup ran."
    kinds = [m["msg_type"] for m in cell.messages if m["msg_type"] in ("stream", "error")]
    cleaned = next(i for i, m in enumerate(cell.messages) if "cleaned at" in m["content"].get("text", ""))
    assert cleaned < next(i for i, m in enumerate(cell.messages) if m["msg_type"] == "error"), kinds
    assert latency < 500, f"interrupt took {latency:.0f} ms (aim: 50 ms)"
    cleaned_at = float(re.search(r"cleaned at ([0-9.]+)", cell.stdout).group(1))
    settled_at = float((await kernel.run("print(*settled_at.values())")).stdout.split()[-1])
    print(f"interrupt -> call settled and handler finally: {(settled_at - cleaned_at) * 1000:+.1f} ms apart")
    status = await kernel.run("import fusion_nb\nprint([c.status for c in fusion_nb.default_app.active_calls])")
    assert status.stdout.strip() == "[]"


async def test_every_way_of_awaiting_a_call_from_a_cell_is_interrupted_alike(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(SLOW_TOOL)
    for code in ("import fusion_nb\nawait fusion_nb.default_app.call('slow')", "await slow.start().wait()"):
        cell, latency = await interrupt_awaiting(kernel, code)
        shown = plain(cell.error["traceback"])
        assert shown.startswith("Stopped: slow was stopped"), (code, shown)
        assert "\n" not in shown and "Traceback" not in shown, shown
        print(f"{code.splitlines()[-1]}: interrupt -> cell finished {latency:.0f} ms")


async def test_a_cancelled_error_that_is_no_interrupt_keeps_its_traceback(kernel):
    await kernel.run("%load_ext fusion_nb")
    cell = await kernel.run(
        "import asyncio\nasync def worker():\n    await asyncio.sleep(3600)\n"
        "task = asyncio.ensure_future(worker())\nawait asyncio.sleep(0)\ntask.cancel()\nawait task",
        ok=False,
    )
    assert cell.error["ename"] == "CancelledError"
    assert "await task" in plain(cell.error["traceback"]), "IPython's own traceback, not our one line"


async def test_interrupt_while_idle_cancels_background_calls(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(SLOW_TOOL)
    start = await kernel.run("call = slow.start()")
    await kernel.wait_until(lambda: printed(kernel, "started"), what="the background call to start")
    assert any("started" in m["content"].get("text", "") for m in start.messages if m["msg_type"] == "stream"), (
        "output lands in the starting cell"
    )
    # The handler goes in right after the cell's own handler swap is undone, a few
    # microseconds after "idle"; a test can be faster than that, a person cannot.
    for attempt in range(3):
        await kernel.interrupt()
        try:
            await kernel.wait_until(lambda: printed(kernel, "cleaned"), timeout=3, what="the background call's cleanup")
            break
        except TimeoutError:
            if attempt == 2:
                raise
    check = await kernel.run("import signal\nprint(call.status, call.result.error.code)")
    assert check.stdout.strip() == "cancelled CANCELLED"
    # once no calls remain, the kernel's own idle handler is back
    restored = await kernel.run("import asyncio\nawait asyncio.sleep(0.05)\nprint(signal.getsignal(signal.SIGINT))")
    assert "IdleInterrupts" not in restored.stdout


async def test_sync_cells_still_get_keyboard_interrupt_and_background_calls_survive_it(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(SLOW_TOOL)
    await kernel.run("call = slow.start()")
    await kernel.wait_until(lambda: printed(kernel, "started"), what="the background call")
    cell = kernel.submit("import time\nprint('sleeping', flush=True)\ntime.sleep(60)")
    await kernel.wait_until(lambda: "sleeping" in cell.stdout, what="the sync cell")
    await kernel.interrupt()
    await kernel.finished(cell, timeout=30)
    assert cell.error["ename"] == "KeyboardInterrupt"
    alive = await kernel.run("print(call.status)")
    assert alive.stdout.strip() == "running"
    await kernel.run("call.cancel()")
