"""MCP Apps (``io.modelcontextprotocol/ui``) through the SDK's real client, every era (#49).

A client that declares the extension sees ``_meta.ui.resourceUri`` on ``.app()`` tools, the
app-only page tool, the ``ui://`` views (listed, readable as ``text/html;profile=mcp-app``, no
network in them) and a result ``_meta`` telling the view what to draw. A client that does not
gets exactly what it got before ``.app()``: the same list entries and the same content, and
an app-only tool it calls is refused in one sentence. The page tool validates its input as
any tool does, reaches only the values tools returned to the same caller, and pages a
1,000,000-row frame without ever sending it whole.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pandas as pd
import plotly
import plotly.graph_objects as go
import pytest
from eras import ERAS, client_for
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from fusion_nb import Fusion, progress
from fusion_nb.mcp import mcp_server
from fusion_nb.mcp.apps import PAGE_TOOL, STATUS_TOOL, STOP_TOOL, VIEW_META

pytestmark = pytest.mark.anyio
APPS = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})
ROWS = 1_000_000


def frame(rows: int = 30) -> pd.DataFrame:
    return pd.DataFrame({"id": range(rows), "name": [f"row {n % 7}" for n in range(rows)], "score": range(rows, 0, -1)})


def apps_app(rows: int = 30) -> Fusion:
    """Two tools answering the same table, one with ``.app()``; an app-only tool of the author's own."""
    app = Fusion("apps")
    table = frame(rows)

    @app.f.query("plain").handle
    async def plain(input: Any, ctx: Any) -> Any:
        return table

    @app.f.query("shown").app().handle
    async def shown(input: Any, ctx: Any) -> Any:
        return table

    @app.f.query("chart").app("plotly").handle
    async def chart(input: Any, ctx: Any) -> Any:
        return go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2], mode="markers"))

    @app.f.query("chart_plain").handle
    async def chart_plain(input: Any, ctx: Any) -> Any:
        return go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2], mode="markers"))

    @app.f.action("refresh").app(visibility=["app"]).handle
    async def refresh(input: Any, ctx: Any) -> str:
        return "refreshed"

    return app


def wire(model: Any) -> dict[str, Any]:
    """The result as the wire has it, less the 2026 server stamp (the same on every result)."""
    dumped = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    meta = dumped.pop("_meta", {})
    meta.pop("io.modelcontextprotocol/serverInfo", None)
    return dumped | ({"_meta": meta} if meta else {})


def listed(tools: Any) -> dict[str, dict[str, Any]]:
    return {tool.name: wire(tool) for tool in tools.tools}


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_without_apps_gets_exactly_what_it_got_before(era: str) -> None:
    app = apps_app()
    async with client_for(mcp_server(app), era) as client:
        tools = listed(await client.list_tools())
        assert set(tools) == {"plain", "shown", "chart", "chart_plain"}  # (no app-only tool, no page tool)
        assert tools["shown"] | {"name": "plain"} == tools["plain"]  # (no _meta.ui either)
        plain, shown = [wire(await client.call_tool(name, {})) for name in ("plain", "shown")]
        assert shown == plain and "_meta" not in shown
        assert shown["structuredContent"]["total_rows"] == 30 and "| id | name | score |" in shown["content"][0]["text"]
        assert wire(await client.call_tool("chart", {})) == wire(await client.call_tool("chart_plain", {}))


