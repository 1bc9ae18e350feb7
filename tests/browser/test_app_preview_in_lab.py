"""The notebook preview of an ``.app()`` tool in JupyterLab and Debian's chromium (#49 item 4).

A cell runs ``await sales_table.preview(rows=200)``: its output is the table view's own ``ui://``
HTML in a sandboxed iframe under fusion-nb's anywidget bridge. The view draws the first rows, and
the next-page button pages through the app-only page tool on the kernel (the rows change); a picked row reaches the
widget's ``model_context`` on the kernel. The
screenshot goes to ``test-artifacts/browser/lab-app-preview-*.png``. JupyterLab only: Notebook 7
renders the same widget through the same labextension.
"""

from __future__ import annotations

import time

import pytest
from test_activity_panel import put_notebook
from test_frontends import TOKEN, lab, launch, open_notebook, outputs, run_cell, shot, wait_idle

pytestmark = pytest.mark.browser
__all__ = ["lab"]  # the fixture, shared with test_frontends

CELLS = [
    "%load_ext fusion_nb\nimport pandas as pd",
    '%%fusion_tool f.query("sales.table").with_integer("rows", "How many rows", default=200).app()\n'
    '"""Daily sales."""\n'
    "return pd.DataFrame({'day': range(input.rows), 'total': [d * 3 for d in range(input.rows)]})",
    "(shown := await sales_table.preview(rows=200))",
    "print(shown.widget.model_context.get('structuredContent'))",
]
PREVIEW = 2


@pytest.mark.parametrize("lab", ["lab"], indirect=True)
def test_the_table_preview_draws_and_pages_through_the_kernel(lab):
    from playwright.sync_api import sync_playwright

    base, path, frontend = lab
    put_notebook(base, "preview.ipynb", CELLS)
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1100})
            open_notebook(page, f"{base}{path.replace('ui.ipynb', 'preview.ipynb')}?token={TOKEN}")
            for index in range(PREVIEW + 1):
                run_cell(page, index)
                wait_idle(page)
            started = time.monotonic()
            out = outputs(page, PREVIEW)
            out.locator("iframe.fusion-nb-app-preview").wait_for(timeout=30_000)
            view = out.frame_locator("iframe.fusion-nb-app-preview")
            view.get_by_text("1\u201350 of 200").wait_for(timeout=30_000)
            print(f"{frontend}: cell done -> first page drawn: {(time.monotonic() - started) * 1000:.0f} ms")
            assert view.locator("tbody tr").first.locator("td").first.inner_text() == "0"
            out.scroll_into_view_if_needed()
            shot(page, f"{frontend}-app-preview-1-first-page")
            view.locator("button[title='next page']").click()
            view.get_by_text("51\u2013100 of 200").wait_for(timeout=30_000)
            first = view.locator("tbody tr").first.locator("td")
            assert [first.nth(0).inner_text(), first.nth(1).inner_text()] == ["50", "150"]
            view.locator("tbody tr").nth(2).click()  # a picked row: the view's model context, on the kernel
            view.locator("tbody tr.picked").wait_for(timeout=30_000)
            shot(page, f"{frontend}-app-preview-2-next-page")
            run_cell(page, PREVIEW + 1)
            wait_idle(page)
            printed = outputs(page, PREVIEW + 1).inner_text()
            assert "'pickedRows': [{'day': 52, 'total': 156}]" in printed, printed
        finally:
            browser.close()
