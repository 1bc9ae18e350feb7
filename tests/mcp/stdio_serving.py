"""How tests start the stdio server: one place, so the command can later become ``fusion-nb serve``.

``StdioCommand`` is what the ``stdio_command`` fixture gives tests: the argv and
environment of a server process serving ``stdio_app:app`` (the test app plus
``linger``), as the SDK's ``StdioServerParameters`` or as raw argv for other
clients (the Node interop scripts, raw-pipe tests).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from mcp import StdioServerParameters

from fusion_nb.mcp.stdio import PipeLines

HERE = Path(__file__).parent
REPO = HERE.parent.parent


@dataclass(frozen=True)
class StdioCommand:
    """A server process command line: ``argv`` run in ``cwd`` with ``env`` added to the environment."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = str(REPO)

    def full_env(self, **extra: str) -> dict[str, str]:
        """This process's environment plus the server's and ``extra``."""
        return {**os.environ, **self.env, **extra}

    def params(self, **extra: str) -> StdioServerParameters:
        """The SDK client's form (its default environment is minimal: ours is added explicitly)."""
        return StdioServerParameters(command=self.argv[0], args=self.argv[1:], env={**self.env, **extra}, cwd=self.cwd)


def stdio_command() -> StdioCommand:
    """The stdio server under test (today ``python -u -m fusion_nb.mcp.stdio stdio_app:app``)."""
    return StdioCommand(
        argv=[sys.executable, "-u", "-m", "fusion_nb.mcp.stdio", "stdio_app:app"],
        env={"PYTHONPATH": f"{HERE}{os.pathsep}{REPO}"},
    )


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
LINGER = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "linger", "arguments": {}}}
LINGER["params"]["_meta"] = {"progressToken": "linger"}  # type: ignore[index]
ECHO = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}


class RawServer:
    """The stdio server process driven over its raw pipes, as a careless client would.

    Its stdout is a pipe this test owns (``stop_reading`` closes the read end for real,
    which closing a subprocess stream wrapper does not promise on every backend).
    """

    def __init__(self, process: anyio.abc.Process, stdout_fd: int) -> None:
        self.process = process
        self.stdout_fd = stdout_fd
        os.set_blocking(stdout_fd, False)
        self.lines = PipeLines(stdout_fd)
        self.reading = True

    def stop_reading(self) -> None:
        """Close our end of the server's stdout, as a client that went away does."""
        if self.reading:
            self.reading = False
            os.close(self.stdout_fd)

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        return json.loads(await anext(self.lines))

    async def start_linger(self) -> None:
        """Handshake, then start ``linger`` and wait until its handler runs (its first progress)."""
        await self.send(INITIALIZE)
        assert (await self.receive())["id"] == 1
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await self.send(LINGER)
        assert (await self.receive())["method"] == "notifications/progress"

    async def exit(self) -> tuple[int, list[str]]:
        """Wait for the process to end: its exit code and its stderr lines."""
        with anyio.fail_after(20):
            code = await self.process.wait()
        assert self.process.stderr is not None
        err = b""
        async for chunk in self.process.stderr:
            err += chunk
        return code, err.decode().splitlines()


@contextlib.asynccontextmanager
async def open_raw(command: StdioCommand, **env: str) -> AsyncIterator[RawServer]:
    """Start the stdio server with raw pipes; the process is reaped when the block ends."""
    read_end, write_end = os.pipe()
    try:
        process = await anyio.open_process(
            command.argv, cwd=command.cwd, env=command.full_env(**env), stdout=write_end, stderr=subprocess.PIPE
        )
    finally:
        os.close(write_end)
    server = RawServer(process, read_end)
    try:
        async with process:
            yield server
    finally:
        server.stop_reading()
