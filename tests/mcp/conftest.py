"""Shared MCP test plumbing: the test app, and one ``connect`` per protocol era and transport."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fusion_mcp_testapp import make_app
from stdio_serving import StdioCommand
from stdio_serving import stdio_command as _stdio_command


@pytest.fixture
def stdio_command() -> StdioCommand:
    """The one way tests start a stdio server process (see ``stdio_serving``)."""
    return _stdio_command()


@pytest.fixture
async def app_probe():
    app, probe = make_app()
    yield app, probe
    await app.aclose()
    assert app.active_calls == []
