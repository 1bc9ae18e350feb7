"""One token must not lock the others out (issue 29, 7): sessions and listen streams are counted per owner.

Two named tokens on one server. "alice" opens 2025 sessions and 2026
``subscriptions/listen`` streams until refused; the refusal is ``503`` with
``Retry-After``, and "bob" is still served both. Before: the limits were global, so
alice holding ``max_sessions`` sessions (or the 1,024 listen streams) refused bob too.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from reliability_served import thread_served
from reliability_support import FIGURES, mcp_headers

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]

TOKENS = {"alice": "alice-token-0123456789abcdef0123", "bob": "bob-token-0123456789abcdef012345"}
SESSIONS, LISTENS = 3, 2
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}
LISTEN = {
    "jsonrpc": "2.0",
    "id": 9,
    "method": "subscriptions/listen",
    "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META},
}


def headers(who: str, **extra: str) -> dict[str, str]:
    return mcp_headers(TOKENS[who], **extra)


LISTEN_HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}


@contextlib.asynccontextmanager
async def listening(http: httpx.AsyncClient, url: str, who: str) -> AsyncIterator[httpx.Response]:
    """A listen stream of ``who``, open once its acknowledgement arrived (or the refusal, as it came)."""
    async with http.stream("POST", url, json=LISTEN, headers=headers(who, **LISTEN_HEADERS)) as response:
        if response.status_code == 200:
            lines = response.aiter_lines()  # kept while the stream is held: a dropped iterator closes the response
            async for line in lines:
                if "notifications/subscriptions/acknowledged" in line:
                    break
        else:
            await response.aread()
        yield response


async def test_one_token_at_its_quota_leaves_the_others_served():
    options: dict[str, Any] = {"tokens": TOKENS, "max_sessions_per_owner": SESSIONS, "max_listens_per_owner": LISTENS}
    with thread_served(request_state_ttl=600, **options) as served:
        async with httpx.AsyncClient(timeout=30) as http:
            opened = [await http.post(served.url, json=INIT, headers=headers("alice")) for _ in range(SESSIONS + 1)]
            bobs = await http.post(served.url, json=INIT, headers=headers("bob"))
            async with contextlib.AsyncExitStack() as streams:
                alice = [await streams.enter_async_context(listening(http, served.url, "alice")) for _ in range(3)]
                bob = await streams.enter_async_context(listening(http, served.url, "bob"))
                statuses = [r.status_code for r in alice] + [bob.status_code]
    refused_session, refused_listen = opened[-1], alice[-1]
    FIGURES.attack(
        "quotas per owner",
        alice_sessions=f"{sum(r.status_code == 200 for r in opened)}/{len(opened)}",
        alice_listens=f"{sum(r.status_code == 200 for r in alice)}/{len(alice)}",
        bob_session=bobs.status_code,
        bob_listen=bob.status_code,
        retry_after=refused_session.headers.get("retry-after"),
    )
    assert [r.status_code for r in opened] == [200] * SESSIONS + [503]
    assert refused_session.headers["retry-after"] == "10"
    assert "for this credential (3)" in refused_session.json()["error"]["message"]
    assert bobs.status_code == 200
    assert statuses == [200, 200, 503, 200]
    assert refused_listen.headers["retry-after"] == "10"
