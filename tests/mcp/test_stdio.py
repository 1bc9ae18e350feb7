"""The app served over stdio by a real subprocess (``python -u -m fusion_nb.mcp.stdio``), both eras."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
REPO = HERE.parent.parent
MODES = {"2025-stdio": "legacy", "2026-stdio": "auto"}


def stdio_client(era: str, **options) -> Client:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-u", "-m", "fusion_nb.mcp.stdio", "stdio_app:app"],
        env={"PYTHONPATH": f"{HERE}:{REPO}"},
        cwd=str(REPO),
    )
    return Client(params, mode=MODES[era], **options)


@pytest.fixture(params=list(MODES))
def era(request):
    return request.param


async def test_list_call_progress_and_errors(era):
    seen: list[float] = []

    async def on_progress(value, total, message):
        seen.append(value)

    async with stdio_client(era) as client:
        assert client.protocol_version == ("2025-11-25" if era == "2025-stdio" else "2026-07-28")
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert listed["echo"].annotations.read_only_hint is True
        assert listed["echo"].output_schema is not None
        result = await client.call_tool("echo", {"text": "over stdio"})
        assert result.structured_content == {"result": "over stdio"}
        noisy = await client.call_tool("noisy", {}, progress_callback=on_progress)
        assert noisy.content[0].text == "done"
        failed = await client.call_tool("boom", {})
        invalid = await client.call_tool("echo", {})
    assert seen and seen[-1] == 100 and all(a < b for a, b in itertools.pairwise(seen))
    assert failed.is_error and failed.content[0].text.startswith("[QUOTA_EXCEEDED] The daily quota is used up.")
    assert invalid.is_error and invalid.content[0].text.startswith("[INVALID_INPUT]")


async def test_cancelling_the_call_runs_the_handlers_cleanup(era):
    entered = anyio.Event()

    async def on_progress(value, total, message):
        if message == "entered":
            entered.set()

    async with stdio_client(era) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("stall", {}, progress_callback=on_progress))
            with anyio.fail_after(20):
                await entered.wait()
            group.cancel_scope.cancel()
        with anyio.fail_after(20):
            cleaned = await client.call_tool("cleaned", {})  # answers once stall's finally has run
    assert cleaned.content[0].text == "cleaned"


async def test_refund_flow_and_unsupported_elicitation(era):
    from mcp import types

    async def approve(context, params):
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with stdio_client(era, elicitation_callback=approve) as client:
        result = await client.call_tool("billing.refund", {"id": "inv-7"})
    assert result.content[0].text == "refunded inv-7"
    async with stdio_client(era) as client:
        refused = await client.call_tool("billing.refund", {"id": "inv-7"})
    assert refused.is_error and refused.content[0].text.startswith("[ELICITATION_UNSUPPORTED]")
