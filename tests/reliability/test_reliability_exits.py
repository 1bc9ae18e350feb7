"""A sync tool that exits (issue 29, 3): ``sys.exit``, argparse and ``KeyboardInterrupt`` are contained.

A real ``fusion-nb serve --workers 2`` on 127.0.0.1, and tools whose bodies call
``sys.exit(3)``, run an argparse parser on bad arguments, or raise ``KeyboardInterrupt``
(what CLI code pasted into a tool does). Each call must fail alone with INTERNAL_ERROR and
the service must answer on. Before: the first one took the process down (500, exit 3; with
two workers the master stopped both and exited 1). The kernel half of the attack is in
``tests/notebook/test_serve_at_speed.py``.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
from reliability_support import FIGURES

sys.path.insert(0, str(Path(__file__).parent.parent / "cli"))

from served import served  # tests/cli/served.py: the one way tests start ``fusion-nb serve``

# the SDK's HTTP client, as the other served tests
pytestmark = [pytest.mark.reliability, pytest.mark.anyio, pytest.mark.asyncio_only]

EXITS = [("exits", "SystemExit"), ("parses", "SystemExit"), ("interrupts", "KeyboardInterrupt")]
ROUNDS = 5


@pytest.mark.timeout(600)
async def test_tools_that_exit_do_not_take_the_service_down():
    started = time.monotonic()
    async with served("exiting_app", "--workers", "2", startup_timeout=180) as server:
        contained = answered = 0
        async with server.client() as client:
            for _ in range(ROUNDS):
                for tool, raised in EXITS:
                    result = await client.call_tool(tool, {})
                    contained += result.is_error and f"failed with {raised}" in result.content[0].text
                answered += (await client.call_tool("echo", {"text": "on"})).content[0].text == "on"
        alive = server.process.returncode is None
        server.signal(signal.SIGTERM)
        code = await server.wait()
    FIGURES.attack(
        "sync tools that exit (sys.exit, argparse, KeyboardInterrupt), --workers 2",
        exits=ROUNDS * len(EXITS),
        contained=contained,
        answered_after=answered,
        service_alive=alive,
        exit_code=code,
        seconds=round(time.monotonic() - started, 1),
    )
    assert contained == ROUNDS * len(EXITS) and answered == ROUNDS and alive and code == 0
