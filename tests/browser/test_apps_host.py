"""fusion-nb's MCP Apps views in a real host: Debian's chromium, the official ext-apps host bridge (#49).

``apps_host/host.mjs`` is a host page built on ``AppBridge`` from ``@modelcontextprotocol/ext-apps``
(pinned in tests/interop/package.json, bundled here with the rolldown those node_modules carry). It
lists the tools as an app-capable 2026 client, reads the tool's ``ui://`` resource and renders it
as a web host must: an outer sandbox proxy on another origin (``localhost`` against the page's
``127.0.0.1``), the view in an inner iframe under the CSP the resource asks for (no domains). It
passes the call's input and result, forwards the view's ``tools/call`` to the server and keeps
``ui/update-model-context``. Checked: the table draws the result's rows, pages and sorts through
the app-only tool, a picked row reaches the host as model context; a task tool's job view shows
its progress and its Stop button cancels the job (its cleanup runs); a plotly figure draws
(pixels), zooms and sends brushed points; a matplotlib figure draws (pixels) and zooms; the page
fetches nothing outside the server. Screenshots go to ``test-artifacts/browser/apps-*.png``. About
30 s, most of it chromium parsing plotly.min.js (4.8 MB, inline in the plotly view as the spec's CSP
wants it) and plotly's drag gestures.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import numpy
import pandas as pd
import pytest
from PIL import Image

from fusion_nb import Fusion, progress
from fusion_nb.mcp import http_app

HERE = Path(__file__).parent
INTEROP = HERE.parent / "interop"
sys.path.insert(0, str(HERE.parent / "mcp"))
sys.path.insert(0, str(HERE.parent))
from chromium_check import chromium_or_skip  # noqa: E402
from http_serving import serve_asgi  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.anyio, pytest.mark.asyncio_only]
ARTIFACTS = HERE.parents[1] / "test-artifacts" / "browser"
PAGE_TOOL = "fusion_nb.view.table_page"


@pytest.fixture(scope="module")
def host_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, str]]:
    """The host page, its bundled script (the official bridge inside) and the sandbox proxy."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the MCP Apps host page bundles the official bridge with it.")
    if not (INTEROP / "node_modules" / "@modelcontextprotocol" / "ext-apps").is_dir():
        pytest.fail("The pinned ext-apps package is not installed: run `make interop`.")
    bundle = tmp_path_factory.mktemp("apps_host") / "host.js"
    entry = str(HERE / "apps_host" / "host.mjs")
    subprocess.run([node, "apps_bundle.mjs", entry, str(bundle)], cwd=INTEROP, check=True)
    return {
        "index.html": ((HERE / "apps_host" / "index.html").read_bytes(), "text/html"),
        "sandbox.html": ((HERE / "apps_host" / "sandbox.html").read_bytes(), "text/html"),
        "host.js": (bundle.read_bytes(), "text/javascript"),
    }


class WithHost:
    """The MCP endpoint, plus the host's static files under ``/host/`` (same origin: no CORS)."""

    def __init__(self, mcp: Any, files: dict[str, tuple[bytes, str]]) -> None:
        self.mcp, self.files = mcp, files

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/host/"):
            body, kind = self.files.get(scope["path"][len("/host/") :], (b"not found", "text/plain"))
            status = 200 if scope["path"][len("/host/") :] in self.files else 404
            await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", kind.encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.mcp(scope, receive, send)


def views_app(cleaned: list[str]) -> Fusion:
    app = Fusion("views")

    @app.f.action("train").app().task(poll_interval=0.2).handle
    async def train(input: Any, ctx: Any) -> Any:
        try:
            yield progress(40, "epoch 2/5")
            await anyio.sleep_forever()
        finally:
            cleaned.append("train")

    sales = pd.DataFrame({"id": range(1000), "region": [f"r{n % 5}" for n in range(1000)], "score": range(1000, 0, -1)})

    @app.f.query("sales").app().handle
    async def sales_table(input: Any, ctx: Any) -> Any:
        return sales

    @app.f.query("chart").app("plotly").handle
    async def chart(input: Any, ctx: Any) -> Any:
        import plotly.graph_objects as go

        xs = list(range(40))
        return go.Figure(go.Scatter(x=xs, y=[x % 10 for x in xs], mode="markers", marker={"size": 12}))

    @app.f.query("plot").app("image").handle
    async def plot(input: Any, ctx: Any) -> Any:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3))
        ax.fill_between(range(10), [n * n for n in range(10)], color="#d62728")
        plt.close(fig)
        return fig

    return app


