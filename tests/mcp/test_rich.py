"""Rich values reach an agent as the notebook would show them: through the SDK's client, in memory and over HTTP.

A figure arrives as a PNG that decodes; a 6000x4000 image is downscaled to 1568 px with its
aspect kept; a 100,000-row table is structured content (columns, a bounded sample, the total)
with no HTML, the whole answer under 1 MiB; an array gives its shape; an HTML-only value gives
bounded text without its style block.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from eras import ERAS, client_for
from http_serving import serve
from PIL import Image
from rich_app import rich_app

from fusion_nb.mcp import mcp_server

pytestmark = pytest.mark.anyio
MIB = 1 << 20


@pytest.fixture
def anyio_backend():
    return "asyncio"


def wire(result: Any) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def decoded(block: dict[str, Any]) -> Image.Image:
    assert block["type"] == "image"
    image = Image.open(io.BytesIO(base64.b64decode(block["data"])))
    assert image.format == {"image/png": "PNG", "image/jpeg": "JPEG"}[block["mimeType"]]
    return image


def check_figure(answer: dict[str, Any]) -> None:
    image = decoded(answer["content"][0])
    assert answer["content"][0]["mimeType"] == "image/png"
    assert max(image.size) <= 1568 and image.size[0] == 2 * image.size[1]  # 8x4 inches
    # and in words, for a reader without the image: what a person reads off it first
    assert answer["content"][1] == {"type": "text", "text": 'Figure, 800x400 px, 1 plot: "Loss" (x: epoch, y: loss)'}


def check_photo(answer: dict[str, Any]) -> None:
    image = decoded(answer["content"][0])
    assert max(image.size) <= 1568
    assert abs(image.size[0] / image.size[1] - 1.5) < 0.01
    assert len(json.dumps(answer)) < MIB


def check_table(answer: dict[str, Any]) -> None:
    structured = answer["structuredContent"]
    assert structured["columns"] == ["id", "name", "score"]
    assert structured["dtypes"]["id"] == "int64"
    assert structured["total_rows"] == 100_000 and structured["cut"] is True
    assert 0 < len(structured["rows"]) <= 50 and structured["rows"][1][:2] == [1, "row"]
    text = answer["content"][0]["text"]
    assert text.startswith("| id | name | score |") and "100000 rows x 3 columns" in text
    assert "<" not in json.dumps(answer)  # no HTML anywhere
    assert len(json.dumps(answer)) < MIB


def check_grid(answer: dict[str, Any]) -> None:
    assert answer["structuredContent"]["shape"] == [300, 200, 3]
    assert answer["structuredContent"]["dtype"] == "float64"
    assert len(json.dumps(answer)) < 100_000


def check_html(answer: dict[str, Any]) -> None:
    (block,) = answer["content"]
    assert block["type"] == "text" and block["text"].startswith("<b>bold</b>")
    assert "<style>" not in block["text"] and "(cut:" in block["text"]
    assert len(json.dumps(answer)) < MIB


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "figure": check_figure,
    "photo": check_photo,
    "table": check_table,
    "grid": check_grid,
    "html": check_html,
}


@pytest.mark.parametrize("era", ERAS)
async def test_rich_values_in_memory(era):
    app = rich_app()
    async with client_for(mcp_server(app), era) as client:
        for name, check in CHECKS.items():
            answer = wire(await client.call_tool(name, {}))
            assert answer["isError"] is False, answer
            check(answer)
    await app.aclose()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_rich_values_over_http(mode):
    async with serve(rich_app()) as served, served.client(mode) as client:
        for name, check in CHECKS.items():
            check(wire(await client.call_tool(name, {})))


WITHOUT_DATA = r"""
import sys
for name in ("matplotlib", "pandas", "PIL", "numpy"):
    sys.modules[name] = None  # import fails as if the `data` extra were not installed
import asyncio, json, struct, zlib
from mcp import Client
from fusion_nb import Fusion
from fusion_nb.mcp import mcp_server

def png(width, height, extra=0):
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"tEXt", b"x" * extra) + chunk(b"IEND", b"")

class Small:
    def _repr_png_(self): return png(10, 10)
class Huge:
    def _repr_png_(self): return png(6000, 4000)

app = Fusion("plain")
app.f.query("small").handle(lambda i, c: Small())
app.f.query("huge").handle(lambda i, c: Huge())
app.f.query("md").handle(lambda i, c: type("M", (), {"_repr_markdown_": lambda self: "# hi"})())
app.f.query("hello").handle(lambda i, c: "hello")

async def main():
    async with Client(mcp_server(app)) as client:
        out = {}
        for name in ("small", "huge", "md", "hello"):
            result = await client.call_tool(name, {})
            out[name] = [block.model_dump(exclude_none=True) for block in result.content]
        print(json.dumps(out))
asyncio.run(main())
"""


def test_without_the_data_extra_everything_else_works():
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", WITHOUT_DATA], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["small"][0]["type"] == "image"  # within bounds: passed through
    assert out["huge"][0]["type"] == "text" and "6000x4000 px" in out["huge"][0]["text"]
    assert "without Pillow" in out["huge"][0]["text"]
    assert out["md"] == [{"type": "text", "text": "# hi"}]
    assert out["hello"] == [{"type": "text", "text": "hello"}]
