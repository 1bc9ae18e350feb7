"""MCP Apps seen by TypeScript clients that do not declare the extension (v1: 2025-11-25, v2: 2026-07-28) (#49).

They get exactly what they got before ``.app()``: every ``.app()`` tool answers as its twin
without it, the app-only tools are not listed, and calling one is refused in one sentence.
"""

from __future__ import annotations

from typing import Any

import pytest
from http_serving import serve
from test_apps import apps_app, job_app
from test_rich_interop import ts_client

from fusion_nb.mcp.apps import PAGE_TOOL

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


def both(app: Any) -> Any:
    """The table, figure and app-only tools of ``apps_app`` and the quick task tools of ``job_app``."""
    jobs = job_app([])
    for name in ("quick", "quick_plain"):
        tool = jobs.get(name)
        assert tool is not None
        app.register(tool)
    return app


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_typescript_clients_without_apps_get_today_s_content(node: str, sdk: str) -> None:
    async with serve(both(apps_app())) as served:
        seen = await ts_client(node, sdk, served.url, served.token)  # (every listed tool, called)
        refused = await ts_client(
            node, sdk, served.url, served.token, tools={PAGE_TOOL: {"handle": "x"}, "refresh": {}}
        )
    tools = seen["tools"]
    assert sorted(tools) == ["chart", "chart_plain", "plain", "quick", "quick_plain", "shown"]
    for shown, plain in (("shown", "plain"), ("chart", "chart_plain"), ("quick", "quick_plain")):
        assert tools[shown] == tools[plain]
        assert "_meta" not in tools[shown] or "io.github.fusion-nb/view" not in tools[shown]["_meta"]
    for name in (PAGE_TOOL, "refresh"):
        answer = refused["tools"][name]
        assert answer["isError"] is True
        assert answer["content"][0]["text"] == (
            f"[APP_ONLY] Tool {name!r} is app-only: only an MCP Apps view may call it, and this client did not "
            "declare the io.modelcontextprotocol/ui extension."
        )
