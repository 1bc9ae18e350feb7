"""Content blocks a tool or a prompt returns reach the client as they are: through the SDK's client, every era.

Images, audio, resource links and embedded resources (fusion-nb's types or the SDK's), alone or
mixed with text in a list, in order; a block over what is left of the answer bound is one sentence
and the rest still goes; prompt messages hold any block; a block built wrong is one sentence.
"""

from __future__ import annotations

from typing import Any

import pytest
from blocks_app import BROKEN, CHECKS, blocks_app, check_show, png
from eras import ERAS, client_for
from http_serving import serve
from mcp import MCPError

from fusion_nb import Audio, EmbeddedResource, Image
from fusion_nb.mcp import mcp_server

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


def wire(result: Any) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def check(client: Any) -> None:
    for name, check_tool in CHECKS.items():
        answer = wire(await client.call_tool(name, {}))
        assert answer["isError"] is False, answer
        check_tool(answer)
    check_show(wire(await client.get_prompt("show", {"subject": "the square"})))
    with pytest.raises(MCPError) as raised:
        await client.get_prompt("broken", {})
    assert str(raised.value) == BROKEN


@pytest.mark.parametrize("era", ERAS)
async def test_blocks_in_memory(era, tmp_path):
    app = blocks_app(tmp_path)
    async with client_for(mcp_server(app), era) as client:
        await check(client)
    await app.aclose()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_blocks_over_http(mode, tmp_path):
    async with serve(blocks_app(tmp_path)) as served, served.client(mode) as client:
        await check(client)


def test_a_block_built_wrong_is_one_sentence(tmp_path):
    cases = [
        (lambda: Image(), "Image needs exactly one of data= (bytes) or path= (a file)."),
        (
            lambda: Image(b"plain text"),
            "Image needs mime_type= ('image/...'): its type could not be told from its bytes.",
        ),
        (lambda: Audio(png()), "Audio needs mime_type= ('audio/...'): its type could not be told from its bytes."),
        (lambda: EmbeddedResource("a://b"), "EmbeddedResource needs exactly one of text= (a str) or data= (bytes)."),
    ]
    for build, sentence in cases:
        with pytest.raises(ValueError) as raised:
            build()
        assert str(raised.value) == sentence
    (tmp_path / "clip.ogg").write_bytes(b"\x00" * 8)
    assert Audio(path=tmp_path / "clip.ogg").mime_type == "audio/ogg"  # (told from the name when the bytes do not say)


def test_an_image_shows_itself_in_the_notebook():
    bundle = Image(png())._repr_mimebundle_()
    assert bundle["image/png"] == png() and bundle["text/plain"] == f"Image(image/png, {len(png())} bytes)"
