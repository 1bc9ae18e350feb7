"""An ``.app()`` tool previewed in a real kernel: the view's own HTML in a widget, a fallback beside it (#49).

The cell's output bundle carries the widget (the ``ui://`` view's HTML, the tool and the result
with the view's ``_meta``) and, for nbconvert and saved notebooks, the result's Markdown; the
view's ``tools/call`` (here sent as the front end's bridge sends it) pages the table through the
app-only page tool on the kernel, never the whole frame.
"""

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.kernel, pytest.mark.asyncio_only]

TABLE = (
    '%%fusion_tool f.query("sales.table").with_integer("rows", "How many rows", default=1000).app()\n'
    '"""Daily sales."""\n'
    "import pandas as pd\n"
    "return pd.DataFrame({'day': range(input.rows), 'total': [d * 3 for d in range(input.rows)]})"
)


def custom_replies(kernel, comm_id):
    return [
        m["content"]["data"]["content"]
        for m in kernel.iopub
        if m["msg_type"] == "comm_msg"
        and m["content"]["comm_id"] == comm_id
        and m["content"]["data"].get("method") == "custom"
    ]


async def test_a_preview_carries_the_view_and_a_fallback_and_pages_on_the_kernel(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(TABLE)
    ran = await kernel.run("await sales_table.preview(rows=120)")
    [out] = [m["content"]["data"] for m in ran.messages if m["msg_type"] == "execute_result"]
    assert "application/vnd.jupyter.widget-view+json" in out, sorted(out)
    assert "| day" in out["text/markdown"] and "| day" in out["text/plain"], out["text/markdown"][:200]
    comm_id = out["application/vnd.jupyter.widget-view+json"]["model_id"]
    state = kernel.widgets[comm_id]
    assert state["html"].startswith("<!doctype html>") and 'const VIEW = "auto"' in state["html"]
    assert state["tool"]["_meta"]["ui"]["resourceUri"] == "ui://fusion-nb/auto.html"
    view = state["result"]["_meta"]["io.github.fusion-nb/view"]
    assert view["view"] == "table" and view["totalRows"] == 120 and state["input"] == {"rows": 120}

    page = {"handle": view["handle"], "offset": 50, "limit": 50}
    kernel.send_comm(comm_id, {"method": "custom", "content": {"n": 1, "name": view["pageTool"], "arguments": page}})
    await kernel.wait_until(lambda: custom_replies(kernel, comm_id), 30, "the page tool's answer")
    [reply] = custom_replies(kernel, comm_id)
    rows = reply["result"]["structuredContent"]["rows"]
    assert reply["n"] == 1 and rows[0] == [50, 150] and len(rows) == 50

    bad = {"handle": "not-a-handle"}  # what the view may reach: only what the tool returned
    kernel.send_comm(comm_id, {"method": "custom", "content": {"n": 2, "name": view["pageTool"], "arguments": bad}})
    await kernel.wait_until(lambda: len(custom_replies(kernel, comm_id)) == 2, 30, "the refusal")
    refused = custom_replies(kernel, comm_id)[1]["result"]
    assert refused["isError"] and "No result 'not-a-handle'" in refused["content"][0]["text"], refused


async def test_a_tool_without_a_view_is_refused_in_one_line(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run('%%fusion_tool plain\n"""No view."""\nreturn 1')
    ran = await kernel.run("await plain.preview()", ok=False)
    assert "has no MCP Apps view" in str(ran.error), ran.error


DECORATED = """
import fusion_nb, pandas as pd
from fusion_nb.notebook import preview

@fusion_nb.default_app.f.query("sales.small").app().handle
def sales_small(input, ctx):
    \"\"\"Three rows.\"\"\"
    return pd.DataFrame({"day": [0, 1, 2]})
"""


async def test_a_decorator_tool_previews_through_the_same_view(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(DECORATED)
    ran = await kernel.run("await preview(sales_small)")
    [out] = [m["content"]["data"] for m in ran.messages if m["msg_type"] == "execute_result"]
    state = kernel.widgets[out["application/vnd.jupyter.widget-view+json"]["model_id"]]
    assert state["result"]["_meta"]["io.github.fusion-nb/view"]["totalRows"] == 3 and "| day" in out["text/markdown"]


PLOT = (
    '%%fusion_tool f.query("plot").app("image")\n'
    '"""A matplotlib figure."""\n'
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "fig, ax = plt.subplots(figsize=(3, 2))\nax.plot([0, 1], [0, 1])\nplt.close(fig)\nreturn fig"
)


async def test_a_figure_preview_keeps_its_png_as_the_fallback(kernel):
    await kernel.run("%load_ext fusion_nb")
    await kernel.run(PLOT)
    ran = await kernel.run("await plot.preview()")
    [out] = [m["content"]["data"] for m in ran.messages if m["msg_type"] == "execute_result"]
    assert "application/vnd.jupyter.widget-view+json" in out and out["image/png"].startswith("iVBORw0KGgo"), sorted(out)
    state = kernel.widgets[out["application/vnd.jupyter.widget-view+json"]["model_id"]]
    assert 'const VIEW = "image"' in state["html"] and state["result"]["content"][0]["type"] == "image"
