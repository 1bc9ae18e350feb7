"""An app served as users serve it: ``app.http_app()`` under uvicorn on 127.0.0.1, in its own thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn
from reliability_app import Tally, make_reliability_app


class ThreadServed:
    """``http_app()`` served by uvicorn (its own socket on 127.0.0.1, port 0) in a thread of its own.

    The thread owns the server's event loop, so synchronous tests (hypothesis, raw
    sockets) can attack it with blocking clients while it answers.
    """

    def __init__(self, asgi: Any, app: Any, tally: Tally) -> None:
        self.asgi, self.app, self.tally = asgi, app, tally
        self.token: str = asgi.token
        self.server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=0, log_level="critical"))
        self.server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]  # not the main thread
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._run, name="reliability-uvicorn", daemon=True)
        self.port = 0

    def _run(self) -> None:
        async def serve() -> None:
            self.loop = asyncio.get_running_loop()
            await self.server.serve()

        asyncio.run(serve())

    def start(self) -> ThreadServed:
        self.thread.start()
        for _ in range(2000):  # bounded: 20 s
            if self.server.started or not self.thread.is_alive():
                break
            threading.Event().wait(0.01)
        assert self.server.started, "uvicorn did not start within 20 s"
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)
        assert not self.thread.is_alive(), "uvicorn did not stop within 20 s"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def run(self, coro: Any, timeout: float = 10) -> Any:
        """Run ``coro`` on the server's loop (engine state is read there)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


@contextlib.contextmanager
def thread_served(**options: Any) -> Iterator[ThreadServed]:
    app, tally = make_reliability_app()
    served = ThreadServed(app.http_app(**options), app, tally).start()
    try:
        yield served
    finally:
        served.stop()
