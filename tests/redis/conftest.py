"""A real Debian ``redis-server`` per test, on loopback (the shared task store's tests): the suite's rig
(``tests/redis_server.py``, fixture ``redis``), which the CLI scenarios and benchmarks/scale.py use too."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "mcp"))  # (the MCP tests' client plumbing)
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def redis_server(redis):
    return redis
