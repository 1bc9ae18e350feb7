"""Notebook 05 in JupyterLab under a base URL: the Jupyter URL it prints serves an agent (issue 47).

JupyterLab runs with ``/user/alice/`` as base URL and a token, as a single-user server on
JupyterHub or Binder does; the committed notebook 05 is opened in Debian's chromium and run to
its ``%fusion serve --hide-token`` cell, which prints the endpoint through the Jupyter server.
An agent calls a slow tool at that URL with the Jupyter token while the page's activity panel
shows the call live (client, arguments, progress, a Stop button). Screenshots go to
``test-artifacts/browser/`` (and ``$FUSION_NB_SHOTS`` when set).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from chromium_check import chromium_or_skip
from test_activity_panel import call
from test_frontends import ARTIFACTS, free_port, launch, open_notebook, outputs, run_cell, wait_idle

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "05-serving-to-agents.ipynb"
SETTINGS = REPO / "jupyterlab-settings"  # as make lab: no "Jupyter news?" popup over the page
BASE = "/user/alice/"
TOKEN = "fusion-browser-test-05"
SERVE = 4  # the %fusion serve cell


def shoot(target, name: str) -> None:
    """A screenshot of ``target`` (a page or a locator) into the artifacts (and $FUSION_NB_SHOTS)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    if os.environ.get("FUSION_NB_SHOTS"):
        Path(os.environ["FUSION_NB_SHOTS"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(ARTIFACTS / f"{name}.png", os.environ["FUSION_NB_SHOTS"])


def test_notebook_05_prints_the_jupyter_url_and_an_agent_calls_through_it(tmp_path):
    from playwright.sync_api import sync_playwright

    chromium_or_skip()
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    port = free_port()
    env = {**os.environ}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        (tmp_path / name).mkdir()
        env[name] = str(tmp_path / name)
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1"]
    command += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}"]
    command += [f"--ServerApp.base_url={BASE}", f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True"]
    command += [f"--LabApp.app_settings_dir={SETTINGS}"]
    with (tmp_path / "lab.log").open("w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    lab = f"http://127.0.0.1:{port}{BASE}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{lab}api/status?token={TOKEN}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp_path / "lab.log").read_text()[-3000:]) from None
                time.sleep(0.2)
        with sync_playwright() as pw:
            browser = launch(pw)
            try:
                page = browser.new_page(viewport={"width": 1300, "height": 1400})
                open_notebook(page, f"{lab}lab/tree/{NOTEBOOK.name}?token={TOKEN}")
                for index in range(1, SERVE + 1):
                    run_cell(page, index)
                    wait_idle(page)
                served = outputs(page, SERVE)
                printed = served.inner_text()
                through = re.search(r"Through the Jupyter server \([^)]*\): (\S+)", printed)
                assert through is not None, printed
                endpoint = through.group(1)
                assert endpoint == f"{lab}fusion/mcp/{NOTEBOOK.name}", endpoint
                assert "JUPYTER_TOKEN" in printed and TOKEN not in printed, "--hide-token hides the Jupyter token"

                answer: dict = {}

                def agent() -> None:  # 80 days at 0.05 s each: a call the panel shows live
                    answer.update(call(endpoint, TOKEN, "weather.forecast", {"city": "Oslo", "days": 80}, 1, 120))

                caller = threading.Thread(target=agent)
                caller.start()
                try:
                    served.locator("button", has_text="Stop").wait_for(timeout=30_000)
                    served.get_by_text("day 2").first.wait_for(timeout=30_000)
                    live = served.inner_text()
                    panel = served.locator(".fusion-activity")
                    panel.scroll_into_view_if_needed()
                    shoot(page, "notebook05-jupyter-url-live-call")
                    shoot(served, "notebook05-jupyter-url-live-call-output")
                finally:
                    caller.join(60)
                assert not caller.is_alive(), "the agent's call through the Jupyter URL did not end"
                assert "weather.forecast" in live and "Oslo" in live and "browser-test-agent 0" in live, live
                assert "1 live" in live, live
                assert answer["structuredContent"]["forecast"] == ["sunny"] * 80, answer
                served.get_by_text("1 call in the last minute").wait_for(timeout=30_000)
                run_cell(page, 8)  # %fusion stop
                wait_idle(page)
            finally:
                browser.close()
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
