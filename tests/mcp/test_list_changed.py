"""Handshake-era (2025) clients hear ``notifications/resources/list_changed`` and
``notifications/prompts/list_changed`` when a resource or prompt is added or removed, and the
handshake declares ``listChanged`` for all three lists: through the SDK's client, in memory and
over HTTP (2026 clients hear the same changes on a listen stream, as before).
"""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from eras import client_for
from http_serving import serve

from fusion_nb import Fusion
from fusion_nb.mcp import mcp_server

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

KINDS: dict[type, str] = {
    types.ResourceListChangedNotification: "resources",
    types.PromptListChangedNotification: "prompts",
    types.ToolListChangedNotification: "tools",
}


async def check(client, app: Fusion, heard: list[str], arrived: anyio.Event) -> None:
    caps = client.server_capabilities
    assert caps.resources.list_changed is True and caps.prompts.list_changed is True
    assert caps.tools.list_changed is True
    assert (await client.list_resources()).resources == []  # (a round trip: the server has the handshake done)

    async def hear(kind: str) -> None:
        with anyio.fail_after(10):
            while kind not in heard:
                await arrived.wait()
        heard.remove(kind)

    app.resource("config://late", "late")
    await hear("resources")
    assert "config://late" in [str(r.uri) for r in (await client.list_resources()).resources]
    app.prompt("late", "Say {what}.")
    await hear("prompts")
    assert "late" in [p.name for p in (await client.list_prompts()).prompts]
    assert app.catalog.remove_resource("config://late") and app.catalog.remove_prompt("late")
    await hear("resources")
    await hear("prompts")
    assert (await client.list_resources()).resources == [] and (await client.list_prompts()).prompts == []


def listener() -> tuple[list[str], anyio.Event, object]:
    heard: list[str] = []
    box = [anyio.Event()]

    class Arrived:
        async def wait(self) -> None:
            await box[0].wait()
            box[0] = anyio.Event()

    async def on_message(message) -> None:
        kind = KINDS.get(type(message))
        if kind is not None:
            heard.append(kind)
            box[0].set()

    return heard, Arrived(), on_message  # type: ignore[return-value]


async def test_2025_list_changes_in_memory():
    app = Fusion("list-changes")
    heard, arrived, on_message = listener()
    async with client_for(mcp_server(app), "2025-memory", message_handler=on_message) as client:
        await check(client, app, heard, arrived)
    await app.aclose()


async def test_2025_list_changes_over_http():
    app = Fusion("list-changes")
    heard, arrived, on_message = listener()
    async with serve(app) as served, served.client("legacy", message_handler=on_message) as client:
        await check(client, app, heard, arrived)
