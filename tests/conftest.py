"""Suite-wide fixtures and deadlines.

Every async test runs on asyncio and trio, unless marked ``asyncio_only`` (a library it drives runs on
asyncio only: uvicorn, jupyter_client, distributed, redis): then on asyncio, and its ids name no backend.

Deadlines: pytest-timeout fails a test after 120 s (``timeout`` in pyproject). Tests that start
a kernel or a browser get 600 s; nbval cells start a kernel too, so they are marked ``kernel``
here (and ``-m "not kernel"`` skips them). A test's own ``@pytest.mark.timeout(N)`` wins.

An async test gets its deadline inside its event loop (``anyio.fail_after``): it fails with
``TimeoutError`` after its cleanup and fixture teardown ran, and the session goes on. pytest-timeout's
signal alarm cannot stop a trio test (anyio's trio runner waits for the test task that the alarm
left running), so for async tests pytest-timeout is only a backstop, 30 s later, in thread mode:
it dumps every thread's stack and ends the session rather than letting CI hang.

Property tests (hypothesis) run under one profile: the same examples on every machine, no
example database (a CI clone is fresh), no per-example deadline (an example runs a whole
event loop); each test says only how many examples it takes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Generator
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, settings

SLOW_TEST_TIMEOUT = 600  # seconds: a kernel start on a loaded 2-core CI box can take a minute
SLOW_MARKERS = ("kernel", "browser")
BACKSTOP_GRACE = 30  # seconds between an async test's in-loop deadline and the thread-mode backstop
IN_LOOP_DEADLINE = pytest.StashKey[float]()

settings.register_profile(
    "fusion-nb", deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("fusion-nb")


#: the loops an async test runs on, unless it is marked ``asyncio_only``
BACKENDS = ["asyncio", "trio"]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio: the loop of a test marked ``asyncio_only`` (module scope, for module-scoped async fixtures)."""
    return "asyncio"


@pytest.hookimpl(tryfirst=True)  # the backend first in a test's id, as when it was a fixture's params
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every async test on asyncio and trio, except one marked ``asyncio_only`` (it keeps the fixture above)
    or one that parametrizes ``anyio_backend`` itself."""
    if "anyio_backend" not in metafunc.fixturenames or metafunc.definition.get_closest_marker("asyncio_only"):
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        if "anyio_backend" in ([n.strip() for n in names.split(",")] if isinstance(names, str) else names):
            return
    metafunc.parametrize("anyio_backend", BACKENDS)


@pytest.fixture
def redis(tmp_path_factory: pytest.TempPathFactory) -> Generator[Any, None, None]:
    """Debian's ``redis-server`` on 127.0.0.1 at a free port (``redis_server.RedisServer``: ``url``,
    ``stop()``, ``start()``); skipped without it, failed under CI (see redis_server)."""
    from redis_server import RedisServer, redis_server_or_skip

    server = RedisServer(redis_server_or_skip(), tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def kernel() -> AsyncIterator[Any]:
    """A real ipykernel from this venv (see kernel_harness); asyncio-only directories use it."""
    from kernel_harness import Kernel

    k = await Kernel().start()
    try:
        yield k
    finally:
        await k.stop()


def _is_nbval_cell(item: pytest.Item) -> bool:
    return type(item).__module__.startswith("nbval")


def _timeout_of(item: pytest.Item) -> float:
    """pytest-timeout's precedence: the closest marker, then ``--timeout``, then the ini value."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        return float(marker.args[0] if marker.args else marker.kwargs["timeout"])
    option = item.config.getoption("timeout", None)
    return float(option if option is not None else item.config.getini("timeout"))


def _is_async_anyio_test(item: pytest.Item) -> bool:
    test = getattr(item, "obj", None)
    return (
        item.get_closest_marker("anyio") is not None
        and inspect.iscoroutinefunction(test)
        and not hasattr(test, "hypothesis")  # hypothesis runs its examples itself
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark nbval cells ``kernel``; give kernel and browser tests the slow deadline; move async
    tests' deadlines into their event loop, with pytest-timeout as the backstop."""
    for item in items:
        if _is_nbval_cell(item):
            item.add_marker(pytest.mark.kernel)
        slow = any(item.get_closest_marker(name) for name in SLOW_MARKERS)
        if slow and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT))
        if _is_async_anyio_test(item):
            deadline = _timeout_of(item)
            if deadline <= 0:
                continue  # `--timeout=0`: no deadline at all
            item.stash[IN_LOOP_DEADLINE] = deadline
            backstop = pytest.mark.timeout(deadline + BACKSTOP_GRACE, method="thread")
            item.add_marker(backstop, append=False)  # closest: it wins over the test's own


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """Run an async test under its in-loop deadline (anyio's plugin then runs the wrapper)."""
    deadline = pyfuncitem.stash.get(IN_LOOP_DEADLINE, None)
    if deadline is None:
        return (yield)
    test = pyfuncitem.obj

    @functools.wraps(test)
    async def under_deadline(**kwargs: Any) -> Any:
        with anyio.move_on_after(deadline) as scope:
            return await test(**kwargs)
        if scope.cancelled_caught:
            pytest.fail(f"Timeout: the test ran past its {deadline:g} s deadline (cancelled in its loop)")

    pyfuncitem.obj = under_deadline
    try:
        return (yield)
    finally:
        pyfuncitem.obj = test
