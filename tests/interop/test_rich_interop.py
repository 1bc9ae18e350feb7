"""Rich values, a resource and a prompt as the TypeScript SDK's clients (v1 and v2) receive them over HTTP."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from http_serving import serve
from rich_app import rich_app
from test_interop import run_node
from test_rich import CHECKS

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_typescript_clients_receive_rich_values_resources_and_prompts(node, sdk):
    app = rich_app()
    app.resource("data://table", pd.DataFrame({"a": [1, 2]}))
    app.prompt("explain", "Explain {topic}.")
    async with serve(app) as served:
        seen = json.loads(await run_node(node, "rich.mjs", sdk, served.url, served.token))
    for name, check in CHECKS.items():
        check(seen["tools"][name])
    assert seen["resource"]["contents"][0] == {"uri": "data://table", "mimeType": "text/csv", "text": "a\n1\n2\n"}
    assert seen["prompt"]["messages"][0]["content"]["text"] == "Explain MCP."
    assert "Unknown resource 'nope://x'" in seen["unknown"]
