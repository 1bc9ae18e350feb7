"""The activity panel of ``%fusion serve`` in a real browser, with calls from an external client.

Quick calls show only in the summary line; a long call gets a live row whose Stop
button cancels it (the client receives CANCELLED); a failed call's error is readable in
full under *recent*. The notebook is added to the server the ``lab`` fixture of
``test_frontends`` starts (JupyterLab and Notebook 7), through the contents API.
Screenshots go to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from typing import Any

import httpx
import nbformat
import pytest
from test_frontends import TOKEN, lab, launch, open_notebook, outputs, run_cell, shot, wait_idle

pytestmark = pytest.mark.browser
__all__ = ["lab"]  # the fixture, shared with test_frontends

CELLS = [
    "%load_ext fusion_nb\nimport anyio",
    '%%fusion_tool f.query("math.add").with_number("a").with_number("b")\n"""Add two numbers."""\n'
    "return input.a + input.b",
    '%%fusion_tool f.action("report.build").with_string("quarter", "Quarter")\n"""A long report."""\n'
    'for i in range(3600):\n    yield progress(i / 36, f"section {i + 1}")\n    await anyio.sleep(0.5)',
    '%%fusion_tool f.action("fragile")\n"""Always fails."""\nraise ValueError("the flux capacitor is out of flux")',
    "%fusion serve",
]
SERVE = 4
MODERN = "2026-07-28"


def put_notebook(base: str, name: str, cells: list[str] = CELLS) -> None:
    """Add a notebook of ``cells`` (the panel's by default) to the running server (its contents API)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    body = json.dumps({"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))}).encode()
    url = f"{base}/api/contents/{name}?token={TOKEN}"
    request = urllib.request.Request(url, data=body, method="PUT", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status in (200, 201)


def rpc(url: str, token: str, method: str, params: dict, number: int, timeout: float = 30, **capabilities) -> dict:
    """One 2026-era request as an external agent sends it (``capabilities``: its client capabilities); the result."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "browser-test-agent", "version": "0"},
    }
    body = {"jsonrpc": "2.0", "id": number, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    response = httpx.post(url, json=body, headers=headers, timeout=timeout)
    assert response.status_code == 200, response.text
    text = response.text
    if text.startswith("{"):
        answer = json.loads(text)
    else:
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        answer = json.loads(data[-1])
    assert "result" in answer, answer
    return answer["result"]


def call(url: str, token: str, tool: str, arguments: dict, number: int, timeout: float = 30) -> dict:
    """One 2026-era ``tools/call`` as an external agent sends it; the JSON-RPC result."""
    return rpc(url, token, "tools/call", {"name": tool, "arguments": arguments}, number, timeout)


def open_and_serve(page, page_url: str, name: str, serve: int) -> tuple[Any, str, str]:
    """Open notebook ``name`` (``page_url`` is the fixture's, for ``ui.ipynb``) and run its cells
    through ``serve``, the ``%fusion serve`` cell: that cell's output, the MCP URL and the token it printed."""
    open_notebook(page, f"{page_url.replace('ui.ipynb', name)}?token={TOKEN}")
    for index in range(serve + 1):
        run_cell(page, index)
        wait_idle(page)
    served = outputs(page, serve)
    printed = served.inner_text()
    url = re.search(r"MCP endpoint: (\S+)", printed)
    token = re.search(r"Bearer token: (\S+)", printed)
    assert url is not None and token is not None, printed
    return served, url.group(1), token.group(1)


def test_the_panel_counts_quick_calls_and_stops_a_long_one(lab):
    from playwright.sync_api import sync_playwright

    base, path, frontend = lab
    put_notebook(base, "panel.ipynb")
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1400})
            served, url, token = open_and_serve(page, f"{base}{path}", "panel.ipynb", SERVE)

            for number in range(40):  # an agent's quick calls: only the summary counts them
                assert call(url, token, "math.add", {"a": number, "b": 1}, number)["structuredContent"]
            failed = call(url, token, "fragile", {}, 99)
            assert failed["isError"] and "ValueError" in failed["content"][0]["text"]
            served.get_by_text("41 calls in the last minute, 1 failed").wait_for(timeout=30_000)
            assert served.locator("button", has_text="Stop").count() == 0, "quick calls get no live row"

            answer: dict = {}

            def long_call() -> None:
                answer.update(call(url, token, "report.build", {"quarter": "2026Q3"}, 100, timeout=120))

            agent = threading.Thread(target=long_call)
            agent.start()
            stop = served.locator("button", has_text="Stop")
            stop.wait_for(timeout=30_000)  # after the panel's delay (1 s), a live row
            served.get_by_text("section 4").wait_for(timeout=30_000)  # and it moves
            served.scroll_into_view_if_needed()
            shot(page, f"{frontend}-panel-1-live-row")
            row = served.inner_text()
            assert "report.build" in row and "2026Q3" in row and "browser-test-agent 0" in row, "the client by name"
            assert "1 live" in row, row
            started = time.monotonic()
            stop.click()
            agent.join(30)
            assert not agent.is_alive(), "the agent's call did not end after Stop"
            print(f"{frontend}: Stop -> the client's answer: {(time.monotonic() - started) * 1000:.0f} ms")
            assert answer["isError"] and "CANCELLED" in answer["content"][0]["text"], answer
            served.get_by_text("42 calls in the last minute, 1 failed, 1 cancelled").wait_for(timeout=30_000)
            assert served.locator("button", has_text="Stop").count() == 0, "the finished row's widgets are gone"
            panel = served.locator(".fusion-activity")  # the panel (the log's lines are outside it)
            panel.locator("summary", has_text="fragile").click()  # a failed call's error, in full
            panel.locator("summary", has_text="traceback").click()  # and the tool's own traceback
            panel.get_by_text("the flux capacitor is out of flux").first.wait_for(timeout=10_000)
            served.scroll_into_view_if_needed()
            shot(page, f"{frontend}-panel-2-stopped-and-recent")
            logged = served.locator("[data-mime-type='application/vnd.jupyter.stderr']")
            log_text = logged.first.inner_text() if logged.count() else ""
            assert "Traceback" not in log_text and "tool fragile" in log_text, "the cell's log is one line an error"
            recent = panel.inner_text()
            assert "report.build" in recent and "cancelled" in recent, recent
            assert 'Tool "fragile" failed with ValueError' in recent and 'raise ValueError("the flux' in recent, recent
            assert "_runner.py" not in recent, "the folded traceback starts at the tool's own code"
        finally:
            browser.close()
