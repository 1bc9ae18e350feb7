"""The whole notebook experience in a real browser: JupyterLab 4 and Jupyter Notebook 7, Debian's chromium.

Runs a %%fusion_tool cell and a call, watches the progress bar advance, fills and
submits an inline form, and presses the toolbar's interrupt button during a long
call. Checks what a person sees, from the rendered page: the form's labels are the
field descriptions, no two visible buttons share a label, and the cancelled view's
bar is not blue (computed style). Screenshots go to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from chromium_check import chromium_or_skip
from mcp.types import TextContent

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
TOKEN = "fusion-browser-test"

CELLS = [
    "%load_ext fusion_nb\nimport anyio",
    '%%fusion_tool f.action("count").with_integer("n", "How many steps")\n"""Count slowly, reporting progress."""\n'
    "for i in range(input.n):\n    await anyio.sleep(0.4)\n"
    '    yield progress((i + 1) * 100 / input.n, f"step {i + 1} of {input.n}")\nreturn f"counted to {input.n}"',
    "print(await count(n=6))",
    '%%fusion_tool f.mutation("billing.refund").with_string("id", "Invoice ID").interactive()\n'
    'approved = read_input("confirm")\nif approved is None:\n'
    '    return require_input.elicit(f"Refund invoice {input.id}?", '
    '{"confirm": ask.boolean("Approve the refund"), "note": ask.string("Note").optional()})\n'
    'return f"refunded {input.id}: {input_response(\'note\').value}" if approved else "declined"',
    'print(await billing_refund(id="inv-7"))',
    '%%fusion_tool slow\ntry:\n    await anyio.sleep(3600)\nfinally:\n    print("slow cleaned up")',
    "await slow()",
    "%fusion inspect count",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FRONTENDS = {
    "lab": (["-m", "jupyterlab", "--LabApp.expose_app_in_browser=True"], "/lab/tree/ui.ipynb"),
    "notebook7": (["-m", "notebook", "--JupyterNotebookApp.expose_app_in_browser=True"], "/notebooks/ui.ipynb"),
}


@pytest.fixture(scope="module", params=list(FRONTENDS))
def lab(request, tmp_path_factory):
    """A Jupyter server with the chosen front end: (base URL, notebook path, front end name)."""
    command, page = FRONTENDS[request.param]
    chromium_or_skip()  # a skip with the reason on a laptop without chromium; a failure in CI
    root = tmp_path_factory.mktemp("lab")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "ui.ipynb")
    port = free_port()
    env = {**os.environ}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        env[name] = str(tmp_path_factory.mktemp(name.lower()))
    log = open(root / "lab.log", "w")  # noqa: SIM115 - the server writes to it until the fixture ends
    server = subprocess.Popen(
        [
            sys.executable,
            *command,
            "--no-browser",
            "--allow-root",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.disable_check_xsrf=False",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            log.close()
            raise RuntimeError(f"{request.param} did not start:\n" + (root / "lab.log").read_text()[-3000:])
        time.sleep(0.2)
    try:
        yield base, page, request.param
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def run_cell(page, index: int) -> None:
    # do not return the promise: it resolves only when the cell ends (forms would hang us)
    page.evaluate(f"""() => {{ const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = {index}; window.jupyterapp.commands.execute('notebook:run-cell'); return null; }}""")


KERNEL = "window.jupyterapp?.shell?.currentWidget?.sessionContext?.session?.kernel"


def wait_idle(page, timeout=60_000) -> None:
    """The kernel is idle (read from the app: both front ends expose it, their toolbars differ)."""
    page.wait_for_function(f"() => {KERNEL} && {KERNEL}.status === 'idle'", timeout=timeout)
    page.wait_for_function(
        "() => !Array.from(document.querySelectorAll('.jp-InputPrompt')).some(p => p.textContent.includes('*'))",
        timeout=timeout,
    )


def open_notebook(page, url: str) -> None:
    """Open ``url`` and wait until its notebook is shown and its kernel idle."""
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(f"() => !!{KERNEL}", timeout=60_000)
    wait_idle(page)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def outputs(page, index: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-Cell-outputArea")


def visible_button_labels(page) -> list[str]:
    """The labels of every visible button in the notebook's outputs."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell-outputArea button'))
            .filter(b => b.offsetParent !== null).map(b => b.textContent.trim()).filter(t => t)"""
    )


def rgb(css: str) -> tuple[int, int, int]:
    r, g, b = (int(float(x)) for x in re.findall(r"[0-9.]+", css)[:3])
    return r, g, b


def bluish(color: tuple[int, int, int]) -> bool:
    r, g, b = color
    return b > r + 40 and b > g + 10


def test_progress_form_and_interrupt(lab):
    from playwright.sync_api import sync_playwright

    base, path, frontend = lab
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1600})
            open_notebook(page, f"{base}{path}?token={TOKEN}")

            # define the tools
            for index in (0, 1, 3, 5):
                run_cell(page, index)
                wait_idle(page)
            assert "count" in outputs(page, 1).inner_text()

            # a call: the bar advances step by step, then the value prints (once: the view shows the status)
            run_cell(page, 2)
            bar = outputs(page, 2).locator(".widget-hprogress .progress-bar")
            bar.wait_for(timeout=30_000)
            widths = set()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                style = bar.get_attribute("style") or ""
                widths.add(re.sub(r"background[^;]*;?", "", style).strip())
                if "counted to 6" in outputs(page, 2).inner_text():
                    break
                time.sleep(0.1)
            wait_idle(page)
            shot(page, f"{frontend}-1-progress-done")
            text = outputs(page, 2).inner_text()
            assert text.count("counted to 6") == 1, text
            assert "✔ done" in text and "100%" in text
            distinct = {w for w in widths if "width" in w}
            assert len(distinct) >= 3, f"the bar should advance in steps, saw {distinct}"
            assert "width: 100%" in (bar.get_attribute("style") or "")

            # an inline form: labels are the descriptions; fill it, submit, the cell resumes
            run_cell(page, 4)
            form = outputs(page, 4)
            form.locator("button", has_text="Submit").wait_for(timeout=30_000)
            shot(page, f"{frontend}-2-form-shown")
            assert form.locator(".widget-checkbox").inner_text().strip().startswith("Approve the refund")
            assert form.locator(".widget-text .widget-label").first.inner_text().strip() == "Note (optional)"
            labels = visible_button_labels(page)
            assert len(labels) == len(set(labels)), f"two visible buttons share a label: {labels}"
            assert {"Submit", "Decline", "Dismiss", "Stop"} <= set(labels), labels
            form.locator(".widget-checkbox input[type=checkbox]").check()
            # typed as a person types, a key at a time with pauses, while the cell awaits (a paste
            # would be one update: ipywidgets' throttle once dropped every key after the first)
            form.locator(".widget-text input").click()
            page.keyboard.type("customer asked twice", delay=80)
            time.sleep(0.3)
            # the README's picture (docs/images/inline-form.png is a copy of the lab one)
            page.locator(".jp-Notebook .jp-Cell").nth(4).screenshot(path=str(ARTIFACTS / f"{frontend}-form-cell.png"))
            form.locator("button", has_text="Submit").click()
            page.wait_for_function(
                "() => document.body.innerText.includes('refunded inv-7: customer asked twice')", timeout=30_000
            )
            wait_idle(page)
            shot(page, f"{frontend}-3-form-submitted")
            answered = form.inner_text()
            assert answered.index("Refund invoice inv-7?") < answered.index("Submitted"), "question above its answer"
            assert (
                form.locator("button", has_text="Submit").count() == 0
                or not form.locator("button", has_text="Submit").is_visible()
            )

            # the toolbar's interrupt button cancels the awaited call: the view says so, not in blue
            run_cell(page, 6)
            view = outputs(page, 6)
            view.locator(".widget-hprogress").wait_for(timeout=30_000)
            page.wait_for_function("() => document.body.innerText.includes('running')", timeout=30_000)
            pressed = time.monotonic()
            interrupt = page.locator(".jp-NotebookPanel-toolbar [data-command='notebook:interrupt-kernel']")
            if interrupt.count():
                interrupt.first.click()
            else:  # pragma: no cover - a toolbar without the button: the same command
                page.evaluate("() => { window.jupyterapp.commands.execute('notebook:interrupt-kernel'); return null; }")
            view.get_by_text("cancelled").first.wait_for(timeout=5_000)
            latency = time.monotonic() - pressed
            page.wait_for_function("() => document.body.innerText.includes('slow cleaned up')", timeout=10_000)
            wait_idle(page)
            shot(page, f"{frontend}-4-interrupted")
            print(f"{frontend}: interrupt button -> call view cancelled: {latency * 1000:.0f} ms")
            assert latency < 1.0, f"the call view turned cancelled {latency:.2f} s after the click"
            error = view.locator("[data-mime-type='application/vnd.jupyter.stderr']").inner_text().strip()
            assert error == "Stopped: slow was stopped; its cleanup ran.", error
            cancelled_bar = view.locator(".widget-hprogress .progress-bar")
            colour = rgb(cancelled_bar.evaluate("e => getComputedStyle(e).backgroundColor"))
            assert not bluish(colour), f"the cancelled bar is blue: rgb{colour}"
            running_colour = rgb(bar.evaluate("e => getComputedStyle(e).backgroundColor"))
            assert running_colour != colour, "done and cancelled bars look different"

            # what an agent sees: the definition on the wire and the traffic of the calls above
            run_cell(page, 7)
            inspector = outputs(page, 7)
            inspector.get_by_text("tools/call").first.wait_for(timeout=30_000)
            wait_idle(page)
            inspector.scroll_into_view_if_needed()
            shot(page, f"{frontend}-5-inspector")
            seen = inspector.inner_text()
            assert '"inputSchema"' in seen and "count (cell) → tools/call" in seen, seen
            assert "← notifications/progress" in seen and "← result" in seen and "slow (cell)" not in seen, seen

            if frontend == "lab":  # the same page in the dark theme: colours follow the theme's variables
                light_css = cancelled_bar.evaluate("e => getComputedStyle(e).backgroundColor")
                page.evaluate(
                    "() => { window.jupyterapp.commands.execute('apputils:change-theme', "
                    "{theme: 'JupyterLab Dark'}); return null; }"
                )
                page.wait_for_function("() => document.body.dataset.jpThemeName === 'JupyterLab Dark'", timeout=30_000)
                page.wait_for_function(
                    "([e, before]) => getComputedStyle(e).backgroundColor !== before",
                    arg=[cancelled_bar.element_handle(), light_css],
                    timeout=30_000,
                )  # the cancelled bar's colour comes from the theme
                shot(page, f"{frontend}-6-dark-theme")
        finally:
            browser.close()


QUICK_CALLS = int(os.environ.get("FUSION_NB_TEST_QUICK_CALLS", "200"))
SERVING_CELLS = [
    "%load_ext fusion_nb\nimport anyio, ipywidgets",
    '%%fusion_tool f.query("shout").with_string("text", "What to shout")\n"""Upper-case a text."""\n'
    "return input.text.upper()",
    '%%fusion_tool slow\n"""Sleep until stopped."""\nawait anyio.sleep(3600)',
    "%fusion serve",
    "ipywidgets.IntSlider(value=7, description='after')",
    "%fusion inspect shout",
]


class Worker(threading.Thread):
    """A thread running ``anyio.run(work, *args)``; ``error`` holds what it raised (``join()`` it first)."""

    def __init__(self, work: Callable[..., Awaitable[object]], *args: object) -> None:
        super().__init__(daemon=True)
        self.work, self.args_ = work, args
        self.error: BaseException | None = None

    def run(self) -> None:
        import anyio

        try:
            anyio.run(self.work, *self.args_)
        except BaseException as exc:  # reported by the test through .error
            self.error = exc


def in_thread(work: Callable[..., Awaitable[object]], *args: object) -> Worker:
    """Run ``anyio.run(work, *args)`` in a thread (Playwright's sync API owns this thread's loop)."""
    thread = Worker(work, *args)
    thread.start()
    return thread


async def agents_call(url: str, token: str, quick: int) -> None:
    """What agents do to a kernel: quick calls in a loop, then a call the client gives up on."""
    import anyio

    from fusion_nb.mcp import connect

    async with connect(url, token, mode="legacy") as client:
        for i in range(quick):
            block = (await client.call_tool("shout", {"text": f"hi {i}"})).content[0]
            assert isinstance(block, TextContent) and block.text == f"HI {i}"
    # the client gives up on a call and goes: the SDK client's own teardown of a cancelled
    # request may raise (BrokenResourceError); what matters here is what the kernel is left with
    with contextlib.suppress(Exception):
        async with connect(url, token, mode="legacy") as client:
            with anyio.move_on_after(1.0):
                await client.call_tool("slow", {})


async def call_until_stopped(url: str, token: str) -> None:
    """A call a person stops from the activity panel: its client gets CANCELLED."""
    from fusion_nb.mcp import connect

    async with connect(url, token, mode="legacy") as client:
        result = await client.call_tool("slow", {})
        block = result.content[0]
        assert result.is_error and isinstance(block, TextContent) and "CANCELLED" in block.text, result


def test_a_reload_after_serving_restores_every_widget(lab, tmp_path):
    """Issue 21: after serving agents, a reload left every widget of the kernel at "Loading widget..."."""
    from playwright.sync_api import sync_playwright

    base, path, frontend = lab
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in SERVING_CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    served_page = path.replace("ui.ipynb", "served.ipynb")
    body = nbformat.writes(nb)
    request = urllib.request.Request(
        f"{base}/api/contents/served.ipynb?token={TOKEN}",
        data=json.dumps({"type": "notebook", "format": "json", "content": json.loads(body)}).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1400})
            # reset: JupyterLab would restore the earlier test's notebook as a second tab (its cells too)
            page.goto(f"{base}{served_page}?token={TOKEN}&reset")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_function(f"() => !!{KERNEL}", timeout=60_000)
            wait_idle(page)
            for index in range(len(SERVING_CELLS) - 1):
                run_cell(page, index)
                wait_idle(page)
            outputs(page, 3).get_by_text("Bearer token:").first.wait_for(timeout=30_000)  # rendered, not only run
            printed = outputs(page, 3).inner_text()
            url = re.search(r"MCP endpoint: (\S+)", printed).group(1)
            token = re.search(r"Bearer token: (\S+)", printed).group(1)
            agents = in_thread(agents_call, url, token, QUICK_CALLS)
            agents.join(120)
            assert not agents.is_alive() and agents.error is None, agents.error
            stopped = in_thread(call_until_stopped, url, token)
            stop = outputs(page, 3).locator("button:visible", has_text="Stop")
            stop.first.wait_for(timeout=30_000)
            stop.first.click()
            stopped.join(30)
            assert not stopped.is_alive() and stopped.error is None, stopped.error
            run_cell(page, len(SERVING_CELLS) - 1)  # what the agents' traffic looked like
            outputs(page, len(SERVING_CELLS) - 1).get_by_text("tools/call").first.wait_for(timeout=30_000)
            wait_idle(page)
            shot(page, f"{frontend}-7-served")
            console: list[str] = []
            page.on("console", lambda message: console.append(f"{message.type}: {message.text}"[:300]))
            save(page)  # as a person does (or autosave): the outputs, and with them the widget views, come back
            reloaded = time.monotonic()
            page.reload()
            try:
                page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
                page.wait_for_function(f"() => !!{KERNEL}", timeout=60_000)
                page.locator(".widget-slider").first.wait_for(timeout=60_000)
                page.locator("button", has_text="Run shout").first.wait_for(timeout=60_000)
                page.wait_for_function("() => !document.body.innerText.includes('Loading widget')", timeout=60_000)
            except Exception:
                shot(page, f"{frontend}-8-reload-failed")
                errors = [line for line in console if not line.startswith(("debug", "log", "info"))]
                raise AssertionError("widgets not restored; browser console:\n" + "\n".join(errors[-20:])) from None
            restored = time.monotonic() - reloaded
            shot(page, f"{frontend}-8-reloaded")
            print(f"{frontend}: every widget restored {restored:.1f} s after the reload")
            assert "after" in outputs(page, 4).inner_text()
            assert "tools/call" in outputs(page, 5).inner_text(), "the inspector came back too"
        finally:
            browser.close()


def save(page) -> None:
    """Save the notebook and wait until it is clean (both front ends expose the same command)."""
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)


def launch(pw):
    """Debian's chromium, headless, with the flags this machine's closed network needs."""
    return pw.chromium.launch(
        executable_path=chromium_or_skip(),
        headless=True,
        args=[
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    )


FORM_CELLS = [
    "%load_ext fusion_nb",
    '%%fusion_tool f.action("onboard")\nseats = read_input("seats")\nif seats is None:\n'
    '    return require_input.elicit("How many seats?", {"seats": ask.integer("Seats").min(1).max(50).default(1)})\n'
    'return f"onboarded {seats} seat(s)"',
    "print(await onboard())",
]


def put_notebook(base: str, name: str, cells: list[str]) -> None:
    """Write a notebook of ``cells`` through the server's contents API (the fixture's root is its own)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    request = urllib.request.Request(
        f"{base}/api/contents/{name}?token={TOKEN}",
        data=json.dumps({"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))}).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()


@contextlib.contextmanager
def form_in_browser(lab, name: str, cells: list[str]) -> Iterator[tuple[Any, Any]]:
    """A browser page on notebook ``name`` whose call shows its form: ``(page, form)``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1200})
            yield page, open_form(page, lab, name, cells)
        finally:
            browser.close()


def open_form(page, lab, name: str, cells: list[str]):
    """Open notebook ``name`` of ``cells`` (load, define, call), run them, and return the call's form output."""
    base, path, _frontend = lab
    put_notebook(base, name, cells)
    page.goto(f"{base}{path.replace('ui.ipynb', name)}?token={TOKEN}&reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(f"() => !!{KERNEL}", timeout=60_000)
    wait_idle(page)
    for index in (0, 1):
        run_cell(page, index)
        wait_idle(page)
    run_cell(page, 2)
    form = outputs(page, 2)
    form.locator("button", has_text="Submit").wait_for(timeout=30_000)
    return form


def test_the_first_submit_after_a_validation_error_submits(lab):
    """Issue 43: seats 99, Submit (error line), fix to 4, Submit: the error line left, the buttons jumped
    up under the pointer between press and release, and that first click was lost."""
    frontend = lab[2]
    with form_in_browser(lab, "form.ipynb", FORM_CELLS) as (page, form):
        submit = form.locator("button", has_text="Submit")
        seats = form.locator(".widget-text input").first
        seats.click()
        seats.press("Control+a")
        seats.press_sequentially("99", delay=120)  # real key presses, a person's pace
        time.sleep(0.3)
        submit.click()
        form.get_by_text("expected at most 50").wait_for(timeout=15_000)
        shot(page, f"{frontend}-form-validation-error")
        seats.click()
        seats.press("Control+a")
        seats.press_sequentially("4", delay=120)
        time.sleep(0.5)  # a person looks at the form before clicking
        box = submit.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=5)
        page.mouse.down()
        time.sleep(0.15)  # a person's click lasts this long; the field's value syncs on the press (blur)
        page.mouse.up()
        form.get_by_text("onboarded 4 seat(s)").wait_for(timeout=15_000)  # one click was enough
        wait_idle(page)
        shot(page, f"{frontend}-form-submitted-first-click")


CHOICE_CELLS = [
    "%load_ext fusion_nb",
    '%%fusion_tool f.action("order")\nif read_input("toppings") is None:\n'
    '    return require_input.elicit("Your order?", {"size": ask.enum({"s": "Small", "l": "Large"}, "Size"),'
    ' "toppings": ask.choices({"c": "Cheese", "h": "Ham", "o": "Olives"}, "Toppings").min(1).max(2)})\n'
    "return f\"size {read_input('size')} with {read_input('toppings')}\"",
    "print(await order())",
]


def test_choices_are_ticked_by_their_labels_and_a_dropdown_shows_titles(lab):
    """SEP-1330 choices in the inline form: a checkbox per label, the bound said as ticked, a titled dropdown."""
    frontend = lab[2]
    with form_in_browser(lab, "choices.ipynb", CHOICE_CELLS) as (page, form):
        assert form.get_by_text("Toppings (pick 1 to 2)").is_visible()
        form.locator("select").select_option(label="Large")
        for label in ("Cheese", "Ham", "Olives"):
            form.get_by_label(label).click()
            time.sleep(0.2)  # a person's pace
        form.get_by_text("expected at most 2 picks, got 3").wait_for(timeout=15_000)
        shot(page, f"{frontend}-choices-too-many")
        form.get_by_label("Ham").click()
        time.sleep(0.3)
        form.locator("button", has_text="Submit").click()
        form.get_by_text("size l with ['c', 'o']").wait_for(timeout=15_000)
        wait_idle(page)
        shot(page, f"{frontend}-choices-submitted")


RELOAD_CELLS = [CELLS[0], CELLS[3], CELLS[4]]


def reload_page(page) -> None:
    """Reload as a person does (F5) and wait until the notebook and its kernel are back."""
    page.reload()
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(f"() => !!{KERNEL}", timeout=60_000)


def answer(page, form, note: str) -> None:
    """Approve the visible refund form, typing the note a key at a time, and click Submit."""
    form.locator(".widget-checkbox input[type=checkbox]:visible").first.check()
    form.locator(".widget-text input:visible").first.click()
    page.keyboard.type(note, delay=60)
    time.sleep(0.3)
    form.locator("button:visible", has_text="Submit").first.click()


def test_a_reload_during_a_form_never_strands_the_call(lab):
    """Issue 43: a reload while a form waited left the call waiting in the kernel and every re-run at [*]."""
    from playwright.sync_api import sync_playwright

    frontend = lab[2]
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1400})
            for saved in (True, False):
                name = f"reload-{'saved' if saved else 'unsaved'}.ipynb"
                open_form(page, lab, name, RELOAD_CELLS)
                if saved:
                    save(page)
                reload_page(page)
                wait_idle(page)  # the cell let go of the call as the page loaded: nothing holds the kernel
                form = outputs(page, 2)
                if saved:  # the view comes back from the kernel's live models, its form answerable
                    form.locator("button:visible", has_text="Submit").wait_for(timeout=30_000)
                    shot(page, f"{frontend}-reload-saved-form-back")
                    answer(page, form, "after reload")
                    form.get_by_text("✔ done").first.wait_for(timeout=30_000)
                    assert "Submitted" in form.inner_text()
                else:
                    shot(page, f"{frontend}-reload-unsaved-empty")
                # a re-run: never stranded (an unsaved page lost the form: the re-run shows it)
                run_cell(page, 2)
                if not saved:
                    form.get_by_text("waiting for billing.refund (inv-7), which waits for an answer").wait_for(
                        timeout=30_000
                    )
                    assert form.locator("button:visible", has_text="Stop billing.refund").count() == 1
                    shot(page, f"{frontend}-reload-unsaved-rerun-shows-the-call-ahead")
                    answer(page, form, "the first one")
                    # the call ahead is done: its line and form leave the re-run's view, which asks its own
                    form.get_by_text("waiting for billing.refund").wait_for(state="detached", timeout=30_000)
                form.locator("button:visible", has_text="Submit").first.wait_for(timeout=30_000)
                answer(page, form, "the re-run")
                page.wait_for_function(
                    "() => document.body.innerText.includes('refunded inv-7: the re-run')", timeout=30_000
                )
                wait_idle(page)
                shot(page, f"{frontend}-reload-{'saved' if saved else 'unsaved'}-rerun-done")
        finally:
            browser.close()
