"""``completion/complete`` for prompt arguments and resource-template placeholders, with the SDK's client.

A definition's ``complete(argument, value, context)`` (sync or async) decides; without one, an
argument annotated ``Literal[...]`` or with an ``Enum`` completes by itself. On every era in
memory (asyncio and trio).
"""

from __future__ import annotations

import enum
from typing import Any, Literal

import mcp_types as types
import pytest
from eras import ERAS, client_for
from mcp.shared.exceptions import MCPError

from fusion_nb import Fusion
from fusion_nb.engine import MAX_COMPLETIONS
from fusion_nb.mcp import mcp_server

pytestmark = pytest.mark.anyio


class Color(enum.Enum):
    RED = "red"
    ROSE = "rose"
    BLUE = "blue"


def completing_app() -> Fusion:
    app = Fusion("complete-test")

    @app.prompt("paint")
    def paint(color: Color, finish: Literal["matte", "metallic", "gloss"] = "matte", note: str = "") -> str:
        return f"Paint it {color} ({finish}). {note}"

    async def cities(argument: str, value: str, context: Any) -> list[str]:
        country = context.get("country", "")
        known = {"fr": ["paris", "pau", "lyon"], "it": ["pisa", "roma"]}.get(country, [])
        return [city for city in known if city.startswith(value)]

    app.prompt("visit", "Visit {city} in {country}", complete=cities)

    @app.resource("nb://rows/{table}", complete=lambda argument, value, context: (f"t{n}" for n in range(500)))
    def rows(table: str) -> str:
        return table

    @app.resource("nb://broken/{x}", complete=lambda argument, value, context: 1 / 0)
    def broken(x: str) -> str:
        return x

    return app


async def completed(client: Any, ref: Any, name: str, value: str, **context: str) -> types.Completion:
    result = await client.complete(ref, {"name": name, "value": value}, context or None)
    return result.completion


@pytest.mark.parametrize("era", ERAS)
async def test_prompt_and_template_arguments_complete(era: str) -> None:
    async with client_for(mcp_server(completing_app()), era) as client:
        assert client.server_capabilities.completions is not None
        paint = types.PromptReference(name="paint")
        assert (await completed(client, paint, "color", "r")).values == ["red", "rose"]  # an Enum, by itself
        assert (await completed(client, paint, "finish", "m")).values == ["matte", "metallic"]  # a Literal
        assert (await completed(client, paint, "note", "")).values == []  # free text: nothing to offer
        visit = types.PromptReference(name="visit")
        assert (await completed(client, visit, "city", "p", country="fr")).values == ["paris", "pau"]
        many = await completed(client, types.ResourceTemplateReference(uri="nb://rows/{table}"), "table", "")
        assert (len(many.values), many.total, many.has_more) == (MAX_COMPLETIONS, 500, True)


@pytest.mark.parametrize("era", ["2025-memory", "2026-direct"])
async def test_bad_references_and_failing_completers_answer_one_sentence(era: str) -> None:
    async with client_for(mcp_server(completing_app()), era) as client:
        with pytest.raises(MCPError) as unknown:
            await completed(client, types.PromptReference(name="nope"), "x", "")
        assert unknown.value.error.code == types.INVALID_PARAMS
        assert unknown.value.error.message == "Unknown prompt 'nope'; the prompts are: 'paint', 'visit'."
        with pytest.raises(MCPError) as no_template:
            await completed(client, types.ResourceTemplateReference(uri="nb://nope/{x}"), "x", "")
        assert "Unknown resource template 'nb://nope/{x}'" in no_template.value.error.message
        with pytest.raises(MCPError) as failed:
            await completed(client, types.ResourceTemplateReference(uri="nb://broken/{x}"), "x", "")
        assert failed.value.error.message == "Completing argument 'x' failed with ZeroDivisionError."
