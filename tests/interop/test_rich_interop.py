"""Rich values, resources, prompts and bad input as the TypeScript SDK's clients (v1 and v2) receive them over HTTP.

Both from an app served in-process and from a notebook served headless by ``fusion-nb serve``
(its figure tool drawn with no display).
"""

from __future__ import annotations

import base64
import json
import struct
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from http_serving import serve
from rich_app import rich_app
from test_interop import run_node
from test_rich import CHECKS

from fusion_nb.engine import ToolError

sys.path.insert(0, str(Path(__file__).parent.parent / "cli"))  # fusion-nb serve as a subprocess
from served import DATA, served

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # uvicorn, and the kernel harness


async def ts_client(node: str, sdk: str, url: str, token: str, **plan: Any) -> dict[str, Any]:
    """What the TypeScript client received doing ``plan`` (see rich.mjs)."""
    return json.loads(await run_node(node, "rich.mjs", sdk, url, token, json.dumps(plan)))


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_typescript_clients_receive_rich_values_resources_and_prompts(node, sdk):
    app = rich_app()
    app.resource("data://table", pd.DataFrame({"a": [1, 2]}))
    app.prompt("explain", "Explain {topic}.")

    @app.resource("vars://{name}")
    def variable(name):
        raise ToolError("INVALID_PARAMS", f"{name!r} is not shared; shared: [].")

    refused = [{"read": "nope://x"}, {"read": "vars://os"}, {"prompt": ["explain", {}]}]
    async with serve(app) as served_app:
        seen = await ts_client(
            node,
            sdk,
            served_app.url,
            served_app.token,
            reads=["data://table"],
            prompts=[["explain", {"topic": "MCP"}]],
            refused=refused,
        )
    assert sorted(seen["tools"]) == sorted(CHECKS)
    for name, check in CHECKS.items():
        check(seen["tools"][name])
    table = {"uri": "data://table", "mimeType": "text/csv", "text": "a\n1\n2\n"}
    assert seen["reads"]["data://table"]["contents"][0] == table
    assert seen["prompts"]["explain"]["messages"][0]["content"]["text"] == "Explain MCP."
    unknown, unshared, missing = seen["refused"]
    assert "Unknown resource 'nope://x'" in unknown
    assert "'os' is not shared; shared: []." in unshared
    assert "Prompt 'explain' needs the argument 'topic' (a string); sent: no arguments." in missing
    assert all("\n" not in sentence for sentence in seen["refused"])


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_typescript_clients_get_a_figure_from_a_notebook_served_headless(node, sdk):
    """``fusion-nb serve NB.ipynb`` without a display: the figure tool's PNG, the shared table, the prompt cell."""
    no_display = {"DISPLAY": "", "WAYLAND_DISPLAY": "", "MPLBACKEND": ""}
    async with served(str(DATA / "plots.ipynb"), env=no_display) as server:
        seen = await ts_client(
            node,
            sdk,
            server.url,
            server.token,
            tools={"plot": {"slope": 2}},
            reads=["nb://vars/sales"],
            prompts=[["summarize", {"region": "north"}]],
            refused=[{"read": "nb://vars/plt"}],
        )
    image = seen["tools"]["plot"]["content"][0]
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    png = base64.b64decode(image["data"])
    assert png.startswith(b"\x89PNG") and struct.unpack(">II", png[16:24]) == (600, 300)  # 6x3 in at 100 dpi
    assert seen["reads"]["nb://vars/sales"]["contents"][0]["text"] == "region,total\nnorth,10\nsouth,20\n"
    assert seen["prompts"]["summarize"]["messages"][0]["content"]["text"] == "Summarize the sales of north."
    (refused,) = seen["refused"]
    assert "'plt' is not a shared variable; shared: ['sales']" in refused and "\n" not in refused


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_typescript_clients_receive_content_blocks_as_they_are(node, sdk, tmp_path):
    """Images, audio, links and embedded resources from tools (mixed with text, the SDK's types, one over
    the bound) and from a prompt's messages, as fusion-nb's Python SDK tests check them (blocks_app)."""
    from blocks_app import BROKEN, CHECKS, blocks_app, check_show

    async with serve(blocks_app(tmp_path)) as served_app:
        seen = await ts_client(
            node,
            sdk,
            served_app.url,
            served_app.token,
            prompts=[["show", {"subject": "the square"}]],
            refused=[{"prompt": ["broken", {}]}],
        )
    assert sorted(seen["tools"]) == sorted(CHECKS)
    for name, check in CHECKS.items():
        check(seen["tools"][name])
    check_show(seen["prompts"]["show"])
    assert BROKEN in seen["refused"][0]
