"""The engine's own event (``new_event``): one-shot, every waiter wakes, a cancelled waiter leaves alone.

Every waited call makes one, so on asyncio it is a small flag of the engine's rather
than ``anyio.Event`` (2 µs each); these tests hold it to the same contract on both backends.
"""

import anyio
import pytest

from fusion_nb.engine._background import new_event

pytestmark = pytest.mark.anyio


async def test_every_waiter_wakes_and_a_cancelled_one_leaves_the_others_waiting():
    event = new_event()
    woke: list[str] = []

    async def waiter(name: str) -> None:
        await event.wait()
        woke.append(name)

    async with anyio.create_task_group() as group:
        group.start_soon(waiter, "a")
        group.start_soon(waiter, "b")
        async with anyio.create_task_group() as doomed:
            doomed.start_soon(waiter, "cancelled")
            await anyio.wait_all_tasks_blocked()
            doomed.cancel_scope.cancel()
        assert woke == [] and not event.is_set()
        event.set()
        event.set()  # once is enough; again changes nothing
    assert sorted(woke) == ["a", "b"]


async def test_a_set_event_is_waited_for_at_once():
    event = new_event()
    event.set()
    assert event.is_set()
    with anyio.fail_after(1):
        await event.wait()
