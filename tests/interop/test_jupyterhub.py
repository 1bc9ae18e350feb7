"""A real JupyterHub: an agent reaches alice's notebook's tools through the hub's public URL (issue 47).

``jupyterhub`` (PyPI, the test extra) with its own proxy, Node's ``configurable-http-proxy``
(pinned in package.json, so it lives next to the other Node tools), the DummyAuthenticator
and ``SimpleLocalProcessSpawner``: no system users, each user's server a local process with
its own home (this test runs as root in CI, so the single-user servers get ``--allow-root``;
that spawner does not switch users, which is why it is for tests only). A hub service token
(the admin role) makes one API token for alice and one for bob, as a person does at
``/hub/token``, and starts both users' servers.

alice's notebook kernel is opened through her server's sessions API behind the proxy,
``%fusion serve`` prints the hub's public URL for it (``JUPYTERHUB_PUBLIC_URL``), and the
Python SDK client calls a tool with progress there with alice's token. bob's token, and no
token, are refused by alice's server (the hub's own access check) before any kernel is
reached; alice's token on bob's server's path is refused by his. About 20 s (the hub, the
proxy, two single-user servers and a kernel start): over the 20 s guideline because nothing
smaller is a real hub with two users.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest
from jupyter_serving import NOTEBOOK, AttachedKernel, free_port
from kernel_harness import serve_shout
from node_clients import HERE

from fusion_nb.mcp import connect

pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]  # uvicorn, and the kernel harness

SERVICE_TOKEN = "hub-service-token-0123456789abcdef"
CONFIG = """
c.JupyterHub.bind_url = {public!r}
c.JupyterHub.public_url = {public!r}
c.JupyterHub.hub_bind_url = {hub!r}
c.JupyterHub.db_url = {db!r}
c.JupyterHub.cookie_secret_file = {secret!r}
c.JupyterHub.pid_file = {pid!r}
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.api_url = {proxy_api!r}
c.ConfigurableHTTPProxy.pid_file = {proxy_pid!r}
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {{"alice", "bob"}}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {home!r}
c.Spawner.cmd = [{singleuser!r}]
c.Spawner.args = ["--allow-root"]
c.Spawner.start_timeout = 90
c.Spawner.http_timeout = 90
c.JupyterHub.services = [{{"name": "agent-test", "api_token": {service_token!r}}}]
c.JupyterHub.load_roles = [{{"name": "admin", "services": ["agent-test"]}}]
"""


@dataclass(frozen=True)
class Hub:
    public: str  # the hub's public URL (the proxy), ending in /
    homes: Path  # each user's home: {homes}/{username}

    def api(self, path: str) -> str:
        return f"{self.public}hub/api/{path}"


@contextlib.contextmanager
def jupyterhub(tmp: Path) -> Iterator[Hub]:
    """JupyterHub and its proxy on loopback ports, started and stopped here."""
    proxy = HERE / "node_modules" / ".bin" / "configurable-http-proxy"
    if not proxy.exists():
        pytest.fail("configurable-http-proxy is not installed: run `make interop` (npm install --prefix tests/interop)")
    public = f"http://127.0.0.1:{free_port()}/"
    homes = tmp / "home"
    config = CONFIG.format(
        public=public,
        hub=f"http://127.0.0.1:{free_port()}",
        db=f"sqlite:///{tmp / 'hub.sqlite'}",
        secret=str(tmp / "cookie_secret"),
        pid=str(tmp / "hub.pid"),
        proxy=str(proxy),
        proxy_api=f"http://127.0.0.1:{free_port()}",
        proxy_pid=str(tmp / "proxy.pid"),
        home=str(homes / "{username}"),
        singleuser=str(Path(sys.executable).with_name("jupyterhub-singleuser")),
        service_token=SERVICE_TOKEN,
    )
    (tmp / "jupyterhub_config.py").write_text(config)
    env = {name: value for name, value in os.environ.items() if not name.startswith(("JUPYTER", "JPY_"))}
    command = [sys.executable, "-m", "jupyterhub", "-f", str(tmp / "jupyterhub_config.py")]
    with (tmp / "hub.log").open("w") as log:
        hub = subprocess.Popen(command, cwd=tmp, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                httpx.get(f"{public}hub/api/", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if hub.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp / "hub.log").read_text()[-4000:]) from None
                time.sleep(0.2)
        yield Hub(public, homes)
    finally:
        hub.terminate()  # the hub stops the servers it spawned and the proxy it started
        try:
            hub.wait(30)
        except subprocess.TimeoutExpired:
            hub.kill()
            hub.wait()


async def test_an_agent_reaches_alices_notebook_through_the_hub(node, tmp_path):
    with jupyterhub(tmp_path) as hub:
        admin = httpx.AsyncClient(headers={"Authorization": f"token {SERVICE_TOKEN}"}, timeout=60)
        async with admin:
            tokens = {}
            for user in ("alice", "bob"):
                made = await admin.post(hub.api(f"users/{user}/tokens"), json={"note": "agent"})
                tokens[user] = made.raise_for_status().json()["token"]
            for user in ("alice", "bob"):
                (hub.homes / user / "work").mkdir(parents=True)
                (await admin.post(hub.api(f"users/{user}/server"))).raise_for_status()
            deadline = time.monotonic() + 90
            for user in ("alice", "bob"):
                while not (await admin.get(hub.api(f"users/{user}"))).json()["servers"].get("", {}).get("ready"):
                    assert time.monotonic() < deadline, (tmp_path / "hub.log").read_text()[-4000:]
                    await anyio.sleep(0.2)
        server = f"{hub.public}user/alice/"
        alice = httpx.AsyncClient(headers={"Authorization": f"token {tokens['alice']}"}, timeout=60)
        async with alice:
            body = {"path": NOTEBOOK, "name": "analysis.ipynb", "type": "notebook", "kernel": {"name": "python3"}}
            session = (await alice.post(f"{server}api/sessions", json=body)).raise_for_status().json()
            runtime = hub.homes / "alice" / ".local" / "share" / "jupyter" / "runtime"
            kernel = await AttachedKernel(runtime / f"kernel-{session['kernel']['id']}.json").start()
            try:
                printed, _, _ = await serve_shout(kernel)
                url = re.search(r"Through the Jupyter server \([^)]*\): (\S+)", printed.stdout)
                assert url is not None and url.group(1) == f"{server}fusion/mcp/{NOTEBOOK}", printed.stdout
                assert "Credential: a JupyterHub API token" in printed.stdout, printed.stdout
                progress: list[float] = []

                async def on_progress(value, total, message):  # type: ignore[no-untyped-def]
                    progress.append(value)

                async with connect(url.group(1), tokens["alice"]) as client:
                    result = await client.call_tool("shout", {"text": "hub"}, progress_callback=on_progress)
                assert result.content[0].text == "HUB" and progress == [50]
                ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
                for who, headers in (("bob", {"Authorization": f"token {tokens['bob']}"}), ("nobody", {})):
                    async with httpx.AsyncClient(headers=headers, timeout=60) as other:
                        refused = await other.post(url.group(1), json=ping)
                    assert refused.status_code in (401, 403), (who, refused.status_code, refused.text[:300])
                # and alice's token on bob's server path: bob's server asks the hub, which says no
                elsewhere = await alice.post(url.group(1).replace("/user/alice/", "/user/bob/"), json=ping)
                assert elsewhere.status_code in (401, 403), elsewhere.status_code
                await kernel.run("%fusion stop")
            finally:
                await kernel.stop()
