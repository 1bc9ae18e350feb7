import pytest

from kernel_harness import Kernel


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"  # jupyter_client's async API is asyncio-only


@pytest.fixture
async def kernel():
    k = await Kernel().start()
    try:
        yield k
    finally:
        await k.stop()
