"""An abort that starts on the server side (a widget's Cancel, the interrupt button, a
timeout, shutdown) answers the MCP client with a CANCELLED error result."""

import anyio
import pytest
from eras import ERAS, client_for

from fusion_nb.mcp import mcp_server

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("era", ERAS)
async def test_server_side_cancel_answers_the_client(app_probe, era):
    app, probe = app_probe
    results = []
    async with client_for(mcp_server(app), era) as client, anyio.create_task_group() as group:

        async def calling():
            results.append(await client.call_tool("stall", {}))

        group.start_soon(calling)
        with anyio.fail_after(10):
            await probe["entered"].wait()
        (call,) = app.active_calls
        call.cancel()
    (result,) = results
    assert result.is_error and result.content[0].text.startswith('[CANCELLED] The call to tool "stall" was cancelled')
    assert probe["cleaned"].is_set()
