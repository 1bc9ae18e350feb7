"""The HTTP service's drain, in this process: it waits on the engine's idle event, not by polling.

asyncio only: the service is uvicorn in this loop.
"""

from __future__ import annotations

import anyio
import pytest

from fusion_nb import Fusion
from fusion_nb.cli.service import HttpService
from fusion_nb.mcp import http_app
from fusion_nb.mcp.uvicorn_server import listening_socket

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


class CountedApp(Fusion):
    """A real app that counts how often something looks at its live calls."""

    looks = 0

    @property
    def active_calls(self):  # type: ignore[override]
        self.looks += 1
        return super().active_calls


async def test_drain_wakes_on_the_last_call_settling_not_on_a_timer():
    app = CountedApp("drain")
    started, release = anyio.Event(), anyio.Event()

    @app.f.action("hold").handle
    async def hold(input, ctx):
        started.set()
        await release.wait()
        return "done"

    lines: list[str] = []
    service = HttpService(app, http_app(app), listening_socket(), drain_timeout=60, log=lines.append)
    ready = anyio.Event()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(service.serve, ready.set)
            await ready.wait()
            call = app.start("hold")
            await started.wait()
            service.begin_drain()
            looks = app.looks
            await anyio.sleep(0.3)  # a window, not a wait: a 20 ms poll looks ~15 times in it, the event never
            assert app.looks - looks <= 1, f"the drain polled the calls {app.looks - looks} times"
            release.set()
            assert (await call.wait()).error is None
    assert lines[0].startswith("request: draining (1 call(s) in flight")
    assert not any("cancelling" in line for line in lines)  # the call finished inside the drain
