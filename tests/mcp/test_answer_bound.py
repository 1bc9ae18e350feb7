"""Every answer is bounded by its app's ``answer_limits`` (1 MiB and 1568 px by default): through the SDK's client.

A huge ``str``, a huge dict or list, and a huge model are cut with a sentence saying what was
cut (the JSON's structured content is left out: it cannot be cut mid-structure); within the
bound they pass unchanged. An app with a smaller bound cuts at it, rich values included (an
image is downscaled to its ``max_side``); an image with JSON beside it stays within the bound
as a whole. A bad bound is refused in one sentence.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from eras import ERAS, client_for
from http_serving import serve
from PIL import Image
from pydantic import BaseModel
from test_rich import wire

from fusion_nb import AnswerLimits, Fusion
from fusion_nb.engine import DEFAULT_LIMITS, present
from fusion_nb.mcp import mcp_server
from fusion_nb.mcp.rich import Limits, to_content

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]
MIB = 1 << 20


def wire_bytes(answer: Any) -> int:
    """The answer's UTF-8 JSON size, as the wire carries it."""
    return len(json.dumps(answer, ensure_ascii=False).encode())


class Rows(BaseModel):
    rows: list[str]


class Photo:
    """A value with a PNG and a JSON representation (as IPython would show it)."""

    def __init__(self, width: int, height: int, items: int) -> None:
        self.width, self.height, self.items = width, height, items

    def _repr_png_(self) -> bytes:
        out = io.BytesIO()
        Image.effect_noise((self.width, self.height), 90).convert("RGB").save(out, "PNG")
        return out.getvalue()

    def _repr_json_(self) -> dict[str, Any]:
        return {"values": [f"value {n}" for n in range(self.items)]}


def bound_app(**options: Any) -> Fusion:
    app = Fusion("bound", **options)

    @app.f.query("text").with_integer("size").handle
    async def big_text(input, ctx):
        return "é" * input.size

    @app.f.query("mapping").with_integer("size").handle
    async def mapping(input, ctx):
        return {f"key {n}": "v" * 90 for n in range(input.size)}

    @app.f.query("listing").with_integer("size").handle
    async def listing(input, ctx):
        return ["x" * 90] * input.size

    @app.f.query("model").with_integer("size").handle
    async def model(input, ctx):
        return Rows(rows=["r" * 90] * input.size)

    @app.f.query("photo").with_integer("items").handle
    async def photo(input, ctx):
        return Photo(3000, 2000, input.items)

    return app


async def check(client, bound: int) -> None:
    small = wire(await client.call_tool("text", {"size": 100}))
    assert small["content"] == [{"type": "text", "text": "é" * 100}]
    for name in ("mapping", "listing", "model"):
        fits = wire(await client.call_tool(name, {"size": 10}))
        assert "structuredContent" in fits and "cut" not in fits["content"][0]["text"], name
    for name, size in (("text", bound), ("mapping", bound // 50), ("listing", bound // 50), ("model", bound // 50)):
        answer = wire(await client.call_tool(name, {"size": size}))
        assert answer["isError"] is False, answer
        (block,) = answer["content"]
        assert f"over the {bound}-byte answer bound" in block["text"], name
        assert wire_bytes(answer) <= bound + 1024, name
        if name != "text":
            assert "structuredContent" not in answer and "structured content is left out" in block["text"]
    photo = wire(await client.call_tool("photo", {"items": bound // 20}))
    image, note = photo["content"][0], photo["content"][1]
    assert image["type"] == "image" and "structuredContent" not in photo
    assert "over the answer bound" in note["text"]
    assert wire_bytes(photo) <= bound + 4096


@pytest.mark.parametrize("era", ERAS)
async def test_default_bound_in_memory(era):
    app = bound_app()
    assert app.answer_limits == AnswerLimits() == DEFAULT_LIMITS
    assert (DEFAULT_LIMITS.max_bytes, DEFAULT_LIMITS.max_side) == (MIB, 1568)
    async with client_for(mcp_server(app), era) as client:
        await check(client, MIB)
    await app.aclose()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_smaller_bound_over_http(mode):
    app = bound_app(answer_limits=AnswerLimits(max_bytes=64_000, max_side=400))
    async with serve(app) as served, served.client(mode) as client:
        await check(client, 64_000)
        small = wire(await client.call_tool("photo", {"items": 3}))
        image = Image.open(io.BytesIO(base64.b64decode(small["content"][0]["data"])))
        assert max(image.size) <= 400 and small["structuredContent"]["values"][2] == "value 2"
        assert wire_bytes(small) <= 64_000 + 4096


def test_an_image_and_its_json_share_the_bound():
    photo = Photo(3000, 2000, 40_000)
    limits = Limits(max_bytes=200_000)
    content, structured = to_content({"image/png": photo._repr_png_(), "application/json": photo._repr_json_()}, limits)
    assert structured is None and wire_bytes(content) <= 200_000


def test_an_svg_over_the_bound_is_named_not_sent():
    svg = "<svg>" + "<g/>" * 200_000 + "</svg>"
    content, structured = to_content({"image/svg+xml": svg}, Limits(max_bytes=200_000))
    assert content == [{"type": "text", "text": f"(an SVG image of {len(svg)} characters, too large to send)"}]
    assert structured is None


def test_the_str_fast_path_is_unchanged_within_the_bound():
    text = "a" * (MIB // 4)
    assert present(text) == ([{"type": "text", "text": text}], None)
    cut, _ = present("a" * (MIB + 1))
    assert len(cut[0]["text"].encode()) <= MIB and "over the 1048576-byte answer bound" in cut[0]["text"]


def test_a_rich_presenter_is_asked_only_for_values_the_engine_has_no_rule_for():
    """The fast path: a str, a dict, a list, a number, bytes or a model never reach an installed rich presenter."""
    from fusion_nb.engine import use_presenter

    asked: list[Any] = []
    remove = use_presenter(lambda value: asked.append(value))
    try:
        for value in ("hi", {"a": 1}, [1], 3, b"\x00", Rows(rows=["r"]), None):
            present(value)
        assert asked == []
        odd = object()
        present(odd)
        assert asked == [odd]
    finally:
        remove()


@pytest.mark.parametrize(
    ("options", "sentence"),
    [
        ({"max_bytes": 10}, "AnswerLimits max_bytes must be a whole number of at least 1024, not 10."),
        ({"max_side": "big"}, "AnswerLimits max_side must be a whole number of at least 16, not 'big'."),
        ({"max_bytes": 2.5e6}, "AnswerLimits max_bytes must be a whole number of at least 1024, not 2500000.0."),
    ],
)
def test_a_bad_bound_is_refused_in_one_sentence(options, sentence):
    with pytest.raises(ValueError) as raised:
        AnswerLimits(**options)
    assert str(raised.value) == sentence


def test_answer_limits_must_be_answer_limits():
    with pytest.raises(TypeError) as raised:
        Fusion("bad", answer_limits=1 << 20)  # type: ignore[arg-type]
    assert str(raised.value) == "answer_limits must be an AnswerLimits, not int."
