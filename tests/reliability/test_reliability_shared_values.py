"""Reads of giant or odd shared variables (issue 44, 3 and 8): a real kernel serving ``%fusion share``.

Before: one ``resources/read`` of a shared 1 GiB ``str`` took the kernel from 1.1 to 4.1 GB
and sent the whole GiB; a shared list that contains itself read as ``-32603``. Now every
read is cut at the answer bound (1 MiB) without encoding more than that, with a sentence
saying so and how to read more, and a self-containing value is one sentence. The figures
are the kernel's peak RSS (VmHWM) growth across the reads, and what was sent.
"""

from __future__ import annotations

import anyio
import pytest
from kernel_harness import serve_shout
from reliability_support import FIGURES

from fusion_nb.mcp import connect

# jupyter_client's async API is asyncio-only
pytestmark = [pytest.mark.reliability, pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

GIB = 1 << 30
PEAK = "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')) // 1024)"


async def peak_mb(kernel) -> int:
    return int((await kernel.run(PEAK)).stdout)


async def test_a_giant_shared_string_is_cut_without_growing_the_kernel(kernel):
    _, url, token = await serve_shout(kernel)
    await kernel.run(f"big = 'x' * {GIB}\nloop = [1, 2]\nloop.append(loop)\nnest = {{'big': big, 'loop': 'no'}}")
    for name in ("big", "loop", "nest"):
        await kernel.run(f"%fusion share {name}")
    before = await peak_mb(kernel)
    async with connect(url, token, mode="auto") as client:
        with anyio.fail_after(120):
            read = (await client.read_resource("nb://vars/big")).contents
            async with anyio.create_task_group() as group:  # six at once, as the attacker did
                for _ in range(6):
                    group.start_soon(client.read_resource, "nb://vars/big")
            looped = (await client.read_resource("nb://vars/loop")).contents
            nested = (await client.read_resource("nb://vars/nest")).contents
    grown = await peak_mb(kernel) - before
    sent = sum(len(getattr(part, "text", "") or "") for part in read)
    FIGURES.attack(
        "1 GiB shared str, 7 reads",
        kernel_peak_growth_mb=grown,
        sent_kib=round(sent / 1024),
        self_containing=looped[0].text[:40],
    )
    assert grown < 64, f"the kernel's peak RSS grew {grown} MB"
    assert sent < 1 << 20 and read[0].text.endswith(".)") and "cut: the value is 1073741824 bytes" in read[0].text
    assert "%fusion share a slice" in read[0].text  # how to read more
    assert [part.text for part in looped] == [
        "(This list contains itself, so it cannot be sent as JSON; share a part of it.)"
    ]
    assert nested[0].text.startswith('{"big": "xxx') and "cut: this dict is over" in nested[1].text
