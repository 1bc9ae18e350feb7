"""Regression tests for defects a review of ``StreamableEndpoint`` (fusion_nb/mcp/streamable.py) found.

An answer or a cancel naming an odd string id (``"²"``, ``"--1"``, 5,000 digits) was a
``ValueError`` traceback in the server log; it is now an id nothing waits for.

Real loopback uvicorn (``serve()``), raw ``httpx``; asyncio only.
"""

from __future__ import annotations

import anyio
import httpx
import pytest
from http_serving import open_session, serve, server_errors

pytestmark = pytest.mark.anyio

LEGACY = {"MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


# Strings whose characters pass ``str.isdigit()`` (after ``lstrip("-")``) but that ``int()`` refuses:
# a superscript digit, a doubled sign, more digits than Python converts (4300).
ODD_IDS = ["²", "--1", "9" * 5000]


@pytest.mark.parametrize("odd", ODD_IDS, ids=["superscript", "double-minus", "5000-digits"])
@pytest.mark.parametrize("kind", ["result", "error", "cancelled"])
async def test_an_odd_string_id_from_the_client_is_dropped_without_an_asgi_exception(odd, kind):
    """An answer or ``notifications/cancelled`` naming an id nothing waits for is dropped, never a traceback.

    ``_lookup`` turns a digit-looking string id into ``int`` to match ``7`` with ``"7"``;
    ``str.isdigit`` accepts strings ``int`` refuses, so the ``ValueError`` escapes the
    endpoint after the 202 went out (uvicorn logs "Exception in ASGI application") and,
    for ``notifications/cancelled``, the SDK's notification handler never runs.
    """
    if kind == "result":
        body = {"jsonrpc": "2.0", "id": odd, "result": {"action": "decline"}}
    elif kind == "error":
        body = {"jsonrpc": "2.0", "id": odd, "error": {"code": -1, "message": "no"}}
    else:
        body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": odd}}
    async with serve() as served, httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, served)
        with server_errors() as errors:
            posted = await http.post(served.url, json=body, headers=served.headers(**session))
            assert posted.status_code == 202
            params = {"name": "echo", "arguments": {"text": "a"}}
            echo = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
            after = await http.post(served.url, json=echo, headers=served.headers(**session))
            assert after.json()["result"]["structuredContent"] == {"result": "a"}
            await anyio.sleep(0.05)  # the odd POST's task has ended (its 202 came back first): let its log land
        assert errors == [], [record.getMessage() for record in errors]
