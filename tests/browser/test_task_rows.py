"""Agent-started tasks and image results in the activity panel, in a real browser.

An external agent (raw HTTP, 2026 era, the tasks extension declared) starts a task
tool twice: the first it watches in the panel's live row (tool, "task" in the origin,
progress moving) and a person stops with the row's Stop button (the agent's next
``tasks/get`` says ``cancelled``); the second runs to ``completed`` and the agent
collects its result. ``%fusion tasks`` then lists both. A plotting tool's image reaches
the agent as an image block, and the panel's recent row and the cell's call view draw
it at a bounded size. JupyterLab and Notebook 7 (the ``lab`` fixture of
``test_frontends``); screenshots go to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import base64
import re
import threading
import time

import pytest
from test_activity_panel import call, open_and_serve, put_notebook, rpc
from test_frontends import ARTIFACTS, lab, launch, outputs, run_cell, shot, wait_idle

pytestmark = pytest.mark.browser
__all__ = ["lab"]  # the fixture, shared with test_frontends

EXTENSION = "io.modelcontextprotocol/tasks"
CELLS = [
    "%load_ext fusion_nb\nimport anyio",
    '%%fusion_tool f.action("train").with_integer("epochs", "How many epochs").task(poll_interval=0.2)\n'
    '"""Train for a number of epochs."""\n'
    "for n in range(input.epochs):\n    await anyio.sleep(0.4)\n"
    '    yield progress(100 * (n + 1) / input.epochs, f"epoch {n + 1}/{input.epochs}")\n'
    'return f"trained {input.epochs} epochs"',
    '%%fusion_tool f.query("plot.sine").with_number("cycles", "How many periods", default=2)\n'
    '"""Plot a sine wave (slowly: a second and a half, so the panel gives it a row)."""\n'
    "import matplotlib.pyplot as plt\nimport numpy as np\n"
    "await anyio.sleep(1.5)\n"
    "x = np.linspace(0, input.cycles * 2 * np.pi, 400)\nfig, ax = plt.subplots(figsize=(6, 3))\n"
    'ax.plot(x, np.sin(x))\nax.set_title(f"{input.cycles:g} cycles")\nplt.close(fig)\nreturn fig',
    "%fusion serve",
    "%fusion tasks",
    "await plot_sine(cycles=3)",
]
SERVE, TASKS, PLOT = 3, 4, 5
FINAL = {"completed", "failed", "cancelled"}


def shots(page, part, name: str) -> None:
    """The page (``shot``) and, close up, the part a person reads (``-part``): Lab scrolls inside the page."""
    part.scroll_into_view_if_needed()
    shot(page, name)
    part.screenshot(path=str(ARTIFACTS / f"{name}-part.png"))


def no_news(page) -> None:
    """Answer JupyterLab's "official Jupyter news?" toast, which covers the panel's corner."""
    toast = page.locator(".jp-Notification-Toast-Close, .Toastify__close-button")
    if toast.count():
        toast.first.click()


class Agent:
    """An external agent that starts a task and polls ``tasks/get`` every half second until it ends."""

    def __init__(self, url: str, token: str, epochs: int, number: int) -> None:
        self.url, self.token, self.number = url, token, number
        started = rpc(
            url,
            token,
            "tools/call",
            {"name": "train", "arguments": {"epochs": epochs}},
            number,
            **{"extensions": {EXTENSION: {}}},
        )
        assert started.get("resultType") == "task", started
        self.task_id = started.get("taskId") or started["task"]["taskId"]
        self.seen: list[str] = []
        self.last: dict = {}
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            self.number += 1
            self.last = rpc(  # (SEP-2663: each tasks/* request declares the extension)
                self.url, self.token, "tasks/get", {"taskId": self.task_id}, self.number, extensions={EXTENSION: {}}
            )
            status = self.last["status"]
            if not self.seen or self.seen[-1] != status:
                self.seen.append(status)
            if status in FINAL:
                return
            time.sleep(0.5)  # the agent's own pace, not a wait on the page

    def ended(self, timeout: float = 60) -> dict:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the task did not end: {self.seen}"
        return self.last


def test_task_rows_stop_and_images_in_the_panel(lab):
    from playwright.sync_api import sync_playwright

    base, path, frontend = lab
    put_notebook(base, "tasks.ipynb", CELLS)
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1400})
            served, url, token = open_and_serve(page, f"{base}{path}", "tasks.ipynb", SERVE)
            panel = served.locator(".fusion-activity")

            # a long task: its live row shows the tool, that a client's task runs it, and progress moving
            stopped = Agent(url, token, 1000, 100)
            stop = panel.locator("button", has_text="Stop")
            stop.wait_for(timeout=30_000)
            panel.get_by_text(re.compile(r"epoch [3-9]/1000")).first.wait_for(timeout=30_000)
            no_news(page)
            shots(page, panel, f"{frontend}-tasks-1-live-task-row")
            row = panel.inner_text()
            assert "train" in row and "task for browser-test-agent 0" in row and '{"epochs":1000}' in row, row
            assert "1 live" in row, row
            assert stopped.seen[0] == "working", stopped.seen

            # a person stops it: the agent's next tasks/get says cancelled
            stop.click()
            assert stopped.ended()["status"] == "cancelled", stopped.seen
            panel.locator("button", has_text="Stop").wait_for(state="detached", timeout=30_000)
            panel.locator("summary", has_text="cancelled").first.wait_for(timeout=30_000)
            shots(page, panel, f"{frontend}-tasks-2-stopped")

            # a short task runs to its end; the agent collects its result from tasks/get
            finished = Agent(url, token, 6, 200)
            last = finished.ended()
            assert last["status"] == "completed", finished.seen
            assert last["result"]["content"][0]["text"] == "trained 6 epochs", last
            panel.locator("summary", has_text='{"epochs":6}').wait_for(timeout=30_000)

            # a plot: the agent gets an image block; the panel's recent row draws it
            answer = call(url, token, "plot.sine", {"cycles": 3}, 300)
            image = answer["content"][0]
            assert image["type"] == "image" and image["mimeType"] == "image/png", answer
            assert base64.b64decode(image["data"]).startswith(b"\x89PNG"), "a PNG that decodes"
            plot_row = panel.locator("summary", has_text="plot.sine")
            plot_row.wait_for(timeout=30_000)
            plot_row.click()
            drawn = panel.locator("details", has=page.locator("summary", has_text="plot.sine")).locator("img")
            drawn.wait_for(timeout=10_000)
            shots(page, panel, f"{frontend}-tasks-3-recent-image")
            box = drawn.bounding_box()
            assert box is not None and 100 < box["width"] <= 800 and 50 < box["height"] <= 400, box
            shown = panel.inner_text()
            assert "image/png · 600x300 px" in shown, "the image is captioned with what the agent received"
            assert "base64" not in shown and "[image/png" not in shown, "not spelled out above it"

            # %fusion tasks lists both, with the tool, owner, status, age and last message
            run_cell(page, TASKS)
            wait_idle(page)
            listed = outputs(page, TASKS)
            listed.locator("table").wait_for(timeout=30_000)
            shots(page, listed, f"{frontend}-tasks-4-fusion-tasks")
            table = listed.locator("table")
            headings = [h.strip() for h in table.locator("th").all_inner_texts()]
            assert headings[:6] == ["task", "tool", "owner", "status", "age", "last message"], headings
            rows = [r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all()]
            assert len(rows) == 2, rows
            by_status = {r[3]: r for r in rows}
            assert set(by_status) == {"cancelled", "completed"}, rows
            for row in rows:  # the single token's owner named as the person knows it, the age in words
                assert row[1] == "train" and row[2] == "the server's token", rows
                assert re.fullmatch(r"\d+ s|\d+ min \d+ s", row[4]), rows
            assert by_status["completed"][5] == "epoch 6/6", rows

            # the cell's own call view shows the same figure
            run_cell(page, PLOT)
            wait_idle(page)
            in_cell = outputs(page, PLOT).locator("img")
            in_cell.first.wait_for(timeout=30_000)
            shots(page, outputs(page, PLOT), f"{frontend}-tasks-5-cell-image")
            assert in_cell.count() == 1, "the figure is the cell's Out[n], drawn once (not again in the call view)"
            box = in_cell.first.bounding_box()
            assert box is not None and 100 < box["width"] <= 800 and 50 < box["height"] <= 400, box
        finally:
            browser.close()
