"""Logging and completion with the TypeScript SDK clients over HTTP: 1.x (2025-11-25) and 2.x (2026-07-28).

``logging.mjs`` sets a level (1.x: ``logging/setLevel``; 2.x: ``_meta`` logLevel per request, as its
own ``setLoggingLevel`` refuses to send the method on 2026-07-28), calls a tool that logs at three
levels, and completes a prompt argument; the assertions are here.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import anyio
import pytest
from http_serving import serve
from node_clients import HERE

from fusion_nb import Fusion

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


def logging_app() -> Fusion:
    app = Fusion("log-interop")

    @app.f.action("chatty").describe("Logs at three levels.").handle
    async def chatty(input: Any, ctx: Any) -> Any:
        ctx.log("debug", "looking")
        ctx.log("info", "step", n=1)
        ctx.log("error", "bad row")
        return "done"

    @app.prompt("paint")
    def paint(color: Literal["red", "rose", "blue"]) -> str:
        return f"Paint it {color}."

    return app


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_typescript_clients_get_log_lines_and_completions(node: str, sdk: str) -> None:
    async with serve(logging_app()) as served:
        with anyio.fail_after(180):
            done = await anyio.run_process(
                [node, "logging.mjs", sdk, served.url, served.token or ""], cwd=HERE, check=False
            )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    seen = json.loads(done.stdout)
    assert seen["result"] == "done"
    assert [(line["level"], line["data"], line["logger"]) for line in seen["logs"]] == [
        ("info", {"message": "step", "n": 1}, "chatty"),
        ("error", "bad row", "chatty"),
    ]
    assert seen["completion"]["values"] == ["red", "rose"]
    assert "completions" in seen["capabilities"]
    if sdk == "v1":
        assert seen["setLevel"] == "ok" and "logging" in seen["capabilities"]
    else:
        assert seen["setLevel"] == "METHOD_NOT_SUPPORTED_BY_PROTOCOL_VERSION"  # the 2.x client refuses it itself
