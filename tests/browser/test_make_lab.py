"""``make lab`` as a person meets it: notebook 01 open in front, and nothing asked about news.

The server is started with the Makefile's own ``lab`` command line (read from ``make -n``);
its ``webbrowser.open`` runs ``$BROWSER``, here a script that writes down what it was given
(the server writes two pages to open, one per file it was asked to show), and chromium then
opens exactly that.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_frontends import ARTIFACTS, free_port, launch

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NEWS = "@jupyterlab/apputils-extension:notification"


def lab_command() -> list[str]:
    """The ``jupyter lab`` line ``make lab`` runs (its recipe, expanded by make, not run)."""
    printed = subprocess.run(
        ["make", "-s", "-n", "-o", ".venv/.lab-stamp", "lab"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    joined = printed.replace("\\\n", " ")
    (line,) = [line for line in joined.splitlines() if "jupyter lab" in line]
    words = shlex.split(line.replace('$([ "$(id -u)" = 0 ] && echo --allow-root)', ""))
    start = next(i for i, word in enumerate(words) if word.endswith("/jupyter"))
    return [sys.executable, "-m", "jupyterlab", *words[start + 2 :]]


def test_make_lab_opens_notebook_01_without_the_news_popup(tmp_path):
    """Issue 43: a fresh JupyterLab asked "get notified about Jupyter news?"; notebook 01 is the page in front."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    env = {**os.environ}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        env[name] = str(tmp_path / name.lower())  # a person's fresh home: no settings of their own
    browser_got = tmp_path / "browser-got.txt"
    recorder = tmp_path / "browser"
    recorder.write_text(f'#!/bin/sh\nprintf %s "$1" > {browser_got}.part && mv {browser_got}.part {browser_got}\n')
    recorder.chmod(0o755)
    env["BROWSER"] = f"{recorder} %s"  # what webbrowser.open runs: a person's browser, recorded
    command = [*lab_command(), "--allow-root", f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    log = open(tmp_path / "lab.log", "w")  # noqa: SIM115 - the server writes to it until the test ends
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not browser_got.exists():
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "lab.log").read_text()[-3000:]
            time.sleep(0.2)
        opened = browser_got.read_text().strip()
        while True:  # listening (the page would not retry a refused connection)
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "lab.log").read_text()[-3000:]
            time.sleep(0.2)
        with sync_playwright() as pw:
            browser = launch(pw)
            try:
                page = browser.new_page(viewport={"width": 1300, "height": 1000})
                page.goto(opened)
                page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
                # the notebook is the current tab, its first heading rendered (not a Launcher)
                current = page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current")
                try:
                    current.filter(has_text="01-quickstart.ipynb").wait_for(timeout=60_000)
                except Exception:
                    page.screenshot(path=str(ARTIFACTS / "make-lab-not-notebook-01.png"))
                    raise
                page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownOutput h1").first.wait_for(
                    timeout=60_000
                )
                settings = page.evaluate(
                    f"async () => (await (await fetch('/lab/api/settings/{NEWS}')).json()).schema.properties"
                )
                # the project's overrides are the defaults the page gets (a person's own settings still win)
                assert settings["fetchNews"]["default"] == "false", settings["fetchNews"]
                time.sleep(5)  # the popup asks a few seconds after the page loads: give it the chance
                page.screenshot(path=str(ARTIFACTS / "make-lab-opened.png"))
                assert "Jupyter news" not in page.locator("body").inner_text()
            finally:
                browser.close()
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