@pytest.mark.parametrize("era", ERAS)
async def test_an_app_only_tool_is_refused_in_one_sentence_to_a_client_without_apps(era: str) -> None:
    async with client_for(mcp_server(apps_app()), era) as client:
        for name in ("refresh", PAGE_TOOL):
            refused = await client.call_tool(name, {"handle": "x"} if name == PAGE_TOOL else {})
            assert refused.is_error
            sentence = refused.content[0].text  # type: ignore[union-attr]
            assert sentence == "[APP_ONLY] " + (
                f"Tool {name!r} is app-only: only an MCP Apps view may call it, and this client did not "
                f"declare the {EXTENSION_ID} extension."
            )


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_with_apps_sees_the_views_and_their_tools(era: str) -> None:
    async with client_for(mcp_server(apps_app()), era, extensions=[APPS]) as client:
        capabilities = client.server_capabilities  # (2025-11-25 capabilities have no ``extensions``)
        assert EXTENSION_ID in ((capabilities.experimental if era == "2025-memory" else capabilities.extensions) or {})
        tools = listed(await client.list_tools())
        assert set(tools) == {"plain", "shown", "chart", "chart_plain", "refresh", PAGE_TOOL, STATUS_TOOL, STOP_TOOL}
        assert "_meta" not in tools["plain"]
        assert tools["shown"]["_meta"] == {
            "ui": {"resourceUri": "ui://fusion-nb/auto.html", "visibility": ["model", "app"]}
        }
        assert tools["refresh"]["_meta"]["ui"]["visibility"] == ["app"]
        assert tools[PAGE_TOOL]["_meta"]["ui"]["visibility"] == ["app"]
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert resources["ui://fusion-nb/auto.html"].mime_type == APP_MIME_TYPE
        read = wire(await client.read_resource("ui://fusion-nb/auto.html"))["contents"][0]
        assert read["mimeType"] == APP_MIME_TYPE and read["_meta"]["ui"]["csp"] == {
            "connectDomains": [],
            "resourceDomains": [],
        }
        html = read["text"]
        assert "<script src" not in html and "http://" not in html and "https://" not in html  # (offline)
        assert (await client.call_tool("refresh", {})).content[0].text == "refreshed"  # type: ignore[union-attr]
        assert resources["ui://fusion-nb/plotly.html"].mime_type == APP_MIME_TYPE


@pytest.mark.parametrize("era", ERAS)
async def test_a_plotly_figure_reaches_its_view_with_plotly_s_own_bundle(era: str) -> None:
    """The figure's JSON rides in the result's ``_meta``; the view inlines plotly.min.js from the plotly package."""
    async with client_for(mcp_server(apps_app()), era, extensions=[APPS]) as client:
        shown = wire(await client.call_tool("chart", {}))
        meta = shown.pop("_meta")[VIEW_META]
        assert shown == wire(await client.call_tool("chart_plain", {}))
        assert meta["view"] == "plotly" and meta["figure"]["data"][0]["y"] == [3, 1, 2]
        html = wire(await client.read_resource("ui://fusion-nb/plotly.html"))["contents"][0]["text"]
    bundle = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    assert bundle[:2000] in html and "<script src" not in html
    print(f"ui://fusion-nb/plotly.html: {len(html.encode())} B (plotly {plotly.__version__})")


@pytest.mark.parametrize("era", ERAS)
async def test_a_view_pages_sorts_and_filters_through_the_app_only_tool(era: str) -> None:
    async with client_for(mcp_server(apps_app()), era, extensions=[APPS]) as client:
        shown = wire(await client.call_tool("shown", {}))
        meta = shown.pop("_meta")[VIEW_META]
        assert meta["view"] == "table" and meta["totalRows"] == 30 and meta["columns"] == ["id", "name", "score"]
        assert shown == wire(await client.call_tool("plain", {}))  # (the content itself is today's)
        page = (
            await client.call_tool(PAGE_TOOL, {"handle": meta["handle"], "offset": 25, "limit": 10})
        ).structured_content
        assert page == {
            "columns": ["id", "name", "score"],
            "rows": [[n, f"row {n % 7}", 30 - n] for n in range(25, 30)],
            "offset": 25,
            "matched": 30,
            "totalRows": 30,
        }
        arguments = {"handle": meta["handle"], "limit": 3, "sort": "id", "descending": True, "filter": "row 3"}
        page = (await client.call_tool(PAGE_TOOL, arguments)).structured_content
        assert page is not None and page["rows"] == [[24, "row 3", 6], [17, "row 3", 13], [10, "row 3", 20]]
        assert page["matched"] == 4


@pytest.mark.parametrize("era", ERAS)
async def test_the_page_tool_validates_its_input_and_reaches_only_returned_values(era: str) -> None:
    async with client_for(mcp_server(apps_app()), era, extensions=[APPS]) as client:
        handle = wire(await client.call_tool("shown", {}))["_meta"][VIEW_META]["handle"]
        for arguments, says in (
            ({"handle": handle, "limit": 0}, "limit"),
            ({"handle": handle, "limit": "five"}, "limit"),
            ({"handle": handle, "extra": 1}, "extra"),
            ({"handle": handle, "sort": "nope"}, "sort names no column of this table: 'nope'."),
            ({"handle": "guessed"}, "No result 'guessed' is open for this client's views"),
        ):
            refused = await client.call_tool(PAGE_TOOL, arguments)
            assert refused.is_error, arguments
            assert says in refused.content[0].text  # type: ignore[union-attr]


