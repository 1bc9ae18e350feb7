"""The bridge's progress relay: whatever order the SDK's callback tasks run and finish in, the host
gets rising values only, and the highest before the result (docs/mcp.md promises the last value).

The SDK client starts one task per progress notification, in arrival order, before the task
waiting for the call's response wakes. Hypothesis chooses how many checkpoints each callback's
send and the caller take (so sends finish in any order, on asyncio and trio's randomised
scheduler), and which values the upstream sent (rising, as the protocol requires).
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusion_nb.cli.progress_relay import ProgressRelay


async def relay_one_call(values: list[float], send_turns: list[int], caller_turns: int) -> list[float]:
    """Upstream progress ``values`` then the response, as the SDK delivers them; returns what the host got."""
    host: list[float] = []
    turns = iter(send_turns)

    async def report(progress: float, total: float | None, message: str | None) -> None:
        for _ in range(next(turns, 0)):
            await anyio.lowlevel.checkpoint()  # the host's write may suspend for any while
        host.append(progress)

    relay = ProgressRelay(report, settle=0)
    response = anyio.Event()
    async with anyio.create_task_group() as group:

        async def call() -> None:
            await response.wait()  # the caller wakes once the response is read
            for _ in range(caller_turns):
                await anyio.lowlevel.checkpoint()
            await relay.finish()
            host.append(-1.0)  # the result, sent to the host after finish

        group.start_soon(call)
        await anyio.lowlevel.checkpoint()
        for value in values:  # the dispatcher's read loop: each notification spawns its callback
            group.start_soon(relay.on_progress, value, 100.0, f"at {value}")
        response.set()  # then it reads the response
    return host


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=12),
    send_turns=st.lists(st.integers(min_value=0, max_value=4), max_size=12),
    caller_turns=st.integers(min_value=0, max_value=3),
)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_host_gets_rising_values_and_the_last_before_the_result(
    backend: str, steps: list[int], send_turns: list[int], caller_turns: int
) -> None:
    values = [float(sum(steps[: index + 1])) for index in range(len(steps))]
    host = anyio.run(relay_one_call, values, send_turns, caller_turns, backend=backend)
    *progress, result = host
    assert result == -1.0, f"the result went before progress: {host}"
    assert progress == sorted(set(progress)), f"a value went backwards or twice: {host}"
    assert progress[-1] == values[-1], f"the last value {values[-1]} did not reach the host before the result: {host}"


def test_a_value_recorded_late_is_sent_by_finish_and_never_twice() -> None:
    async def main() -> list[float]:
        sent: list[float] = []

        async def report(progress: float, total: float | None, message: str | None) -> None:
            sent.append(progress)

        relay = ProgressRelay(report, settle=0)
        await relay.on_progress(10, None, None)
        relay.record(5, None, None)  # lower: the protocol's values only rise
        relay.record(30, None, None)  # recorded, its send not yet run
        await relay.finish()
        await relay.finish()
        return sent

    assert anyio.run(main) == [10, 30]
