"""Real MCP clients written by others (Node): the pinned TypeScript SDKs and the MCP Inspector CLI.

``package.json`` pins them; ``npm ci --prefix tests/interop`` installs them (``.ci/run``
does). Without ``node`` on PATH these tests skip, saying so; with node but without
the install they fail, naming the command.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "mcp"))  # the shared test app and the serving fixtures

from stdio_serving import StdioCommand  # noqa: E402
from stdio_serving import stdio_command as _stdio_command  # noqa: E402


@pytest.fixture(scope="session")
def node() -> str:
    """The ``node`` executable, with the pinned packages installed next to this file."""
    path = shutil.which("node")
    if path is None:
        pytest.skip("node is not installed: the interop tests drive Node MCP clients (install Node 20+).")
    if not (HERE / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail(
            "The pinned Node clients are not installed: run `make interop` (npm install --prefix tests/interop)."
        )
    return path


@pytest.fixture(scope="session")
def pinned() -> dict[str, str]:
    """The versions package.json pins (what these tests ran against)."""
    return json.loads((HERE / "package.json").read_text())["dependencies"]


@pytest.fixture
def stdio_command() -> StdioCommand:
    """The stdio server under test, started the one way the MCP tests start it."""
    return _stdio_command()
