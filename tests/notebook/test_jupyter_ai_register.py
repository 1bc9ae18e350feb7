"""``%fusion serve --register``: jupyter-ai 3's own settings loader sees the notebook's endpoint.

jupyter-ai cannot share this venv (it pins mcp 1.x; fusion-nb needs 2.3), so a throwaway venv
gets ``jupyter-ai-persona-manager``, the package of jupyter-ai 3 that reads
``.jupyter/mcp_settings.json`` (``PersonaManager.get_mcp_settings``), and LOADER runs that
method for a chat file under the Jupyter server's root, as the persona manager does when it
starts an agent's session. Building that venv takes ~30-60 s (once per module, pip's cache warm).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from desktop_host import host_client
from jupyter_client.asynchronous import AsyncKernelClient
from kernel_harness import Kernel

from fusion_nb.notebook import mcp_settings

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # jupyter_client's async API is asyncio-only

#: jupyter-ai 3.2.0 requires jupyter-ai-persona-manager>=0.2.0,<0.3.0
PERSONA_MANAGER = "jupyter-ai-persona-manager==0.2.2"
TOKEN = "jupyter-token-register-0123456789"
NOTEBOOK = "work/analysis.ipynb"

LOADER = """
import json, logging, sys, types
from jupyter_ai_persona_manager.persona_manager import PersonaManager

root, chat = sys.argv[1], sys.argv[2]
manager = types.SimpleNamespace(
    root_dir=root, chat=types.SimpleNamespace(get_path=lambda: chat), builtin_mcp_servers=[], log=logging.getLogger()
)
for name in ("get_chat_path", "get_chat_dir", "get_dotjupyter_dir"):
    setattr(manager, name, getattr(PersonaManager, name).__get__(manager))
settings = PersonaManager.get_mcp_settings(manager)
print(json.dumps(settings.model_dump(mode="json") if settings else None))
"""


@pytest.fixture(scope="module")
def jupyter_ai_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway venv's python with jupyter-ai 3's settings loader installed from PyPI."""
    venv = tmp_path_factory.mktemp("jupyter-ai")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", PERSONA_MANAGER]
    subprocess.run(pip, check=True, timeout=600)
    return python


def jupyter_ai_servers(python: Path, root: Path, chat: str) -> list[dict[str, Any]]:
    """The MCP servers jupyter-ai gives an agent in ``chat`` (a path under ``root``)."""
    out = subprocess.run([str(python), "-c", LOADER, str(root), chat], capture_output=True, text=True, check=True)
    settings = json.loads(out.stdout)
    return settings["mcp_servers"] if settings else []


# ---- a real jupyter server with a notebook's kernel (as tests/notebook/test_through_jupyter.py) ----


class AttachedKernel(Kernel):
    """A kernel the Jupyter server started, driven through its connection file."""

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


@contextlib.contextmanager
def jupyter_server(tmp: Path, root: Path) -> Iterator[tuple[str, Path]]:
    """``jupyter server`` on a free loopback port under ``/user/alice/``; yields its URL and runtime dir."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR"):
        (tmp / name).mkdir()
        env[name] = str(tmp / name)
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1"]
    command += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}"]
    command += ["--ServerApp.base_url=/user/alice/", f"--ServerApp.root_dir={root}"]
    with (tmp / "server.log").open("w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/user/alice/"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                httpx.get(f"{url}api/status", headers={"Authorization": f"token {TOKEN}"}, timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp / "server.log").read_text()[-3000:]) from None
                time.sleep(0.2)
        yield url, Path(env["JUPYTER_RUNTIME_DIR"])
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextlib.asynccontextmanager
async def notebook_session(http: httpx.AsyncClient, url: str, runtime: Path) -> AsyncIterator[tuple[str, Kernel]]:
    """NOTEBOOK's session opened through the REST API (as JupyterLab opens one): its id and kernel."""
    body = {"path": NOTEBOOK, "name": Path(NOTEBOOK).name, "type": "notebook", "kernel": {"name": "python3"}}
    session = (await http.post(f"{url}api/sessions", json=body)).raise_for_status().json()
    kernel = await AttachedKernel(runtime / f"kernel-{session['kernel']['id']}.json").start()
    try:
        yield session["id"], kernel
    finally:
        await kernel.stop()


SHOUT = '%%fusion_tool f.query("shout").with_string("text")\n"""Upper-case a text."""\nreturn input.text.upper()'


