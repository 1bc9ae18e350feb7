"""Which real clients follow ``nextCursor`` (issue 51): each walks every page of a paged server.

``fusion-nb serve tests/mcp/pages_app.py --page-size 10`` over stdio holds 25 tools and 12
resources, templates and prompts. The TypeScript client 2.x and the MCP Inspector CLI follow
``nextCursor`` by themselves; the TypeScript SDK 1.x (like the Python SDK, ``tests/mcp/test_pages.py``)
returns one page per call and leaves walking to the application, which these tests do. A
forged cursor is -32602 in one sentence to each. (docs/mcp.md, "Lists and pages".)
"""

from __future__ import annotations

import itertools
import json
import os
import sys

import pytest
from node_clients import server_env
from stdio_serving import HERE as MCP_TESTS
from stdio_serving import REPO, StdioCommand
from test_interop import inspector, run_node

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

COUNTS = {"tools": 25, "resources": 12, "resourceTemplates": 12, "prompts": 12}


def paged_server() -> StdioCommand:
    return StdioCommand(
        argv=[sys.executable, "-u", "-m", "fusion_nb", "serve", str(MCP_TESTS / "pages_app.py"), "--page-size", "10"],
        env={"PYTHONPATH": f"{MCP_TESTS}{os.pathsep}{REPO}"},
    )


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_typescript_clients_walk_every_page(node, sdk):
    command = paged_server()
    seen = json.loads(await run_node(node, "pages.mjs", sdk, *command.argv, env=server_env(command)))
    assert seen["walked"] == COUNTS  # every item, once, by passing nextCursor back
    if sdk == "v2":  # follows by itself: its plain list call is the whole list
        assert seen["once"] == COUNTS and seen["pages"] == {key: 1 for key in COUNTS}
    else:  # one page per call: the application walks
        assert seen["once"] == {key: 10 for key in COUNTS}
        assert seen["pages"] == {"tools": 3, "resources": 2, "resourceTemplates": 2, "prompts": 2}
    assert seen["forged"]["code"] == -32602
    assert seen["forged"]["message"].endswith(
        "tools/list: the cursor 'forged' is not one this server gave (or it restarted since); "
        "list again without a cursor."
    )


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_inspector_cli_follows_next_cursor(node, era):
    command = paged_server()
    env = list(itertools.chain.from_iterable(("-e", f"{k}={v}") for k, v in command.env.items()))
    options = ["--protocol-era", era, "--cwd", command.cwd, *env, "--method", "tools/list", "--", *command.argv]
    listed = json.loads(await run_node(*inspector(node, *options)))
    assert [tool["name"] for tool in listed["tools"]] == [f"tool{n:03}" for n in range(25)]
    assert "nextCursor" not in listed
