"""``Served``: a ``fusion-nb serve`` subprocess on loopback, its stderr watched line by line."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import httpx
from mcp import Client

from fusion_nb.mcp import connect

HERE = Path(__file__).parent
DATA = HERE / "data"
REPO = HERE.parent.parent


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for a CLI subprocess: test data importable, unbuffered output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSION_NB_")}
    env["PYTHONPATH"] = os.pathsep.join([str(DATA), str(REPO)])
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_cli(*args: str, input_text: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m fusion_nb ARGS`` to completion (generous timeout)."""
    return subprocess.run(
        [sys.executable, "-m", "fusion_nb", *args],
        input=input_text,
        capture_output=True,
        text=True,
        env=cli_env(**env),
        cwd=REPO,
        timeout=120,
    )


class Served:
    """A running ``fusion-nb serve ... --transport http`` process."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._changed = anyio.Event()
        self.url = ""
        self.token: str | None = None
        self.eof = anyio.Event()

    async def _read(self) -> None:
        assert self.process.stderr is not None
        buffer = b""
        async for chunk in self.process.stderr:
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for line in complete:
                self.lines.append(line.decode(errors="replace"))
            self._changed.set()
            self._changed = anyio.Event()
        self._changed.set()
        self.eof.set()

    async def wait_for(self, pattern: str, timeout: float = 60, count: int = 1) -> re.Match[str]:
        """The ``count``-th stderr line matching ``pattern`` (waits for it; fails after ``timeout``)."""
        regex = re.compile(pattern)
        with anyio.move_on_after(timeout):
            while True:
                matches = [match for match in map(regex.search, self.lines) if match]
                if len(matches) >= count:
                    return matches[count - 1]
                if self.process.returncode is not None:
                    raise AssertionError(f"process ended without {pattern!r}:\n" + "\n".join(self.lines))
                await self._changed.wait()
        raise AssertionError(f"no {pattern!r} within {timeout} s; stderr so far:\n" + "\n".join(self.lines))

    @property
    def health_url(self) -> str:
        return self.url.removesuffix("/mcp") + "/healthz"

    @contextlib.asynccontextmanager
    async def client(self, mode: str = "auto", url: str | None = None, **options) -> AsyncIterator[Client]:
        async with connect(url or self.url, self.token, mode=mode, **options) as client:
            yield client

    async def get(self, path_or_url: str) -> httpx.Response:
        url = path_or_url if "://" in path_or_url else self.url.removesuffix("/mcp") + path_or_url
        async with httpx.AsyncClient() as http:
            return await http.get(url)

    def signal(self, signum: signal.Signals = signal.SIGTERM) -> None:
        self.process.send_signal(signum)

    async def wait(self, timeout: float = 60) -> int:
        with anyio.fail_after(timeout):
            return await self.process.wait()


@contextlib.asynccontextmanager
async def served(
    source: str, *args: str, env: dict[str, str] | None = None, ready: str | None = None, startup_timeout: float = 60
):
    """Start ``fusion-nb serve SOURCE --transport http --port 0 ARGS``; yields a ``Served`` once it says it serves.

    ``startup_timeout`` bounds each start-up line awaited (the URL, the generated token, ``ready``).
    """
    command: Sequence[str] = [
        sys.executable,
        "-m",
        "fusion_nb",
        "serve",
        source,
        "--transport",
        "http",
        "--port",
        "0",
        *args,
    ]
    process = await anyio.open_process(command, env=cli_env(**(env or {})), cwd=REPO)
    server = Served(process)
    async with anyio.create_task_group() as group:
        group.start_soon(server._read)
        try:
            match = await server.wait_for(r"at (http://\S+/mcp)", startup_timeout)
            server.url = match.group(1)
            named = "--tokens-file" in args or "FUSION_NB_TOKENS" in (env or {}) or "--auth-issuer" in args
            if "--no-auth" not in args and not named:  # (with named tokens or OAuth the test sets ``token``)
                given = (env or {}).get("FUSION_NB_TOKEN") or _option(args, "--token")
                server.token = given or (await server.wait_for(r"bearer token .*: (\S+)$", startup_timeout)).group(1)
            if ready:
                await server.wait_for(ready, startup_timeout)
            yield server
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.move_on_after(10, shield=True):
                await process.wait()
                await server.eof.wait()  # every line the process wrote is in ``lines``
            group.cancel_scope.cancel()


def _option(args: Sequence[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None
