"""Resources and prompts through the SDK's client: listing, reading, templates, prompts, and bad input."""

from __future__ import annotations

import base64
import io
import json
import re

import pandas as pd
import pytest
from eras import ERAS, client_for
from http_serving import serve
from mcp import MCPError
from PIL import Image

from fusion_nb import Fusion
from fusion_nb.engine import ToolError
from fusion_nb.mcp import mcp_server

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]
MIB = 1 << 20
SHARED = {"df": pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})}


def catalog_app(app: Fusion | None = None) -> Fusion:
    app = app or Fusion("catalog-test")
    app.resource("config://greeting", "hello", description="A fixed greeting.")

    @app.resource("data://table", mime_type="text/csv")
    def table():
        """A small table."""
        return SHARED["df"]

    @app.resource("vars://{name}")
    def variable(name):
        if name not in SHARED:
            raise ToolError("INVALID_PARAMS", f"{name!r} is not shared; shared: {sorted(SHARED)}.")
        return SHARED[name]

    app.resource("pics://figure", _figure())
    app.prompt("explain", "Explain {topic} to a {audience}.", description="Explain something.")
    return app


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2])
    plt.close(fig)
    return fig


async def check(client) -> None:
    listed = {str(r.uri): r for r in (await client.list_resources()).resources}
    assert set(listed) == {"config://greeting", "data://table", "pics://figure"}
    assert listed["data://table"].description == "A small table."
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["vars://{name}"]
    greeting = (await client.read_resource("config://greeting")).contents[0]
    assert greeting.text == "hello"
    table = (await client.read_resource("data://table")).contents[0]
    assert table.mime_type == "text/csv" and table.text == "a,b\n1,x\n2,y\n"
    via_template = (await client.read_resource("vars://df")).contents[0]
    assert via_template.text == table.text
    figure = (await client.read_resource("pics://figure")).contents[0]
    assert figure.mime_type == "image/png" and Image.open(io.BytesIO(base64.b64decode(figure.blob))).format == "PNG"
    prompts = (await client.list_prompts()).prompts
    assert [(p.name, [a.name for a in p.arguments]) for p in prompts] == [("explain", ["topic", "audience"])]
    got = await client.get_prompt("explain", {"topic": "MCP", "audience": "child"})
    assert got.messages[0].content.text == "Explain MCP to a child."
    for bad, sentence in [
        (client.read_resource("nope://x"), "Unknown resource 'nope://x'; this server offers: config://greeting"),
        (client.read_resource("vars://os"), "'os' is not shared; shared: ['df']."),
        (client.get_prompt("explain", {"topic": "MCP"}), "Prompt 'explain' needs the argument 'audience'"),
        (client.get_prompt("nope", {}), "Unknown prompt 'nope'; the prompts are: 'explain'."),
    ]:
        with pytest.raises(MCPError) as raised:
            await bad
        assert sentence in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("era", ERAS)
async def test_resources_and_prompts_in_memory(era):
    app = catalog_app()
    async with client_for(mcp_server(app), era) as client:
        await check(client)
    await app.aclose()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_resources_and_prompts_over_http(mode):
    async with serve(catalog_app()) as served, served.client(mode) as client:
        await check(client)


def bounded_app() -> Fusion:
    import numpy as np

    app = Fusion("bounded-resources")
    n = 100_000
    rows = pd.DataFrame({"id": range(n), "name": ['say "hi"'] * n, "score": np.linspace(0, 1, n)})
    app.resource("data://rows.csv", rows)
    app.resource("data://rows.json", rows, mime_type="application/json")
    app.resource("data://small.json", SHARED["df"], mime_type="application/json")
    app.resource("pics://photo", Image.effect_noise((6000, 4000), 64).convert("RGB"))
    return app


def wire_size(result) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


