"""Suite-wide fixtures and deadlines.

Every test runs on asyncio and trio unless its directory narrows ``anyio_backend``. Tests that
start a kernel or a browser get a longer pytest-timeout deadline than the 120 s default; nbval
cells start a kernel too, so they are marked ``kernel`` here and ``-m "not kernel"`` skips them.
"""

from __future__ import annotations

import pytest

SLOW_TEST_TIMEOUT = 600  # seconds: a kernel start on a loaded 2-core CI box can take a minute
SLOW_MARKERS = ("kernel", "browser")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


@pytest.fixture
async def kernel():
    """A real ipykernel from this venv (see kernel_harness); asyncio-only directories use it."""
    from kernel_harness import Kernel

    k = await Kernel().start()
    try:
        yield k
    finally:
        await k.stop()


def _is_nbval_cell(item: pytest.Item) -> bool:
    return type(item).__module__.startswith("nbval")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark nbval cells ``kernel``; give kernel and browser tests the slow deadline.

    A test's own ``@pytest.mark.timeout(...)`` wins: it is the closest marker.
    """
    for item in items:
        if _is_nbval_cell(item):
            item.add_marker(pytest.mark.kernel)
        slow = any(item.get_closest_marker(name) for name in SLOW_MARKERS)
        if slow and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT))
