"""Rich values reach an agent as the notebook would show them: through the SDK's client, in memory and over HTTP.

A figure arrives as a PNG that decodes; a 6000x4000 image is downscaled to 1568 px with its
aspect kept; a 100,000-row table is structured content (columns, a bounded sample, the total)
with no HTML, the whole answer under 1 MiB; an array gives its shape; an HTML-only value gives
bounded text without its style block; SVG is an embedded resource, JSON structured content,
markdown or a readable repr wins over HTML, and a tool's own ``present(fn)`` wins over them all.
Outside a kernel, serving imports none of matplotlib, pandas, PIL or numpy for values that did
not bring them; without the ``data`` extra everything else works.
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
from rich_app import SVG, rich_app

from fusion_nb.mcp import mcp_server

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]
MIB = 1 << 20


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


def check_poster(answer: dict[str, Any]) -> None:
    image = decoded(answer["content"][0])
    assert image.size == (1568, 1045), "a 6000x4000 px figure drawn at 1568 px, its aspect kept"
    assert answer["content"][1]["text"].startswith("Figure, 6000x4000 px, 1 plot")


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
    assert answer["structuredContent"]["dtype"] == "float64" and answer["structuredContent"]["cut"] is True
    sample = answer["structuredContent"]["sample"]
    assert (len(sample), len(sample[0]), len(sample[0][0])) == (4, 4, 3)  # the leading corner, <= 100 items
    assert "sample of the first 48 of 180000 items" in answer["content"][0]["text"]
    assert len(json.dumps(answer)) < 100_000


def check_html(answer: dict[str, Any]) -> None:
    (block,) = answer["content"]
    assert block["type"] == "text" and block["text"].startswith("<b>bold</b>")
    assert "<style>" not in block["text"] and "(cut:" in block["text"]
    assert len(json.dumps(answer)) < MIB


def check_vector(answer: dict[str, Any]) -> None:
    resource = {"uri": "data:image/svg+xml", "mimeType": "image/svg+xml", "text": SVG}
    assert answer["content"] == [{"type": "resource", "resource": resource}]  # no "<Vector object at 0x...>"


def check_described(answer: dict[str, Any]) -> None:
    assert answer["content"] == [{"type": "text", "text": "Described(3 rows)"}]


def check_documented(answer: dict[str, Any]) -> None:
    assert answer["content"] == [{"type": "text", "text": "**3 rows**"}]


def check_measured(answer: dict[str, Any]) -> None:
    assert answer["structuredContent"] == {"rows": 3, "columns": ["a", "b"]}
    assert json.loads(answer["content"][0]["text"]) == answer["structuredContent"]


def check_presented(answer: dict[str, Any]) -> None:
    assert answer["content"] == [{"type": "text", "text": "3 rows, as the tool presents them"}]
    assert "structuredContent" not in answer  # the tool's present(fn) wins over the table presenter


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "figure": check_figure,
    "poster": check_poster,
    "photo": check_photo,
    "table": check_table,
    "grid": check_grid,
    "html": check_html,
    "vector": check_vector,
    "described": check_described,
    "documented": check_documented,
    "measured": check_measured,
    "presented": check_presented,
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


def test_a_series_is_presented_as_a_one_column_table():
    import pandas as pd

    from fusion_nb.mcp.rich import Limits, Presenter

    presented = Presenter(limits=Limits(rows=2))(pd.Series([1.5, 2.5, 3.5], name="score"))
    assert presented is not None
    content, structured = presented
    assert structured == {
        "columns": ["score"],
        "dtypes": {"score": "float64"},
        "rows": [[1.5], [2.5]],
        "total_rows": 3,
        "total_columns": 1,
        "cut": True,
    }
    table = "| score |\n|---|\n| 1.5 |\n| 2.5 |"
    assert content[0]["text"] == table + "\n\n3 rows x 1 columns; the first 2 rows shown"  # (only what was cut)


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
app.resource("config://limits", {"rows": 20})
app.prompt("explain", "Explain {topic}.")

async def main():
    async with Client(mcp_server(app)) as client:
        out = {}
        for name in ("small", "huge", "md", "hello"):
            result = await client.call_tool(name, {})
            out[name] = [block.model_dump(exclude_none=True) for block in result.content]
        out["resource"] = (await client.read_resource("config://limits")).contents[0].text
        out["prompt"] = (await client.get_prompt("explain", {"topic": "MCP"})).messages[0].content.text
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
    assert json.loads(out["resource"]) == {"rows": 20} and out["prompt"] == "Explain MCP."


NOTHING_BROUGHT = r"""
import asyncio, base64, json, sys
from mcp import Client
from fusion_nb import Fusion
from fusion_nb.mcp import mcp_server

class Note:
    def _repr_markdown_(self): return "*note*"
class Dot:
    def _repr_png_(self): return base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAACAAAFAAEA+Lb4DgAAAABJRU5ErkJggg==")

app = Fusion("plain")
app.f.query("text").handle(lambda i, c: "hello")
app.f.query("mapping").handle(lambda i, c: {"a": [1, 2]})
app.f.query("note").handle(lambda i, c: Note())
app.f.query("dot").handle(lambda i, c: Dot())
app.f.query("thing").handle(lambda i, c: object())
app.resource("config://limits", {"rows": 20})

async def main():
    async with Client(mcp_server(app)) as client:
        kinds = {}
        for tool in ("text", "mapping", "note", "dot", "thing"):
            kinds[tool] = (await client.call_tool(tool, {})).content[0].type
        await client.read_resource("config://limits")
    loaded = sorted(name for name in ("matplotlib", "pandas", "PIL", "numpy") if name in sys.modules)
    print(json.dumps({"kinds": kinds, "loaded": loaded}))
asyncio.run(main())
"""


def test_serving_imports_no_data_library_a_value_did_not_bring():
    """Installed or not, matplotlib, pandas, PIL and numpy stay unimported while no value brings them."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", NOTHING_BROUGHT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["kinds"] == {"text": "text", "mapping": "text", "note": "text", "dot": "image", "thing": "text"}
    assert out["loaded"] == [], f"imported though no value brought them: {out['loaded']}"
