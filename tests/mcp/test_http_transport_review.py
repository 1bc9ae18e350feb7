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

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

LEGACY = {"MCP-Protocol-Version": "2025-11-25"}


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


async def test_a_listen_request_is_checked_once_by_the_sdks_entry_not_first_by_the_endpoint(monkeypatch):
    """A ``subscriptions/listen`` POST goes to the SDK's entry with its body before any check of the endpoint's.

    The endpoint used to run the transport checks itself (Host and Origin, Accept, the
    body) and then replay the body into the SDK's entry, which ran them again.
    """
    from test_http_wire import MODERN, modern_request

    async with serve() as served, httpx.AsyncClient(timeout=10) as http:
        security = served.asgi.endpoint.security
        checked: list[str] = []
        validate = security.validate_request

        async def counting(request, is_post=False):
            checked.append(request.headers.get("mcp-method", ""))
            return await validate(request, is_post=is_post)

        monkeypatch.setattr(security, "validate_request", counting)
        modern = {"MCP-Protocol-Version": MODERN}
        listen = modern_request("subscriptions/listen", 1, notifications={"toolsListChanged": True})
        refused = await http.post(
            served.url,
            json=listen,
            headers=served.headers(**modern, **{"Mcp-Method": "subscriptions/listen"}, Accept="application/json"),
        )
        assert refused.status_code == 406  # the SDK entry's refusal
        listed = await http.post(
            served.url,
            json=modern_request("tools/list", 2),
            headers=served.headers(**modern, **{"Mcp-Method": "tools/list"}),
        )
        assert listed.status_code == 200
    assert checked == ["tools/list"]
