"""The adapter over the SDK's real client, in memory, on both protocol eras."""

from __future__ import annotations

import itertools

import anyio
import mcp_types as types
import pytest
from eras import ERAS, client_for
from fusion_mcp_testapp import EchoOut

from fusion_nb.mcp import mcp_server

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ERAS)
def era(request):
    return request.param


async def test_lists_tools_with_schemas_and_annotations(app_probe, era):
    app, _ = app_probe
    async with client_for(mcp_server(app), era) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == {tool.name for tool in app.tools}
    echo = listed["echo"]
    assert echo.description == "Echo the text back."
    assert echo.input_schema["properties"]["text"]["type"] == "string"
    assert echo.input_schema["required"] == ["text"]
    assert echo.output_schema == EchoOut.model_json_schema()
    assert echo.annotations.read_only_hint is True
    assert echo.annotations.idempotent_hint is True
    assert listed["stall"].annotations is None
    assert listed["stall"].output_schema is None


async def test_call_returns_text_and_structured_content(app_probe, era):
    app, _ = app_probe
    async with client_for(mcp_server(app), era) as client:
        result = await client.call_tool("echo", {"text": "hello"})
        picture = await client.call_tool("picture", {})
    assert not result.is_error
    assert result.structured_content == {"result": "hello"}
    assert isinstance(result.content[0], types.TextContent)
    assert '"hello"' in result.content[0].text
    assert isinstance(picture.content[0], types.ImageContent)
    assert picture.content[0].mime_type == "image/png"
    assert app.active_calls == []


async def test_request_info_reaches_context_factory(app_probe, era):
    app, _ = app_probe
    async with client_for(mcp_server(app), era) as client:
        result = await client.call_tool("whoami", {})
    expected = "2025-11-25" if era == "2025-memory" else "2026-07-28"
    assert result.structured_content["protocol"] == expected
    assert result.structured_content["http"] is False
    assert result.structured_content["client"] == "mcp"


async def test_progress_arrives_with_a_token_and_ends_at_100(app_probe, era):
    app, _ = app_probe
    seen: list[float] = []

    async def on_progress(value, total, message):
        seen.append(value)

    async with client_for(mcp_server(app), era) as client:
        result = await client.call_tool("noisy", {}, progress_callback=on_progress)
    assert result.content[0].text == "done"
    assert seen, "no progress notification arrived"
    assert seen[-1] == 100
    assert all(a < b for a, b in itertools.pairwise(seen)), f"progress not strictly increasing: {seen}"


# the 2026 direct path has no wire to observe; test_progress_unit checks that no pump is allocated there
@pytest.mark.parametrize("era", [e for e in ERAS if e != "2026-direct"])
async def test_no_progress_without_a_token(app_probe, era):
    app, _ = app_probe
    messages: list[object] = []

    async def on_message(message):
        messages.append(message)

    async with client_for(mcp_server(app), era, message_handler=on_message) as client:
        await client.call_tool("noisy", {})
        # a call with a token on the same connection proves notifications do reach the handler
        await client.call_tool("noisy", {}, progress_callback=_ignore)
    progress = [m for m in messages if isinstance(m, types.ProgressNotification)]
    assert progress, "the control call's progress did not reach the message handler"
    assert all(m.params.progress_token is not None for m in progress)
    tokens = {m.params.progress_token for m in progress}
    assert len(tokens) == 1, "progress was sent for the call without a token"


async def _ignore(*args):
    pass


async def test_flood_is_coalesced_and_the_last_value_is_sent(app_probe, era):
    app, _ = app_probe
    seen: list[float] = []

    async def on_progress(value, total, message):
        seen.append(value)

    # An interval no run can reach: after the first notification only the flush may send.
    async with client_for(mcp_server(app, progress_interval=3600), era) as client:
        result = await client.call_tool("flood", {}, progress_callback=on_progress)
    assert result.content[0].text == "flooded"
    assert 1 <= len(seen) <= 2, f"{len(seen)} notifications for 1000 yields"
    assert seen[-1] == 100