async def open_view(browser: Any, base: str, token: str, tool: str) -> tuple[Any, Any, list[str]]:
    """A page of the host showing ``tool``'s view; the view's frame; every URL the page requested."""
    page = await browser.new_page(viewport={"width": 960, "height": 720})
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    sandbox = base.replace("127.0.0.1", "localhost") + "/host/sandbox.html"
    started = time.perf_counter()
    await page.goto(f"{base}/host/index.html?token={token}&tool={tool}&sandbox={sandbox}")
    await page.wait_for_function("window.host && (window.host.ready || window.host.errors.length)", timeout=60_000)
    assert await page.evaluate("window.host.errors") == []
    view = page.frame_locator("#sandbox").frame_locator("iframe")
    drawn = {"sales": "tbody tr", "chart": "#chart[data-drawn=yes]", "plot": "#img img", "train": "#job"}[tool]
    await view.locator(drawn).first.wait_for()
    print(f"{tool}: first paint {(time.perf_counter() - started) * 1000:.0f} ms from the page's load")
    return page, view, requested


def outside(requested: list[str], base: str) -> list[str]:
    local = (base + "/", base.replace("127.0.0.1", "localhost") + "/", "data:", "about:")
    return [url for url in requested if not url.startswith(local)]


async def test_the_views_in_a_host_built_on_the_official_bridge(host_files: dict[str, tuple[bytes, str]]) -> None:
    from playwright.async_api import async_playwright

    cleaned: list[str] = []
    app = views_app(cleaned)
    mcp = http_app(app)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with serve_asgi(WithHost(mcp, host_files), app) as served, async_playwright() as playwright:
        base, token = served.base, str(mcp.token)
        browser = await playwright.chromium.launch(executable_path=chromium_or_skip())
        try:
            page, view, requested = await open_view(browser, base, token, "sales")
            assert PAGE_TOOL in [tool["name"] for tool in await page.evaluate("window.host.tools")]
            rows = view.locator("tbody tr")
            await rows.nth(49).wait_for()  # the page tool's first page (the result itself carried 20 rows)
            assert await view.locator("thead th").all_inner_texts() == ["id", "region", "score"]
            assert (await rows.first.locator("td").all_inner_texts()) == ["0", "r0", "1000"]
            await view.get_by_title("next page").click()
            await view.get_by_text("51\u2013100 of 1000").wait_for()
            assert (await rows.first.locator("td").all_inner_texts())[0] == "50"
            await view.locator("thead th", has_text="score").click()  # ascending score: the last id first
            await view.get_by_text("1\u201350 of 1000").wait_for()
            await view.locator("tbody td", has_text="999").first.wait_for()
            calls = await page.evaluate("window.host.calls")
            assert {call["name"] for call in calls} == {PAGE_TOOL} and len(calls) >= 3
            assert calls[-1]["arguments"]["sort"] == "score"
            await rows.nth(1).click()  # a picked row: model context for the next turn
            await page.wait_for_function("window.host.modelContext.length > 0")
            context = await page.evaluate("window.host.modelContext[0]")
            assert context["structuredContent"]["pickedRows"] == [{"id": 998, "region": "r3", "score": 2}]
            await page.screenshot(path=str(ARTIFACTS / "apps-table.png"))
            assert outside(requested, base) == []
            await page.close()

            page, view, requested = await open_view(browser, base, token, "train")
            await view.locator("#job[data-status=working]").wait_for()
            await view.get_by_text("epoch 2/5").wait_for()
            assert await view.locator("#job progress").evaluate("bar => bar.value") == 40
            await page.screenshot(path=str(ARTIFACTS / "apps-job.png"))
            await view.get_by_title("stop the job").click()
            await page.wait_for_function("window.host.result !== null")
            result = await page.evaluate("window.host.result")
            assert (
                result["isError"] is True
                and result["_meta"]["io.github.fusion-nb/view"]["job"]["status"] == "cancelled"
            )
            assert cleaned == ["train"]  # (the job's cleanup ran)
            await view.locator("#job[data-status=cancelled]").wait_for()
            calls = [call["name"] for call in await page.evaluate("window.host.calls")]
            assert set(calls) == {"fusion_nb.view.job_status", "fusion_nb.view.job_stop"}
            assert outside(requested, base) == []
            await page.close()

            page, view, requested = await open_view(browser, base, token, "chart")
            plot = view.locator("#chart[data-drawn=yes]")
            await plot.wait_for()
            assert await view.locator(".scatterlayer .point").count() == 40
            shot = numpy.asarray(Image.open(io.BytesIO(await plot.screenshot())).convert("RGB")).astype(int)
            blue = int(((shot[..., 2] > 200) & (shot[..., 0] < 140) & (shot[..., 1] < 150)).sum())
            assert blue > 40 * 20, blue  # plotly's first colour (#636efa), 40 markers of 12 px
            await page.screenshot(path=str(ARTIFACTS / "apps-plotly.png"))
            area = await view.locator(".nsewdrag").first.bounding_box()
            assert area is not None
            x0, y0 = area["x"] + area["width"] * 0.2, area["y"] + area["height"] * 0.2
            x1, y1 = area["x"] + area["width"] * 0.5, area["y"] + area["height"] * 0.8
            before = await plot.evaluate("d => d._fullLayout.xaxis.range.slice()")
            await page.mouse.move(x0, y0)
            await page.mouse.down()
            await page.mouse.move(x1, y1, steps=8)
            await page.mouse.up()  # a drag zooms (plotly's default drag mode)
            zoomed = await plot.evaluate("d => d._fullLayout.xaxis.range.slice()")
            assert zoomed[1] - zoomed[0] < (before[1] - before[0]) / 2, (before, zoomed)
            await plot.evaluate("d => Plotly.relayout(d, {dragmode: 'select', 'xaxis.autorange': true})")
            await page.mouse.move(area["x"] + 2, area["y"] + 2)
            await page.mouse.down()
            await page.mouse.move(area["x"] + area["width"] * 0.3, area["y"] + area["height"] - 2, steps=8)
            await page.mouse.up()  # brushed points: model context
            await page.wait_for_function("window.host.modelContext.length > 0")
            picked = (await page.evaluate("window.host.modelContext[0]"))["structuredContent"]["selectedPoints"]
            assert picked and all(point["x"] < 14 for point in picked), picked
            await page.screenshot(path=str(ARTIFACTS / "apps-plotly-selected.png"))
            assert outside(requested, base) == []
            await page.close()

            page, view, requested = await open_view(browser, base, token, "plot")
            image = view.locator("#img img")
            await image.wait_for()
            assert await image.evaluate("i => i.complete && i.naturalWidth") > 0
            shot = numpy.asarray(Image.open(io.BytesIO(await image.screenshot())).convert("RGB")).astype(int)
            red = int(((shot[..., 0] > 180) & (shot[..., 1] < 90) & (shot[..., 2] < 90)).sum())
            assert red > shot.shape[0] * shot.shape[1] // 20, red  # the filled area drew
            box = view.locator("#img")
            await box.hover()
            await page.mouse.wheel(0, -100)
            assert "scale(1.25)" in await image.evaluate("i => i.style.transform")
            await page.screenshot(path=str(ARTIFACTS / "apps-image.png"))
            assert outside(requested, base) == []
        finally:
            await browser.close()
