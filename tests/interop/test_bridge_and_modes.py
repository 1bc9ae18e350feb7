"""Elicitation modes and ``fusion-nb connect`` with the TypeScript clients that found issue 23.

``modes.mjs`` declares each shape of the elicitation capability (none, form, URL, a bare
``{}``, both, and a handler that throws) and calls a form tool and a URL tool. Straight
from the server (HTTP and stdio) the answers must follow the declared modes; through the
bridge (the client as the host on stdio, the bridge on HTTP upstream) they must be
exactly the direct answers, including which client the server sees. The bridge tells its
host of each upstream change once. And the TypeScript 1.x client that reopens a GET
stream the server still holds half-open keeps receiving the session's notifications.
"""

from __future__ import annotations

import contextlib
import json
import sys

import anyio
import pytest
from http_serving import serve
from loopback_proxy import LoopbackForwarder
from mcp import Client, StdioServerParameters, types
from node_clients import HERE, server_env
from stdio_serving import REPO, StdioCommand
from test_interop import run_node

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # uvicorn, and the kernel harness

UNSUPPORTED = "[ELICITATION_UNSUPPORTED] "


def bridge_command(url: str, token: str) -> StdioCommand:
    """``fusion-nb connect URL`` as a stdio server a Node host starts."""
    return StdioCommand(argv=[sys.executable, "-m", "fusion_nb", "connect", url, "--token", token], cwd=str(REPO))


async def modes(node: str, sdk: str, *target: str, env: dict[str, str] | None = None) -> dict:
    return json.loads(await run_node(node, str(HERE / "modes.mjs"), sdk, *target, env=env))


def refused(seen: dict, sdk: str, mode: str, sentence: str) -> None:
    """A question the client cannot answer: 2025 an ``ELICITATION_UNSUPPORTED`` result, 2026 (SEP-2575)
    ``-32021`` naming the elicitation mode it lacks."""
    if sdk == "v1":
        assert seen["isError"] and seen["text"].startswith(UNSUPPORTED + sentence), seen
    else:
        assert seen["code"] == -32021 and sentence in seen["thrown"], seen
        assert seen["required"] == {"elicitation": {mode: {}}}, seen


def check_direct(seen: dict, sdk: str) -> None:
    """What a client declaring each capability must get from the server itself."""
    refunded = {"isError": False, "text": "refunded inv-7"}
    connected = {"isError": False, "text": "connected"}
    for case in ("none", "form", "url", "bare", "both"):
        assert seen[case]["client"] == f"fusion-nb-modes-{sdk}", seen[case]
    refused(seen["none"]["form"], sdk, "form", 'Tool "billing.refund" needs input')
    refused(seen["none"]["url"], sdk, "url", 'Tool "connect" needs input')
    assert seen["form"]["form"] == refunded and seen["bare"]["form"] == refunded
    # issue 23, item 1: a URL request to a client that declared form only (or a bare {}), and the reverse
    for case in ("form", "bare"):
        refused(seen[case]["url"], sdk, "url", 'Tool "connect" needs input')
    refused(seen["url"]["form"], sdk, "form", 'Tool "billing.refund" needs input')
    assert seen["url"]["url"] == connected and seen["both"]["url"] == connected and seen["both"]["form"] == refunded
    assert seen["form"]["asked"] == ["form"] and seen["url"]["asked"] == ["url"]
    throws = seen["throws"]
    if sdk == "v1":  # 2025: the server asked live, and reports the handler's failure as the tool's result
        for kind in ("form", "url"):
            assert throws[kind]["isError"], throws
            assert throws[kind]["text"].startswith("[ELICITATION_FAILED] "), throws
            assert "form renderer crashed" in throws[kind]["text"]
    else:  # 2026: the client runs the rounds; its own handler's failure stays in the client
        for kind in ("form", "url"):
            assert "form renderer crashed" in throws[kind]["thrown"], throws


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_input_requests_follow_the_declared_modes_over_http_and_stdio(node, sdk, stdio_command):
    async with serve() as served:
        over_http = await modes(node, sdk, "http", served.url, served.token)
    over_stdio = await modes(node, sdk, "stdio", *stdio_command.argv, env=server_env(stdio_command))
    check_direct(over_http, sdk)
    check_direct(over_stdio, sdk)


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_a_host_gets_through_the_bridge_exactly_what_it_gets_direct(node, sdk):
    """Issue 23, items 2 and 3: the same answers (elicitation refusals and failures included) and clientInfo."""
    async with serve() as served:
        direct = await modes(node, sdk, "http", served.url, served.token)
        bridge = bridge_command(served.url, served.token)
        bridged = await modes(node, sdk, "stdio", *bridge.argv, env=server_env(bridge))
    check_direct(direct, sdk)
    assert bridged == direct


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["host-2025", "host-2026"])
async def test_an_upstream_change_reaches_the_host_once(mode):
    """Issue 23, item 3: the SDK client copies a 2026 listen event to its message handler too; the host is told once.

    Two round trips through the bridge and the upstream after the first notification: a doubled
    one is written to the host as the first is, well before their answers.
    """
    notified: list[str] = []
    first = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            notified.append(message.method)
            first.set()

    async with serve() as served:
        bridge = bridge_command(served.url, served.token)
        params = StdioServerParameters(command=bridge.argv[0], args=bridge.argv[1:], cwd=bridge.cwd)
        async with (
            Client(params, mode=mode, message_handler=on_message) as client,
            contextlib.AsyncExitStack() as stack,
        ):
            assert "late" not in {tool.name for tool in (await client.list_tools()).tools}
            if mode == "auto":
                await stack.enter_async_context(client.listen(tools_list_changed=True))

            async def late(input, ctx):
                return "late"

            served.app.f.action("late").describe("Added while the host is connected.").handle(late)
            with anyio.fail_after(60):
                await first.wait()
            for _ in range(2):
                assert "late" in {tool.name for tool in (await client.list_tools()).tools}
            assert notified == ["notifications/tools/list_changed"]


