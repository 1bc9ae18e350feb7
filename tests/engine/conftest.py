"""Every engine test gets a fresh app and, afterwards, a check that nothing leaked."""

import asyncio

import anyio
import pytest

from fusion_nb import Fusion


def assert_nothing_left(app: Fusion) -> None:
    assert app.active_calls == [], f"calls still live: {app.active_calls}"
    stats = app.stats()
    assert stats.idle, f"the app still holds something: {stats}"


@pytest.fixture
async def app():
    app = Fusion("test", grace=2.0)
    yield app
    assert await app.wait_background(5), "background tasks did not finish"
    assert_nothing_left(app)
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:
        return  # trio: app.background_tasks above counts the detached system tasks
    ours = [t for t in tasks if t.get_name().startswith("fusion-nb")]
    assert not ours, f"asyncio tasks left: {ours}"


@pytest.fixture
def slow(app):
    """A tool stuck in an await until cancelled; records that its ``finally`` ran."""
    entered, cleaned = anyio.Event(), []

    @app.f.action("slow").handle
    async def slow(input, ctx):
        try:
            entered.set()
            await anyio.sleep_forever()
        finally:
            cleaned.append(True)

    return entered, cleaned
