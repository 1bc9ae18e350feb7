import pytest


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"  # jupyter_client's async API is asyncio-only