async def test_a_million_row_frame_is_never_sent_whole() -> None:
    """The result and each page stay small (bytes on the wire measured); the first page is quick."""
    async with client_for(mcp_server(apps_app(ROWS)), "2026-stream", extensions=[APPS]) as client:
        shown = wire(await client.call_tool("shown", {}))
        result_bytes = len(json.dumps(shown))
        handle = shown["_meta"][VIEW_META]["handle"]
        started = time.perf_counter()
        first = wire(await client.call_tool(PAGE_TOOL, {"handle": handle, "limit": 50}))
        first_page_s = time.perf_counter() - started
        sorted_page = wire(await client.call_tool(PAGE_TOOL, {"handle": handle, "limit": 50, "sort": "score"}))
        page_bytes = max(len(json.dumps(first)), len(json.dumps(sorted_page)))
    print(f"1M rows: result {result_bytes} B, page {page_bytes} B, first page {first_page_s * 1000:.1f} ms round trip")
    assert result_bytes < 8_000 and page_bytes < 16_000  # (the frame itself is ~30 MB as JSON)
    assert sorted_page["structuredContent"]["rows"][0] == [ROWS - 1, f"row {(ROWS - 1) % 7}", 1]


def job_app(cleaned: list[str]) -> Fusion:
    """A task tool with a view that reports progress and runs until stopped; a quick one twice, with and without."""
    app = Fusion("jobs")

    @app.f.action("train").app().task(poll_interval=0.1).handle
    async def train(input: Any, ctx: Any) -> Any:
        try:
            yield progress(40, "epoch 2/5")
            await anyio.sleep_forever()
        finally:
            cleaned.append("train")

    @app.f.action("quick").app().task().handle
    async def quick(input: Any, ctx: Any) -> str:
        return "done"

    @app.f.action("quick_plain").task().handle
    async def quick_plain(input: Any, ctx: Any) -> str:
        return "done"

    return app


@pytest.mark.parametrize("era", ERAS)
async def test_a_job_view_polls_the_task_store_and_stop_cancels_the_job(era: str) -> None:
    """The host shows the view beside the running call: it polls the app-only status tool, and Stop ends
    the job (its cleanup runs) and with it the call, which answers the cancellation."""
    cleaned: list[str] = []
    async with (
        client_for(mcp_server(job_app(cleaned)), era, extensions=[APPS]) as client,
        anyio.create_task_group() as group,
    ):
        answered: list[Any] = []

        async def call() -> None:
            answered.append(wire(await client.call_tool("train", {})))

        group.start_soon(call)
        with anyio.fail_after(10):
            while True:  # (as the view does: the spec has no progress notification to a view)
                state = (await client.call_tool(STATUS_TOOL, {"tool": "train"})).structured_content
                assert state is not None
                if state["status"] == "working" and state["percent"] == 40:
                    break
                await anyio.sleep(0.02)
        assert state["message"] == "epoch 2/5" and state["final"] is False
        stopped = (await client.call_tool(STOP_TOOL, {"job": state["job"]})).structured_content
        assert stopped is not None and stopped["status"] == "cancelled" and stopped["final"] is True
    assert cleaned == ["train"]
    (result,) = answered
    assert result["isError"] is True and result["_meta"][VIEW_META]["job"]["status"] == "cancelled"
    async with client_for(mcp_server(job_app(cleaned)), era, extensions=[APPS]) as client:
        done = wire(await client.call_tool("quick", {}))
        assert done["content"] == [{"type": "text", "text": "done"}]
        assert done["_meta"][VIEW_META]["job"]["status"] == "completed"
        refused = await client.call_tool(STOP_TOOL, {"job": "not-a-job"})
        assert refused.is_error and "There is no job 'not-a-job' for this client's views." in refused.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ERAS)
async def test_a_task_tool_with_a_view_answers_a_client_without_apps_as_before(era: str) -> None:
    async with client_for(mcp_server(job_app([])), era) as client:
        assert wire(await client.call_tool("quick", {})) == wire(await client.call_tool("quick_plain", {}))