@pytest.mark.kernel
async def test_jupyter_ais_loader_reads_the_registered_notebook_until_stop_or_the_kernels_end(
    tmp_path, jupyter_ai_python
):
    root = tmp_path / "root"
    (root / "work").mkdir(parents=True)
    (root / ".jupyter").mkdir()
    settings = root / ".jupyter" / "mcp_settings.json"
    other = {"name": "other", "command": "other-mcp", "args": ["--flag"], "env": []}
    settings.write_text(json.dumps({"mcp_servers": [other], "comment": "kept"}))
    settings.chmod(0o640)
    with jupyter_server(tmp_path, root) as (url, runtime):
        endpoint = f"{url}fusion/mcp/{NOTEBOOK}"
        http = httpx.AsyncClient(headers={"Authorization": f"token {TOKEN}"}, timeout=60)
        async with http, notebook_session(http, url, runtime) as (session, kernel):
            await kernel.run("%load_ext fusion_nb")
            await kernel.run(SHOUT)
            served = await kernel.run("%fusion serve --register")
            assert "Registered for jupyter-ai's agents as fusion-nb-analysis" in served.stdout, served.stdout
            # what jupyter-ai hands an agent in a chat beside the notebook
            servers = jupyter_ai_servers(jupyter_ai_python, root, "work/chat.chat")
            assert servers[0] == other, servers
            mine = servers[1]
            assert mine["type"] == "http" and mine["name"] == "fusion-nb-analysis" and mine["url"] == endpoint
            assert mine["headers"] == [{"name": "Authorization", "value": f"token {TOKEN}"}]
            # the entry works as the agent uses it: the URL with its headers
            entry = {"url": mine["url"], "headers": {h["name"]: h["value"] for h in mine["headers"]}}
            async with host_client(entry) as client:
                assert (await client.call_tool("shout", {"text": "agent"})).content[0].text == "AGENT"
            assert stat.S_IMODE(settings.stat().st_mode) == 0o640  # its owner's bits, not ours
            assert json.loads(settings.read_text())["comment"] == "kept"
            stopped = await kernel.run("%fusion stop")
            assert "Removed from jupyter-ai's MCP settings" in stopped.stdout, stopped.stdout
            assert jupyter_ai_servers(jupyter_ai_python, root, "work/chat.chat") == [other]
            # registered again, then the kernel ends (its session closed, as closing the notebook does)
            await kernel.run("%fusion serve --register")
            assert len(jupyter_ai_servers(jupyter_ai_python, root, "work/chat.chat")) == 2
            (await http.delete(f"{url}api/sessions/{session}")).raise_for_status()
            with anyio.fail_after(60):  # the server waits for the kernel's exit before answering
                while len(json.loads(settings.read_text())["mcp_servers"]) != 1:
                    await anyio.sleep(0.1)
            assert jupyter_ai_servers(jupyter_ai_python, root, "work/chat.chat") == [other]


def test_kernels_registering_at_once_all_land_and_each_removes_only_its_own(tmp_path):
    path = tmp_path / ".jupyter" / "mcp_settings.json"
    script = (
        "import sys; from pathlib import Path; from fusion_nb.notebook import mcp_settings as m\n"
        "m.register(Path(sys.argv[1]), 'fusion-nb-same', sys.argv[2], {})\n"
        "sys.stdin.read()  # until the test says stop\n"
        "m.unregister()\n"
    )
    urls = [f"http://127.0.0.1:{9000 + n}/mcp" for n in range(6)]
    kernels = [
        subprocess.Popen([sys.executable, "-c", script, str(path), u], stdin=subprocess.PIPE, text=True) for u in urls
    ]
    try:
        deadline = time.monotonic() + 60
        while not path.exists() or len(json.loads(path.read_text())["mcp_servers"]) < len(urls):
            assert time.monotonic() < deadline and all(k.poll() is None for k in kernels), "a registration was lost"
            time.sleep(0.05)
        servers = json.loads(path.read_text())["mcp_servers"]
        assert sorted(s["url"] for s in servers) == urls
        assert len({s["name"] for s in servers}) == len(urls)  # same notebook name: each made unique
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # a new file holds credentials: owner-only
        for kernel in kernels[:3]:
            kernel.communicate("", timeout=60)  # stdin closed: that kernel stops serving
        assert sorted(s["url"] for s in json.loads(path.read_text())["mcp_servers"]) == urls[3:]
    finally:
        for kernel in kernels:
            if kernel.poll() is None:
                kernel.communicate("", timeout=60)
    assert json.loads(path.read_text())["mcp_servers"] == []


def test_a_settings_file_that_is_not_jupyter_ais_shape_is_left_alone_with_one_sentence(tmp_path):
    path = tmp_path / ".jupyter" / "mcp_settings.json"
    path.parent.mkdir()
    for garbled in ("{not json", '["a list"]', '{"mcp_servers": {}}'):
        path.write_text(garbled)
        with pytest.raises(mcp_settings.SettingsError, match="fix or remove it") as refused:
            mcp_settings.register(path, "fusion-nb-x", "http://127.0.0.1:1/mcp", {})
        assert "\n" not in str(refused.value) and path.read_text() == garbled
