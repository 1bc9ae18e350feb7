"""A real ``jupyter server`` for the tests that reach a notebook's tools through it.

The server runs from this venv with its sys-prefix config (which enables fusion-nb's server
extension, as an installed wheel does), a token and a non-root base URL; a notebook's kernel is
started through the sessions API, as JupyterLab starts one, and driven over its connection file.
Used by tests/notebook (the Python SDK) and tests/interop (the TypeScript SDK).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from jupyter_client.asynchronous import AsyncKernelClient
from kernel_harness import Kernel

TOKEN = "jupyter-token-0123456789abcdef"
BASE = "/user/alice/"
NOTEBOOK = "work/analysis.ipynb"


@dataclass(frozen=True)
class JupyterServer:
    url: str  # with the base URL, ending in /
    runtime: Path  # its JUPYTER_RUNTIME_DIR (connection files, jpserver-*.json, fusion-nb's records)
    root: Path

    def endpoint(self, notebook: str = NOTEBOOK) -> str:
        """The notebook's MCP endpoint through the server (fusion_nb.jupyter_server_extension)."""
        return f"{self.url}fusion/mcp/{notebook}"


class AttachedKernel(Kernel):
    """A kernel the Jupyter server started, driven through its connection file (the server owns it)."""

    def __init__(self, connection_file: Path) -> None:
        super().__init__()
        self.connection_file = connection_file

    async def start(self) -> AttachedKernel:
        self.kc = AsyncKernelClient(connection_file=str(self.connection_file))
        self.kc.load_connection_file()
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=60)
        self._reader = asyncio.create_task(self._read_iopub())
        self._shell_reader = asyncio.create_task(self._read_shell())
        return self

    async def stop(self) -> None:
        for task in (self._reader, self._shell_reader):
            if task:
                task.cancel()
        self.kc.stop_channels()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def jupyter_server(tmp: Path, base: str = BASE, token: str = TOKEN) -> Iterator[JupyterServer]:
    """``jupyter server`` on a free loopback port, under ``base``, with ``token``; stopped on exit."""
    root = tmp / "root"
    (root / "work").mkdir(parents=True)
    port = free_port()
    env = {**os.environ}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR"):
        (tmp / name).mkdir()
        env[name] = str(tmp / name)
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1"]
    command += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"]
    command += [f"--ServerApp.base_url={base}", f"--ServerApp.root_dir={root}"]
    with (tmp / "server.log").open("w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}{base}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                httpx.get(f"{url}api/status", headers={"Authorization": f"token {token}"}, timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp / "server.log").read_text()[-3000:]) from None
                time.sleep(0.2)
        yield JupyterServer(url, Path(env["JUPYTER_RUNTIME_DIR"]), root)
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextlib.asynccontextmanager
async def notebook_kernel(
    http: httpx.AsyncClient, server: JupyterServer, notebook: str = NOTEBOOK
) -> AsyncIterator[tuple[str, AttachedKernel]]:
    """A session for ``notebook`` opened through the REST API, as JupyterLab opens one; yields its kernel id."""
    body = {"path": notebook, "name": Path(notebook).name, "type": "notebook", "kernel": {"name": "python3"}}
    session = (await http.post(f"{server.url}api/sessions", json=body)).raise_for_status().json()
    kernel_id = session["kernel"]["id"]
    kernel = await AttachedKernel(server.runtime / f"kernel-{kernel_id}.json").start()
    try:
        yield kernel_id, kernel
    finally:
        await kernel.stop()
