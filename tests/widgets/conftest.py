"""Widgets run on asyncio (their timers use the running asyncio loop), as in a kernel."""

import asyncio

import pytest

from fusion_nb import Fusion


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture
async def app():
    app = Fusion("widgets", grace=2.0)
    yield app
    live = app.active_calls
    await app.aclose()  # a failed test must not leave the next one a mess
    assert live == [], f"calls still live: {live}"
    assert await app.wait_background(5), "background tasks did not finish"
    ours = [t for t in asyncio.all_tasks() if t.get_name().startswith("fusion-nb")]
    assert not ours, f"asyncio tasks left: {ours}"
