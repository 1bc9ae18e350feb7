"""Widgets run on asyncio (their timers use the running asyncio loop), as in a kernel."""

import asyncio

import pytest

from fusion_nb import Fusion


@pytest.fixture(autouse=True)
def dummy_comms(monkeypatch):
    """Widgets here talk to comm's ``DummyComm``, whatever another test imported earlier.

    Importing ``ipykernel.ipkernel`` (anything that touches an in-process kernel does)
    swaps ``comm.create_comm`` for ipykernel's, whose comms have no kernel in this process,
    so ipywidgets silently sends nothing and the tests that count messages see none.
    """
    import comm

    monkeypatch.setattr(comm, "create_comm", lambda *args, **kwargs: comm.DummyComm(*args, **kwargs))


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
