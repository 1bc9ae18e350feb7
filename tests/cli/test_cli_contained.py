"""``fusion-nb serve``: a sync tool that calls ``sys.exit`` (or argparse, or raises ``KeyboardInterrupt``)
fails its call with INTERNAL_ERROR; the server and every worker go on serving.

Before: the exception left the worker's event loop (500, exit 3; with ``--workers 2`` the
master stopped the other worker and exited 1).
"""

from __future__ import annotations

import signal

import pytest
from served import served

pytestmark = pytest.mark.anyio

WORKERS_STARTUP = 120
EXITS = [("exits", "SystemExit"), ("parses", "SystemExit"), ("interrupts", "KeyboardInterrupt")]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the SDK's HTTP client (see test_cli_serve)
@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["one process", "two workers"])
async def test_a_tool_that_exits_fails_its_call_and_the_server_serves_on(workers):
    async with served("exiting_app", *workers, startup_timeout=WORKERS_STARTUP) as server:
        async with server.client() as client:
            for tool, raised in EXITS:
                for _ in range(3):  # with two workers, both are likely to take one
                    result = await client.call_tool(tool, {})
                    assert result.is_error and f"failed with {raised}" in result.content[0].text, result
            assert (await client.call_tool("echo", {"text": "still serving"})).content[0].text == "still serving"
        assert server.process.returncode is None
        server.signal(signal.SIGTERM)
        assert await server.wait() == 0