class _ProxiedConnection:
    """One connection through ``HalfOpenProxy``: the status of the GET it carried, and how to cut it."""

    def __init__(self, client: anyio.abc.SocketStream) -> None:
        self.client = client
        self.get_sent = False
        self.status: int | None = None
        self.answered = anyio.Event()
        self.cut_off = False

    async def cut(self) -> None:
        """Close the client's side only: the server's connection stays open and silent (half-open)."""
        self.cut_off = True
        await self.client.aclose()


class HalfOpenProxy(LoopbackForwarder):
    """A loopback TCP forwarder that notes each GET's response status and can leave a connection half-open.

    A cut connection's server side is held open, unread, until the proxy stops, as a NAT or a
    sleeping laptop leaves it: the server cannot tell the client is gone.
    """

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.gets: list[_ProxiedConnection] = []
        self.changed = anyio.Event()

    async def forward(self, client: anyio.abc.SocketStream) -> None:
        connection = _ProxiedConnection(client)
        async with client, await anyio.connect_tcp("127.0.0.1", self.target_port) as server:

            async def upstream() -> None:
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    async for chunk in client:
                        if chunk.startswith(b"GET "):
                            connection.get_sent = True
                        await server.send(chunk)

            async def downstream() -> None:
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    async for chunk in server:
                        if connection.get_sent and connection.status is None and chunk.startswith(b"HTTP/1.1 "):
                            connection.status = int(chunk.split(b" ", 2)[1])
                            self.gets.append(connection)
                            connection.answered.set()
                            self.changed.set()
                            self.changed = anyio.Event()
                        if not connection.cut_off:
                            await client.send(chunk)
                        # once cut, what the server writes is read and dropped: it never learns

            async with anyio.create_task_group() as group:
                group.start_soon(upstream)
                group.start_soon(downstream)

    async def answered_gets(self, count: int) -> list[_ProxiedConnection]:
        """Wait until ``count`` GETs have had their response status."""
        while len(self.gets) < count:
            await self.changed.wait()
        return self.gets[:count]


async def test_a_typescript_client_reopening_its_half_open_get_stream_still_gets_changes(node):
    """Issue 23, item 4: the reopening GET replaces the stream the server still holds (no 409s until the client
    gives up), so ``tools/list_changed`` reaches the client."""
    observed: dict[str, str] = {}
    async with serve() as served, anyio.create_task_group() as group:
        proxy = HalfOpenProxy(int(served.url.rsplit(":", 1)[1].split("/")[0]))
        await group.start(proxy.serve)

        async def client() -> None:
            url = f"http://127.0.0.1:{proxy.port}/mcp"
            observed["out"] = await run_node(node, str(HERE / "halfopen.mjs"), url, served.token)

        async with anyio.create_task_group() as clients:
            clients.start_soon(client)
            with anyio.fail_after(60):
                (first,) = await proxy.answered_gets(1)
            assert first.status == 200
            await first.cut()
            with anyio.fail_after(60):
                reopened = (await proxy.answered_gets(2))[1]
            assert reopened.status == 200, [get.status for get in proxy.gets]

            async def late(input, ctx):
                return "late"

            served.app.f.action("late").describe("Added after the stream was reopened.").handle(late)
        group.cancel_scope.cancel()
    seen = json.loads(observed["out"])
    assert "late" in seen["tools"], seen
    assert not any("reconnection" in error.lower() for error in seen["errors"]), seen


@pytest.mark.parametrize("sdk", ["v1", "v2"])
async def test_every_kind_of_input_request_crosses_the_bridge_to_a_typescript_host(node, sdk):
    """Issue 46: sampling, roots, three requests in one round, and a prompt and a resource that ask, through
    ``fusion-nb connect`` to the TypeScript client of each era (before: "declared no sampling", "no back-channel")."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("asking_app", REPO / "tests" / "cli" / "data" / "asking_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    async with serve(module.app) as served:
        bridge = bridge_command(served.url, served.token)
        seen = json.loads(await run_node(node, str(HERE / "asking.mjs"), sdk, *bridge.argv, env=server_env(bridge)))
    assert seen["sample"] == "model said: Paris", seen
    assert seen["roots"] == "roots: file:///work", seen
    assert seen["everything"] == "Ada / Paris / file:///work", seen
    assert seen["prompt"] == "Greet Ada from Oslo.", seen
    assert seen["resource"] == "the secret, for Ada", seen
    assert seen["asked"][:2] == ["What is the capital of France?", "roots"]
    assert seen["asked"][-2:] == ["Who is it for?", "Password?"]
