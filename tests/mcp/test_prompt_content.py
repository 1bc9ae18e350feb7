"""Prompt messages may hold any content block (image, audio, embedded resource, resource link), not text only.

Before, a block was sent as its Python repr in a text block, silently. With the SDK's client on
every era in memory (asyncio and trio).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from eras import ERAS, client_for
from mcp.shared.exceptions import MCPError

from fusion_nb import Fusion
from fusion_nb.mcp import mcp_server

pytestmark = pytest.mark.anyio

IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
EMBEDDED = {"type": "resource", "resource": {"uri": "nb://notes", "mimeType": "text/plain", "text": "the notes"}}


def prompt_app() -> Fusion:
    app = Fusion("prompt-blocks")

    @app.prompt("look")
    def look(topic: str) -> Any:
        return [
            {"role": "user", "content": IMAGE},
            {"role": "user", "content": EMBEDDED},
            {"role": "assistant", "content": {"type": "resource_link", "uri": "nb://df", "name": "df"}},
            {"role": "user", "content": f"Describe {topic}."},
        ]

    @app.prompt("broken")
    def broken() -> Any:
        return [{"role": "user", "content": {"type": "image", "mimeType": "image/png"}}]  # no data

    return app


@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_message_holds_any_content_block(era: str) -> None:
    async with client_for(mcp_server(prompt_app()), era) as client:
        got = await client.get_prompt("look", {"topic": "the chart"})
        contents = [message.content for message in got.messages]
        assert isinstance(contents[0], types.ImageContent) and contents[0].data == IMAGE["data"]
        assert isinstance(contents[1], types.EmbeddedResource)
        assert isinstance(contents[1].resource, types.TextResourceContents) and contents[1].resource.text == "the notes"
        assert isinstance(contents[2], types.ResourceLink) and got.messages[2].role == "assistant"
        assert isinstance(contents[3], types.TextContent) and contents[3].text == "Describe the chart."
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("broken", {})
        assert refused.value.error.code == types.INTERNAL_ERROR
        assert refused.value.error.message == (
            "Prompt 'broken' returned a message MCP cannot carry (message 1, image block, data: Field required)."
        )