@pytest.mark.parametrize("era", ERAS)
async def test_a_resource_read_is_bounded_and_says_what_it_cut(era):
    """A table read whole would be megabytes: its first rows within 1 MiB and how many of all; an image downscaled."""
    app = bounded_app()
    async with client_for(mcp_server(app), era) as client:
        small = (await client.read_resource("data://small.json")).contents
        assert [(c.mime_type, c.text) for c in small] == [("application/json", '[{"a":1,"b":"x"},{"a":2,"b":"y"}]')]
        as_csv = await client.read_resource("data://rows.csv")
        (csv,) = as_csv.contents
        assert wire_size(as_csv) < MIB and csv.text.startswith("id,name,score\n0,")
        cut = re.search(r"# cut: rows 0-(\d+) of 100000; the next: (\S+) \(over the answer bound\)\n$", csv.text)
        assert cut is not None, csv.text[-200:]
        last = int(cut.group(1))
        assert csv.text.count("\n") == last + 3  # the header, rows 0..last, the cut line
        assert cut.group(2) == f"data://rows.csv?rows={last + 1}-{2 * last + 1}"
        (following,) = (await client.read_resource(cut.group(2))).contents
        assert following.text.startswith(f"id,name,score\n{last + 1},"), following.text[:100]
        (tail,) = (await client.read_resource("data://rows.csv?rows=99998-200000")).contents
        assert tail.text.startswith("id,name,score\n99998,") and tail.text.endswith("# rows 99998-99999 of 100000\n")
        as_json = await client.read_resource("data://rows.json")
        records, note = as_json.contents
        assert wire_size(as_json) < MIB, "the records' quotes are escaped again on the wire"
        assert json.loads(records.text)[1]["name"] == 'say "hi"'
        shown = len(json.loads(records.text))
        assert note.mime_type == "text/plain"
        nxt = f"data://rows.json?rows={shown}-{2 * shown - 1}"
        assert note.text == f"cut: rows 0-{shown - 1} of 100000; the next: {nxt} (over the answer bound)"
        records, _ = (await client.read_resource(nxt)).contents
        assert json.loads(records.text)[0]["id"] == shown
        photo = await client.read_resource("pics://photo")
        image = Image.open(io.BytesIO(base64.b64decode(photo.contents[0].blob)))
        assert max(image.size) <= 1568 and abs(image.size[0] / image.size[1] - 1.5) < 0.01 and wire_size(photo) < MIB
    await app.aclose()


def test_every_resource_read_is_bounded_and_a_self_containing_value_is_one_sentence():
    """Issue 44, 3 and 8: strings, lists, dicts and bytes over the bound are cut (saying so), never sent whole."""
    from fusion_nb.mcp.catalog import contents
    from fusion_nb.mcp.rich import Limits

    limits = Limits(max_bytes=64 * 1024)
    wide = "é" * 200_000  # (not ASCII: its size in bytes is not its length)
    (text,) = contents("v://s", wide, None, limits)
    assert len(text["text"].encode()) < 64 * 1024 and "cut: the value is 200000 characters" in text["text"]
    numbers, note = contents("v://l", list(range(1_000_000)), None, limits)
    assert json.loads(numbers["text"])[:3] == [0, 1, 2] and len(numbers["text"]) < 64 * 1024
    assert note["mimeType"] == "text/plain" and note["text"].startswith("cut: this list is over")
    loop: dict = {"a": 1}
    loop["self"] = loop
    assert contents("v://d", loop, None, limits) == [
        {
            "uri": "v://d",
            "mimeType": "text/plain",
            "text": "(This dict contains itself, so it cannot be sent as JSON; share a part of it.)",
        }
    ]
    (blob,) = contents("v://b", bytes(100_000), None, limits)
    assert blob["text"].startswith("(binary data of 100000 bytes: over the 65536-byte answer bound, not sent;")
    assert contents("v://t", (1, "two", None), None, limits) == [
        {"uri": "v://t", "mimeType": "application/json", "text": '[1, "two", null]'}
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_a_part_of_a_table_or_list_is_read_by_rows_and_a_bad_range_is_one_sentence(era):
    """Issue 51: ``URI?rows=FIRST-LAST`` reads that part; anything else gets one sentence naming the form."""
    app = Fusion("parts")
    app.resource("data://t", pd.DataFrame({"a": range(10)}))
    app.resource("data://l", list(range(10)))
    app.resource("data://s", "just text")
    async with client_for(mcp_server(app), era) as client:
        (part,) = (await client.read_resource("data://t?rows=3-4")).contents
        assert part.text == "a\n3\n4\n# rows 3-4 of 10; the next: data://t?rows=5-6\n"
        items, note = (await client.read_resource("data://l?rows=8-20")).contents
        assert json.loads(items.text) == [8, 9] and note.text == "items 8-9 of 10"
        for uri, said in (
            ("data://t?rows=4-3", "rows= takes FIRST-LAST, row numbers from 0 with FIRST <= LAST"),
            ("data://t?rows=-1-3", "rows= takes FIRST-LAST"),
            ("data://t?rows=" + "9" * 5000, "sent '" + "9" * 60 + "'."),
            ("data://s?rows=0-1", "data://s is a str: rows= reads a part of a table or list only."),
            ("data://nothing?rows=0-1", "Unknown resource 'data://nothing?rows=0-1'"),
        ):
            with pytest.raises(MCPError) as raised:
                await client.read_resource(uri)
            assert said in raised.value.error.message and len(raised.value.error.message) < 400, raised.value
    await app.aclose()
