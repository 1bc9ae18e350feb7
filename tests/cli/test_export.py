"""``fusion-nb export``: every teaching notebook that defines tools, exported and served both ways.

Both the notebook and its module are served by ``fusion-nb serve`` over stdio and
called with the SDK client: the tool lists (schemas, annotations, descriptions) and
the results of one call per tool must be identical.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from served import DATA, REPO, cli_env, run_cli

# twelve server starts; the client side is covered on trio elsewhere
pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


# 07 serves notebook 01 from a subprocess and defines no tools of its own
TEACHING = sorted(path for path in (REPO / "notebooks").glob("[0-9]*.ipynb") if not path.name.startswith("07-"))


def sample_arguments(schema: dict) -> dict:
    """One valid value per required field (the same for both sides)."""
    values = {"string": "x", "integer": 1, "number": 1.0, "boolean": True}
    arguments = {}
    for key in schema.get("required", ()):
        prop = schema["properties"][key]
        arguments[key] = prop["enum"][0] if "enum" in prop else values[prop.get("type", "string")]
    return arguments


def normalised(result) -> dict:
    """A call result without what legitimately differs between two processes (error ids)."""
    dumped = result.model_dump(mode="json", exclude_none=True)
    return {key: re.sub(r"\b[0-9a-f]{8,}\b", "ID", str(value)) for key, value in dumped.items()}


async def served_tools(source: str) -> tuple[list[dict], dict[str, dict]]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fusion_nb", "serve", source], env=cli_env(), cwd=str(REPO)
    )
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        listing = [tool.model_dump(mode="json", exclude_none=True) for tool in tools]
        results = {}
        for tool in tools:
            try:
                result = await client.call_tool(tool.name, sample_arguments(tool.input_schema))
            except MCPError as refused:  # (2026: a tool that needs input this client cannot give is -32021)
                results[tool.name] = {"refused": refused.error.model_dump(mode="json", exclude_none=True)}
                continue
            results[tool.name] = normalised(result)
    return listing, results


@pytest.mark.parametrize("notebook", TEACHING, ids=[path.name[:2] for path in TEACHING])
async def test_the_exported_module_serves_the_same_tools_with_the_same_results(notebook: Path, tmp_path):
    module = tmp_path / "tools.py"
    done = run_cli("export", str(notebook), "-o", str(module))
    assert done.returncode == 0, done.stderr
    compile(module.read_text(), str(module), "exec")
    from_notebook = await served_tools(str(notebook))
    from_module = await served_tools(str(module))
    assert from_notebook[0], "the notebook defines tools"
    assert from_module[0] == from_notebook[0]
    assert from_module[1] == from_notebook[1]


async def served_prompts(source: str) -> list[dict]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fusion_nb", "serve", source], env=cli_env(), cwd=str(REPO)
    )
    async with Client(params) as client:
        prompts = (await client.list_prompts()).prompts
        return [prompt.model_dump(mode="json", exclude_none=True) for prompt in prompts]


async def test_a_prompt_cell_is_exported_as_the_prompt_it_defines(tmp_path):
    notebook = next((REPO / "notebooks").glob("08-*.ipynb"))
    module = tmp_path / "tools.py"
    assert run_cli("export", str(notebook), "-o", str(module)).returncode == 0
    from_notebook = await served_prompts(str(notebook))
    assert from_notebook, "notebook 08 defines a prompt"
    assert await served_prompts(str(module)) == from_notebook


def test_skip_rule_and_rewrites(tmp_path):
    module = tmp_path / "billing.py"
    done = run_cli(
        "export", str(DATA / "destructive.ipynb"), "-o", str(module), FUSION_NB_TEST_LEDGER=str(tmp_path / "l")
    )
    assert done.returncode == 0, done.stderr
    text = module.read_text()
    assert "await billing_refund" not in text  # the demo cells are left out, named in comments
    assert "# cell 6 left out (calls tool 'billing.refund'" in text
    assert "# cell 7 left out (tagged fusion:skip)" in text
    assert (
        '@f.mutation("billing.refund").with_string("id", "Invoice ID").handle\ndef billing_refund(input, ctx):' in text
    )
    assert "top-level await; kept as a comment" in done.stderr  # the fusion:run cell cannot run in a module
    assert "%load_ext" not in text and "%fusion serve" not in text


def test_return_in_an_async_generator_becomes_respond(tmp_path):
    module = tmp_path / "report.py"
    done = run_cli("export", str(REPO / "notebooks" / "02-streaming-progress.ipynb"), "-o", str(module))
    assert done.returncode == 0, done.stderr
    assert 'yield respond(f"report for {input.quarter}: 3 charts"); return' in module.read_text()
