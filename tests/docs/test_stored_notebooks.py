"""The committed notebooks as people meet them without running anything.

* nbconvert (and nbviewer, which is nbconvert) shows every view's fallback: a call view's
  HTML snapshot, a tool card's text, a panel's line, never an empty widget placeholder;
* JupyterLab opening and saving one changes nothing (so it is not marked modified):
  emulated through jupyter server's contents API, with what the browser does in between
  (JSON parsed as JavaScript numbers, the kernel's ``language_info`` and kernelspec set);
* no token-looking string is stored in any of them.
"""

from __future__ import annotations

import html
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_notebook_sources import load_notebooks_tool

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: what ipywidgets' own repr looks like: a fallback that says nothing to a reader
WIDGET_REPR = re.compile(r"^\w+\((children|layout|value)=")


def widget_outputs(path: Path) -> list[dict]:
    """Every output of ``path`` that shows a widget (its data bundle)."""
    nb = json.loads(path.read_text())
    return [
        output["data"]
        for cell in nb["cells"]
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]


def visible_text(markup: str) -> str:
    """What a reader sees of some HTML: no scripts or styles, no tags, entities decoded, spaces collapsed."""
    markup = re.sub(r"<(script|style)\b.*?</\1>", " ", markup, flags=re.S | re.I)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def joined(value: str | list[str]) -> str:
    return "".join(value) if isinstance(value, list) else value


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbconvert_html_shows_every_views_fallback(path):
    from nbconvert import HTMLExporter

    page, _ = HTMLExporter().from_filename(str(path))
    assert 'type="application/vnd.jupyter.widget-view+json"' not in page, "an empty placeholder for CDN JavaScript"
    for data in widget_outputs(path):
        text = joined(data["text/plain"])
        assert text.strip() and not WIDGET_REPR.match(text), f"a fallback that says nothing: {text[:80]!r}"
        if "text/html" in data:
            fallback = visible_text(joined(data["text/html"]))
        elif "text/markdown" in data:  # (an MCP Apps preview: its result's Markdown, drawn by nbconvert)
            from nbconvert.filters.markdown import markdown2html

            fallback = visible_text(markdown2html(joined(data["text/markdown"])))
        else:
            fallback = " ".join(text.split())
        assert fallback and fallback in visible_text(page), f"{fallback!r} is not shown"


def test_the_committed_notebooks_show_cards_and_call_views():
    """Not vacuous: the notebooks do hold the views whose fallbacks the test above reads."""
    shown = [joined(data["text/plain"]) for path in NOTEBOOKS for data in widget_outputs(path)]
    assert any(" (query, " in text or " (action, " in text for text in shown), "a tool card"
    assert any(re.match(r"[\w.\-]+: [✔✖■◷] ", text) for text in shown), "a finished call view"
    assert any(re.match(r"fusion-nb: \d+ calls? in the last minute", text) for text in shown), "the activity panel"


#: a secret-looking run: 32+ URL-safe characters with upper and lower case and a digit (model ids are hex)
TOKEN_LIKE = re.compile(r"(?<![A-Za-z0-9_\-])(?=[A-Za-z0-9_\-]*[a-z])(?=[A-Za-z0-9_\-]*[A-Z])[A-Za-z0-9_\-]{32,}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_token_looking_string_is_stored(path):
    found = TOKEN_LIKE.findall(path.read_text())
    assert found == [], f"{path.name} holds what looks like a secret: {found[:3]}"


def test_the_token_pattern_finds_a_real_token():
    token = "4r8VPif_8Ypv5RuGO2bIOEpX0SrhM--gibfvbZc6Yio"  # secrets.token_urlsafe(32), as %fusion serve makes
    assert TOKEN_LIKE.findall(f'"env": {{"FUSION_NB_TOKEN": "{token}"}}') == [token]
    assert TOKEN_LIKE.findall(f"model {1:032x} ok, path /path/to/.venv/bin/fusion-nb") == []


def javascript_number(text: str) -> int | float:
    """``JSON.parse`` in a browser: ``100.0`` is the number 100, which ``JSON.stringify`` writes ``100``."""
    value = float(text)
    return int(value) if value.is_integer() else value


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def jupyter_server(tmp_path) -> Iterator[tuple[str, dict[str, str], Path]]:
    """A jupyter server (this venv's) over a copy of the notebooks: its URL, auth header and root."""
    root = tmp_path / "notebooks"
    root.mkdir()
    for path in NOTEBOOKS:
        (root / path.name).write_bytes(path.read_bytes())
    port, token = free_port(), "contents-api-test-token"
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--ServerApp.port={port}"]
    command += [f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    log = tmp_path / "server.log"
    with log.open("w") as sink:
        server = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    url, headers = f"http://127.0.0.1:{port}", {"Authorization": f"token {token}"}
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/api/status", headers=headers).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield url, headers, root
    finally:
        server.terminate()
        server.wait(timeout=30)


def kernel_language_info() -> dict:
    """``language_info`` from a real kernel's kernel_info reply: what JupyterLab copies into the notebook."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[]))
    manager.start_kernel()
    try:
        client = manager.client()
        client.start_channels()
        try:
            reply = client.kernel_info(reply=True, timeout=120)
        finally:
            client.stop_channels()
    finally:
        manager.shutdown_kernel(now=True)
    return dict(reply["content"]["language_info"])


@pytest.mark.kernel
def test_opening_and_saving_in_jupyterlab_changes_nothing(jupyter_server):
    url, headers, root = jupyter_server
    language_info = kernel_language_info()
    specs = httpx.get(f"{url}/api/kernelspecs", headers=headers).json()["kernelspecs"]
    spec = specs["python3"]["spec"]
    kernelspec = {"display_name": spec["display_name"], "language": spec["language"], "name": "python3"}
    tool = load_notebooks_tool()
    for path in NOTEBOOKS:
        got = httpx.get(f"{url}/api/contents/{path.name}", params={"content": 1, "type": "notebook"}, headers=headers)
        assert got.status_code == 200, got.text
        content = json.loads(json.dumps(got.json()["content"]), parse_float=javascript_number)  # the browser's view
        content["metadata"]["language_info"] = language_info  # set on kernel connect
        content["metadata"]["kernelspec"] = kernelspec  # set from the session's kernel spec
        model = {"type": "notebook", "format": "json", "content": content}
        put = httpx.put(f"{url}/api/contents/{path.name}", json=model, headers=headers)
        assert put.status_code == 200, put.text
        saved = (root / path.name).read_text()
        assert saved == path.read_text(), f"{path.name} changes when JupyterLab saves it"
        assert tool.serialize(tool.normalize(json.loads(saved))) == saved, "the normaliser is idempotent on it"
