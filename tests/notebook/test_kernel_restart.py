"""A kernel restart or shutdown under a connected client: each served call ends saying why (issue 43).

Jupyter interrupts a kernel before it shuts it down: with no cell running, that interrupt
ends the served calls; with a cell running, the cell takes it and the shutdown ends them.
"""

import anyio
import pytest
from kernel_harness import serve_shout

from fusion_nb.mcp import connect

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

INTERRUPTED = "the notebook's kernel was interrupted (■ Interrupt, or a restart, which interrupts first)"


@pytest.mark.parametrize(
    ("mode", "busy", "restart", "why"),
    [
        ("legacy", True, True, "the kernel is restarting"),
        ("auto", True, False, "the kernel is shutting down"),
        ("auto", False, True, INTERRUPTED),
    ],
)
async def test_a_restart_ends_a_served_call_with_its_reason(kernel, mode, busy, restart, why):
    _, url, token = await serve_shout(kernel)
    await kernel.run(
        '%%fusion_tool f.query("slow")\n"""Wait a minute."""\n'
        'yield progress(1, "started")\nawait anyio.sleep(60)\nreturn "late"'
    )
    started = anyio.Event()

    async def on_progress(value, total, message):
        started.set()

    results = []
    async with connect(url, token, mode=mode) as client, anyio.create_task_group() as group:

        async def call():
            results.append(await client.call_tool("slow", {}, progress_callback=on_progress))

        group.start_soon(call)
        with anyio.fail_after(30):
            await started.wait()
            if busy:
                cell = kernel.submit("print('started', flush=True)\nawait anyio.sleep(30)")
                # (its output, not its "busy" status: the status goes out before the cell's hooks have run)
                await kernel.wait_until(lambda: "started" in cell.stdout, what="the cell runs")
            if restart:
                await kernel.km.restart_kernel(now=False)
            else:
                await kernel.km.shutdown_kernel(now=False, restart=False)
            while not results:
                await anyio.sleep(0.05)
    (result,) = results
    assert result.is_error
    assert result.content[0].text.startswith(
        f'[CANCELLED] The call to tool "slow" was cancelled before it finished: {why}.'
    ), result.content[0].text
