"""Debian's ``redis-server`` on loopback for the tests and benchmarks that share tasks across workers.

The Redis task store (``--task-store redis://...``) is tested against the real server, never a
fake: a fake would agree with whatever the store assumes. ``RedisServer`` starts one on
127.0.0.1 at a free port with nothing written to disk (``--save ''``, no append-only file, its
directory a temporary one), waits until it answers ``PING`` and can be stopped and started again
on the same port, so a test can take Redis away from running workers and bring it back.

Without ``redis-server`` a developer gets a skip saying how to install it; under CI (any
non-empty ``CI``) a missing server fails, as a missing chromium does (``chromium_check``):
``make test`` and ``.ci/run`` install it, so there its absence is a broken setup, not a choice.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

DEBIAN_REDIS_SERVER = "/usr/bin/redis-server"
MISSING = (
    "Debian's redis-server is not installed (apt-get install -y redis-server; `make test` installs it "
    "when run as root with apt)"
)
START_TIMEOUT = 20.0  # seconds until a started server must answer PING (it takes milliseconds)


def find_redis_server(candidates: Iterable[str | None] | None = None) -> str | None:
    """The first existing ``redis-server`` executable: the one on PATH, then Debian's."""
    if candidates is None:
        candidates = (shutil.which("redis-server"), DEBIAN_REDIS_SERVER)
    return next((path for path in candidates if path and os.access(path, os.X_OK)), None)


def redis_server_or_skip(candidates: Iterable[str | None] | None = None) -> str:
    """``redis-server``'s path; skip (or, under CI, fail) without it."""
    import pytest  # here, not at the top: benchmarks/scale.py starts its Redis with this module, without pytest

    found = find_redis_server(candidates)
    if found is not None:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{MISSING}; CI is set, so the Redis task-store tests must run")
    pytest.skip(MISSING)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers_ping(port: int) -> bool:
    """Whether a Redis server on 127.0.0.1:``port`` answers ``PING`` with ``+PONG`` (RESP, no client library)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` on 127.0.0.1; ``url`` stays the same across ``stop()`` and ``start()``."""

    def __init__(self, executable: str, directory: Path, port: int | None = None) -> None:
        self.executable = executable
        self.directory = directory
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def argv(self) -> list[str]:
        """Loopback only, protected mode on, nothing persisted: tasks need no durability in a test."""
        return [
            self.executable,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            "--protected-mode",
            "yes",
        ]

    def start(self) -> None:
        """Start the server and return once it answers ``PING`` (``RuntimeError`` with its output if it never does)."""
        assert not self.running, "already running"
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while not answers_ping(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                output = (self.directory / "redis.log").read_text(errors="replace")
                self.stop()
                raise RuntimeError(f"redis-server on port {self.port} did not answer PING:\n{output}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s) and return once it has exited."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def redis_server(executable: str | None = None, directory: Path | None = None) -> Iterator[RedisServer]:
    """A started ``RedisServer``, stopped on exit (``executable``: found on PATH or Debian's path when omitted)."""
    executable = executable or find_redis_server()
    if executable is None:
        raise RuntimeError(MISSING)
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fusion-nb-redis-")))
        server = RedisServer(executable, directory)
        server.start()
        stack.callback(server.stop)
        yield server
