"""A committed notebook opened in JupyterLab 4 or Notebook 7 is not marked modified, and saving changes nothing.

The real front end, not an emulation: the kernel starts (JupyterLab copies its
``language_info`` into the notebook then), the page settles, the document must not be
dirty, and ``docmanager:save`` must write the committed bytes back. Screenshots of each
opened notebook (outputs shown from their fallbacks: a fresh clone is untrusted) go to
``test-artifacts/browser/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from chromium_check import chromium_or_skip

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ARTIFACTS = ROOT / "test-artifacts" / "browser"
TOKEN = "fusion-committed-notebooks"
KERNEL = "window.jupyterapp?.shell?.currentWidget?.sessionContext?.session?.kernel"
FRONTENDS = {
    "lab": (["-m", "jupyterlab", "--LabApp.expose_app_in_browser=True"], "/lab/tree/{}"),
    "notebook7": (["-m", "notebook", "--JupyterNotebookApp.expose_app_in_browser=True"], "/notebooks/{}"),
}


def serve_copies(frontend: str, tmp: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    """The front end's server over a copy of the notebooks, with its own settings (nothing of this user's)."""
    import socket

    root = tmp / "notebooks"
    root.mkdir()
    for path in NOTEBOOKS:
        shutil.copy(path, root / path.name)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        (tmp / name).mkdir()
        env[name] = str(tmp / name)
    command = [sys.executable, *FRONTENDS[frontend][0], "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1"]
    command += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}"]
    with (tmp / "server.log").open("w") as log:
        server = subprocess.Popen([*command, f"--ServerApp.root_dir={root}"], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2):
                return server, base, root
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError((tmp / "server.log").read_text()[-3000:]) from None
            time.sleep(0.2)


@pytest.mark.parametrize("frontend", list(FRONTENDS))
def test_opening_a_committed_notebook_marks_nothing_modified(frontend, tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = chromium_or_skip()
    server, base, root = serve_copies(frontend, tmp_path)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium,
                headless=True,
                args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
            )
            bars_seen = 0
            try:
                for path in NOTEBOOKS:
                    page = browser.new_page(viewport={"width": 1200, "height": 1600})
                    page.goto(f"{base}{FRONTENDS[frontend][1].format(path.name)}?token={TOKEN}")
                    page.wait_for_function(f"() => {KERNEL} && {KERNEL}.status === 'idle'", timeout=120_000)
                    page.evaluate(f"async () => {{ await {KERNEL}.info; }}")  # its language_info is applied then
                    page.wait_for_timeout(1500)  # and anything else the kernel's arrival changes
                    ARTIFACTS.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(ARTIFACTS / f"committed-{frontend}-{path.stem}.png"))
                    # a fresh clone is untrusted: its call views show their HTML fallback, bar included
                    bars = page.evaluate(
                        """() => Array.from(document.querySelectorAll('.jp-OutputArea-output span'))
                            .filter(e => e.style.height === '10px' && e.firstElementChild)
                            .filter(e => e.firstElementChild.style.width !== '0%')
                            .map(e => getComputedStyle(e.firstElementChild).backgroundColor)"""
                    )
                    bars_seen += len(bars)
                    assert all(colour not in ("rgba(0, 0, 0, 0)", "transparent") for colour in bars), (path, bars)
                    dirty = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
                    assert dirty is False, f"{frontend} marks {path.name} modified on opening"
                    page.evaluate("() => window.jupyterapp.shell.currentWidget.context.save()")
                    assert (root / path.name).read_text() == path.read_text(), f"{frontend} rewrites {path.name}"
                    page.close()
                assert bars_seen >= 5, f"the committed call views' progress bars: {bars_seen} drawn"
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(30)
