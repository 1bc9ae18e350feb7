import pytest


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
