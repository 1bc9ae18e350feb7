"""A notebook's figure tool, shared table and prompt cell served headless by ``fusion-nb serve`` (no display)."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image
from served import DATA, run_cli, served

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


def test_check_lists_the_tools_resources_and_prompts():
    done = run_cli("check", str(DATA / "plots.ipynb"))
    assert done.returncode == 0, done.stderr
    assert "plot" in done.stdout
    assert "resource nb://vars/sales" in done.stdout and "template nb://vars/{name}.json" in done.stdout
    assert "prompt   summarize(region): Summarize the sales of a region." in done.stdout


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_headless_serving_sends_a_figure_a_shared_table_and_a_prompt(mode):
    no_display = {"DISPLAY": "", "WAYLAND_DISPLAY": "", "MPLBACKEND": ""}
    async with served(str(DATA / "plots.ipynb"), env=no_display) as server, server.client(mode) as client:
        result = await client.call_tool("plot", {"slope": 2})
        image = result.content[0]
        assert image.type == "image" and image.mime_type == "image/png"
        assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (
            600,
            300,
        )  # its own size (6x3 in at 100 dpi): only a larger one is scaled down
        table = (await client.read_resource("nb://vars/sales")).contents[0]
        assert table.text == "region,total\nnorth,10\nsouth,20\n"
        as_json = (await client.read_resource("nb://vars/sales.json")).contents[0]
        assert as_json.mime_type == "application/json" and as_json.text.startswith('[{"region":"north","total":10}')
        prompt = await client.get_prompt("summarize", {"region": "north"})
        assert prompt.messages[0].content.text == "Summarize the sales of north."
