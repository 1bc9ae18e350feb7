"""CLI tests drive ``python -m fusion_nb`` as a real subprocess; the harness side runs on asyncio.

The served process always runs its own asyncio loop (``asyncio.run``); the trio
backend would only change the test harness, not the code under test.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def anyio_backend():
    return "asyncio"
