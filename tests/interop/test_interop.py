"""The interop matrix: TypeScript SDK 1.x (2025-11-25) and 2.x (2026-07-28, ``mode: 'auto'``) over
HTTP and stdio, the MCP Inspector CLI over HTTP and stdio in both eras, and a kernel's
``%fusion serve``. Node scripts drive the clients and report what they saw; the
assertions are here.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex

import anyio
import pytest
from http_serving import serve
from kernel_harness import serve_shout
from node_clients import HERE, server_env

from fusion_nb.mcp.http import INSPECTOR_VERSION

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # uvicorn, and the kernel harness

ERAS = {"v1": "2025-11-25", "v2": "2026-07-28"}


async def run_node(node: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run a Node client to completion; its stdout (a failure shows its stderr)."""
    with anyio.fail_after(180):
        done = await anyio.run_process([node, *args], cwd=HERE, env=env, check=False)
    assert done.returncode == 0, f"{args[0]} exited {done.returncode}:\n{done.stderr.decode()[-3000:]}"
    return done.stdout.decode()


def check_observations(seen: dict, sdk: str, server_name: str, http: bool) -> None:
    """What every TypeScript client must see from the test app."""
    assert seen["protocol"] == ERAS[sdk]
    assert seen["server"]["name"] == server_name
    echo = seen["echo"]
    assert echo["inputSchema"]["required"] == ["text"] and echo["inputSchema"]["properties"]["text"]["type"] == "string"
    assert echo["outputSchema"]["properties"]["result"]["type"] == "string"
    assert echo["annotations"] == {"readOnlyHint": True, "idempotentHint": True}
    assert seen["call"] == {"structured": {"result": "from typescript"}, "isError": False}
    assert seen["invalid"]["isError"] and seen["invalid"]["text"].startswith(
        '[INVALID_INPUT] Invalid input for tool "echo"'
    )
    progress = seen["progress"]
    assert progress and progress[-1] == 100 and all(a < b for a, b in itertools.pairwise(progress)), progress
    assert seen["progressWithoutToken"] == 0
    assert seen["floodFinals"] == [100] * 20, "a final progress value was lost or came after its result"
    assert seen["lateProgress"] == 0
    cancel = seen["cancel"]
    assert cancel["error"] is not None and "abort" in cancel["error"].lower(), cancel
    assert cancel["cleaned"] == "cleaned" and cancel["cleanupMs"] < 1000, cancel
    elicitation = seen["elicitation"]
    assert elicitation["accept"] == {"text": "refunded inv-7", "asked": ["Refund invoice inv-7?"]}
    assert elicitation["decline"]["text"] == "refund declined"
    assert elicitation["cancel"]["text"] == "refund cancelled"
    if sdk == "v1":
        assert seen["noElicitation"].startswith('[ELICITATION_UNSUPPORTED] Tool "billing.refund" needs input')
    else:  # SEP-2575: the client's own typed error, naming what it did not declare
        refused = seen["noElicitation"]
        assert refused["thrown"] == "MissingRequiredClientCapabilityError" and refused["code"] == -32021, refused
        assert refused["required"] == {"elicitation": {"form": {}}}, refused
        assert refused["message"].startswith('Tool "billing.refund" needs input'), refused
    if http:
        for case in ("missingToken", "wrongToken"):
            assert (seen[case] != "connected" and "401" in json.dumps(seen[case])) or "invalid_token" in json.dumps(
                seen[case]
            ), seen[case]


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_typescript_sdk_over_http(node, sdk):
    async with serve() as served:
        out = await run_node(node, "client.mjs", sdk, "http", served.url, served.token)
    check_observations(json.loads(out), sdk, "mcp-http-test", http=True)


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_typescript_sdk_over_stdio(node, sdk, stdio_command):
    out = await run_node(node, "client.mjs", sdk, "stdio", *stdio_command.argv, env=server_env(stdio_command))
    check_observations(json.loads(out), sdk, "mcp-stdio-test", http=False)


def inspector(node: str, *args: str) -> list[str]:
    """The pinned Inspector CLI (the same release ``%fusion serve`` prints), from the local install."""
    launcher = (
        HERE / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
    )
    return [node, str(launcher), "--cli", *args]


def test_the_pinned_inspector_is_the_one_serve_prints(pinned):
    assert pinned["@modelcontextprotocol/inspector"] == INSPECTOR_VERSION


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_inspector_cli_over_http(node, era):
    async with serve() as served:
        target = [
            served.url,
            "--transport",
            "http",
            "--protocol-era",
            era,
            "--header",
            f"Authorization: Bearer {served.token}",
        ]
        listed = json.loads(await run_node(*inspector(node, *target, "--method", "tools/list")))
        called = json.loads(
            await run_node(
                *inspector(node, *target, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hi")
            )
        )
    assert "echo" in [tool["name"] for tool in listed["tools"]]
    assert called["structuredContent"] == {"result": "hi"} and called["isError"] is False


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_inspector_cli_over_stdio(node, era, stdio_command):
    server_env = list(itertools.chain.from_iterable(("-e", f"{k}={v}") for k, v in stdio_command.env.items()))
    options = ["--protocol-era", era, "--cwd", stdio_command.cwd, *server_env]
    server = ["--", *stdio_command.argv]
    listed = json.loads(await run_node(*inspector(node, *options, "--method", "tools/list", *server)))
    call = ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hi"]
    called = json.loads(await run_node(*inspector(node, *options, *call, *server)))
    assert "echo" in [tool["name"] for tool in listed["tools"]]
    assert called["structuredContent"] == {"result": "hi"} and called["isError"] is False


@pytest.mark.kernel
async def test_a_kernels_fusion_serve_with_both_sdks_and_the_printed_inspector_command(node, kernel):
    served, url, token = await serve_shout(kernel)
    printed = re.search(r"^npx -y @modelcontextprotocol/inspector@(\S+) --cli (.*)$", served.stdout, re.M)
    try:
        seen = json.loads(await run_node(node, "kernel.mjs", url, token, "shout", '{"text": "hi"}'))
        assert seen["v1"] == {"protocol": "2025-11-25", "tools": ["shout"], "text": "HI", "progress": [50]}
        assert seen["v2"] == {"protocol": "2026-07-28", "tools": ["shout"], "text": "HI", "progress": [50]}
        # The Inspector command %fusion serve prints, run as printed (from the local install of that release).
        assert printed is not None and printed.group(1) == INSPECTOR_VERSION
        listed = json.loads(await run_node(*inspector(node, *shlex.split(printed.group(2)))))
        assert [tool["name"] for tool in listed["tools"]] == ["shout"]
    finally:
        await kernel.run("%fusion stop")