async def test_flood_with_default_interval_stays_increasing(app_probe, era):
    app, _ = app_probe
    seen: list[float] = []

    async def on_progress(value, total, message):
        seen.append(value)

    async with client_for(mcp_server(app), era) as client:
        await client.call_tool("flood", {}, progress_callback=on_progress)
    assert seen[-1] == 100
    assert len(seen) < 1000
    assert all(a < b for a, b in itertools.pairwise(seen))


async def test_cancelling_the_client_call_aborts_the_engine_call(app_probe, era):
    app, probe = app_probe
    async with client_for(mcp_server(app), era) as client:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "stall", {})
                await probe["entered"].wait()
                group.cancel_scope.cancel()
        with anyio.fail_after(10):
            await probe["cleaned"].wait()  # the handler's finally ran
        assert app.active_calls == []
        again = await client.call_tool("echo", {"text": "still here"})
        assert again.structured_content == {"result": "still here"}


async def test_tool_error_is_an_error_result_with_one_sentence(app_probe, era):
    app, _ = app_probe
    async with client_for(mcp_server(app), era) as client:
        result = await client.call_tool("boom", {})
    assert result.is_error
    text = result.content[0].text
    assert text == "[QUOTA_EXCEEDED] The daily quota is used up. Recovery: Try again tomorrow."
    assert result.structured_content == {
        "error": {"code": "QUOTA_EXCEEDED", "message": "The daily quota is used up.", "recovery": "Try again tomorrow."}
    }


async def test_invalid_input_is_an_error_result_naming_the_field(app_probe, era):
    app, _ = app_probe
    async with client_for(mcp_server(app), era) as client:
        result = await client.call_tool("echo", {"text": 42})
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("[INVALID_INPUT]")
    assert '"text"' in text and "\n" not in text and "Traceback" not in text


async def test_error_on_a_tool_with_output_schema_passes_client_validation(app_probe, era):
    app, _ = app_probe
    async with client_for(mcp_server(app), era) as client:
        await client.list_tools()
        result = await client.call_tool("typed_boom", {})
    assert result.is_error
    assert result.structured_content is None  # {"error": ...} would not match EchoOut
    assert result.content[0].text.startswith("[QUOTA_EXCEEDED]")


async def test_unexpected_exception_is_internal_error_without_traceback(app_probe, era):
    app, _ = app_probe
    async with client_for(mcp_server(app), era) as client:
        result = await client.call_tool("crash", {})
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("[INTERNAL_ERROR]") and "ValueError" in text and "error id" in text
    assert "disk on fire" not in text  # the exception text stays in the server log
    assert "Traceback" not in text and "\n" not in text


async def test_unknown_tool_is_an_error_result(app_probe, era):
    app, _ = app_probe
    async with client_for(mcp_server(app), era) as client:
        result = await client.call_tool("nope", {})
    assert result.is_error
    assert result.content[0].text.startswith('[UNKNOWN_TOOL] There is no tool named "nope"')


async def test_tools_list_changed_after_registering_a_tool(app_probe, era):
    app, _ = app_probe
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    server = mcp_server(app)
    async with client_for(server, era, message_handler=on_message) as client:
        before = {tool.name for tool in (await client.list_tools()).tools}
        assert "late" not in before
        if era == "2025-memory":
            assert client.server_capabilities.tools.list_changed is True
            app.f.action("late").describe("Added later.").handle(_late)
            with anyio.fail_after(10):
                await changed.wait()
        else:  # 2026: change notifications ride a subscriptions/listen stream
            assert client.server_capabilities.tools.list_changed is True
            async with client.listen(tools_list_changed=True) as subscription:
                app.f.action("late").describe("Added later.").handle(_late)
                with anyio.fail_after(10):
                    event = await subscription.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
        after = {tool.name for tool in (await client.list_tools()).tools}
    assert after == before | {"late"}


async def _late(input, ctx):
    return "late"
