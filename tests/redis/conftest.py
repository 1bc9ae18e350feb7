"""A real Debian ``redis-server`` per test, on loopback (the shared task store's tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "mcp"))  # (the MCP tests' client plumbing)
sys.path.insert(0, str(Path(__file__).parent))

from redis_process import RedisProcess


@pytest.fixture
def anyio_backend():
    return "asyncio"  # the redis package's client is asyncio's


@pytest.fixture
def redis_server(tmp_path):
    server = RedisProcess(tmp_path)
    server.start()
    yield server
    server.stop()
