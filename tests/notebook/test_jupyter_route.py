"""Where ``%fusion serve`` says the notebook is reached through its Jupyter server (plain, JupyterHub)."""

import json
import os

from fusion_nb.notebook.jupyter_route import jupyter_route, route_configs


def server_file(tmp_path, monkeypatch, url):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    info = {"url": url, "root_dir": str(tmp_path / "root"), "token": "jtok", "base_url": "/"}
    (runtime / f"jpserver-{os.getppid()}.json").write_text(json.dumps(info))
    return tmp_path / "root"


def test_a_plain_server_gives_its_url_and_token(tmp_path, monkeypatch):
    for name in ("JUPYTERHUB_SERVICE_PREFIX", "JUPYTERHUB_PUBLIC_URL", "JUPYTERHUB_HOST"):
        monkeypatch.delenv(name, raising=False)
    root = server_file(tmp_path, monkeypatch, "http://127.0.0.1:8888/lab-base/")
    route = jupyter_route(str(root / "my work" / "a.ipynb"))
    assert route is not None and route.token == "jtok"
    assert route.url == "http://127.0.0.1:8888/lab-base/fusion/mcp/my%20work/a.ipynb"
    assert jupyter_route(str(tmp_path / "elsewhere.ipynb")) is None  # outside the root: no URL to give
    assert "jtok" not in route_configs(route, hide_token=True)


def test_jupyterhub_gives_the_public_url_and_asks_for_a_hub_token(tmp_path, monkeypatch):
    root = server_file(tmp_path, monkeypatch, "http://10.0.0.7:8888/user/alice/")
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/alice/")
    monkeypatch.setenv("JUPYTERHUB_BASE_URL", "/")
    monkeypatch.setenv("JUPYTERHUB_PUBLIC_URL", "https://hub.example.org/")
    route = jupyter_route(str(root / "a.ipynb"))
    assert route is not None and route.token is None
    assert route.url == "https://hub.example.org/user/alice/fusion/mcp/a.ipynb"
    printed = route_configs(route, hide_token=False)
    assert "https://hub.example.org/hub/token" in printed and "jtok" not in printed
    monkeypatch.delenv("JUPYTERHUB_PUBLIC_URL")
    monkeypatch.delenv("JUPYTERHUB_HOST", raising=False)
    unknown = jupyter_route(str(root / "a.ipynb"))
    assert unknown is not None and unknown.url == "/user/alice/fusion/mcp/a.ipynb"
    assert "the hub did not say its address" in route_configs(unknown, hide_token=False)
