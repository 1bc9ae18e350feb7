"""OAuth with parts nobody here wrote: a certified OpenID provider and the TypeScript SDK's OAuth client.

The provider is the pinned npm ``oidc-provider`` (``oidc.py``, ``oidc_provider.mjs``); the
server a real ``fusion-nb serve --auth-issuer``. ``oauth_flow.mjs`` connects with no token and
the SDK does the rest (401, RFC 9728, RFC 8414, RFC 7591 registration, authorization code with
PKCE and an RFC 8707 resource, token) while the script answers the login and consent forms over
HTTP; then a call, a task, an elicitation, and a 403 naming the scope a tool needs.

The refusals use the provider's own tokens (client credentials): expired (its clock skewed),
for another audience, from another issuer (a second provider with the same keys), signed by a
rotated key (picked up), opaque (introspected), not yet valid, unknown. Alice and bob sign in
through one registered client (the code flow, driven from Python by ``oidc.py``) and keep their
tasks and sessions apart; ``--public-url`` is the URL every document names. Only the
``none``-algorithm token is made here:
no provider issues one (it is the attack), so it is a real token with its signature stripped.
What no real provider produces at all (a JWKS that is not JSON, a forged signature under a
published kid, an HS256 token, a 1 MB token, a token without ``aud``) stays on
``tests/oauth_issuer.py`` in tests/mcp/test_oauth.py.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from oidc import INTROSPECTION, OidcProvider
from test_interop import run_node

sys.path.insert(0, str(Path(__file__).parent.parent / "cli"))  # fusion-nb serve as a subprocess
from served import served

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]  # uvicorn, and the kernel harness

ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture
def oidc(node) -> Iterator[OidcProvider]:
    provider = OidcProvider(node)
    try:
        yield provider
    finally:
        provider.close()


def serving(oidc: OidcProvider, *more: str):
    """``fusion-nb serve`` trusting ``oidc``: every call needs notes:read; it introspects as ``fusion-nb``."""
    flags = ["--auth-issuer", oidc.issuer, "--auth-scopes", "notes:read", "--auth-client-id", INTROSPECTION[0]]
    flags += ["--auth-key-refresh", "0.001"]  # (the rotation below comes right after the first key read)
    return served("oauth_app", *flags, *more, env={"FUSION_NB_AUTH_CLIENT_SECRET": INTROSPECTION[1]})


async def test_the_typescript_sdk_authorizes_itself_and_calls_runs_a_task_and_answers_a_form(node, oidc):
    async with serving(oidc) as server:
        seen = json.loads(await run_node(node, "oauth_flow.mjs", server.url, "alice"))
    assert seen["wire"][:4] == [
        "POST /mcp 401",
        "GET /.well-known/oauth-protected-resource/mcp 200",
        "GET /.well-known/oauth-authorization-server 200",  # (the provider's, at its issuer)
        "POST /reg 201",
    ], seen["wire"]
    token = seen["wire"].index("POST /token 200")
    assert seen["wire"][token + 1] == "POST /mcp 200", seen["wire"]  # (the initialize, now with the token)
    assert seen["authorizations"] == [
        {"scope": "notes:read", "resource": server.url, "method": "S256", "challenge": True}
    ]
    assert seen["prompts"] == ["login", "consent"] and seen["registered"] and seen["tokenIsJwt"]
    assert seen["echo"] == {"text": "over oauth"}
    assert seen["taskSupport"] == "optional" and seen["task"][0] == "taskCreated" and seen["task"][-1] == "result"
    assert seen["taskResult"] == {"steps": 3}
    assert (seen["elicited"], seen["elicitation"]) == ("Go ahead?", {"go": True})
    assert seen["scope"] == "notes:read"
    assert seen["report"]["status"] == 403
    challenge = seen["report"]["challenge"]
    assert challenge.startswith('Bearer error="insufficient_scope", error_description="the tool \'report\' needs the')
    assert challenge.endswith('scope="notes:read reports:write"'), challenge
    assert not [line for line in server.lines if "Traceback" in line], server.lines


def _unsigned(token: str) -> str:
    """``token`` with ``alg: none`` and no signature (what an attacker sends)."""
    _, payload, _ = token.split(".")
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "at+jwt"}).encode()).rstrip(b"=").decode()
    return f"{header}.{payload}."


def _kid(token: str) -> str:
    header = token.split(".")[0]
    return str(json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"])


async def test_each_token_the_provider_gives_is_served_or_refused_in_one_sentence(oidc):
    async with serving(oidc) as server, httpx.AsyncClient() as http:
        resource = server.url

        async def answer(token: str, body: dict = INIT) -> httpx.Response:
            return await http.post(server.url, json=body, headers={**ACCEPT, "Authorization": f"Bearer {token}"})

        async def served_by(token: str) -> str:
            server.token = token
            async with server.client() as client:
                return str((await client.call_tool("echo", {"text": "hi"})).structured_content["text"])

        assert await served_by(oidc.token(resource)) == "hi"  # (the server reads the provider's keys)
        oidc.skew(-3600)
        expired = oidc.token(resource)
        oidc.skew(3600)
        early = oidc.token(resource)
        oidc.skew(0)
        refused = {
            "expired": await answer(expired),
            "early": await answer(early),
            "audience": await answer(oidc.token("http://127.0.0.1:1/mcp")),
            "issuer": await answer(oidc.token(resource, issuer=oidc.other)),
            "none": await answer(_unsigned(oidc.token(resource))),
            "opaque audience": await answer(oidc.token("http://127.0.0.1:1/mcp", client="opaque-agent")),
            "opaque unknown": await answer("an-opaque-token-the-provider-never-issued"),
        }
        kid = oidc.rotate()
        rotated = oidc.token(resource)
        assert _kid(rotated) == kid
        assert await served_by(rotated) == "hi"  # the new kid is picked up
        assert await served_by(oidc.token(resource, client="opaque-agent")) == "hi"  # introspected
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "report", "arguments": {}}}
        scopeless = await answer(oidc.token(resource), call)
        assert await served_by(oidc.token(resource, "notes:read reports:write")) == "hi"
    expected = {
        "expired": "the token has expired",
        "early": "the token is not valid yet (its nbf or iat is in the future)",
        "audience": f"the token is for another audience, not {resource}",
        "issuer": f"the token was issued by another issuer, not {oidc.issuer}",
        "none": "tokens signed with 'none' are not accepted (only RS256, ",
        "opaque audience": f"the token is for another audience, not {resource}",
        "opaque unknown": "the issuer says the token is not active (expired, revoked or unknown)",
    }
    for case, response in refused.items():
        assert response.status_code == 401, (case, response.status_code, response.text)
        assert response.json()["error_description"].startswith(expected[case]), (case, response.json())
        assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token", error_description="')
    assert scopeless.status_code == 403
    assert scopeless.headers["www-authenticate"].endswith('scope="notes:read reports:write"')
    assert not [line for line in server.lines if "Traceback" in line], server.lines


async def _rpc(http: httpx.AsyncClient, url: str, headers: dict, method: str, **params) -> dict:
    """One JSON-RPC request on the raw wire (the SDK's client cannot take a ``CreateTaskResult``); its answer."""
    answer = await http.post(url, json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params}, headers=headers)
    assert answer.status_code == 200, (answer.status_code, answer.text[:300])
    if answer.headers["content-type"].startswith("application/json"):
        return dict(answer.json())
    messages = (json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:"))
    return next(message for message in messages if message.get("id") == 7)


async def _session(http: httpx.AsyncClient, url: str, token: str) -> dict[str, str]:
    """The headers of a new 2025-11-25 session (tasks capable) opened with ``token``."""
    headers = {**ACCEPT, "Authorization": f"Bearer {token}"}
    capabilities: dict[str, Any] = {"tasks": {"requests": {"tools": {"call": {}}}}}
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "clientInfo": {"name": "t", "version": "1"},
    }
    opened = await http.post(
        url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, headers=headers
    )
    headers |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    initialized = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert initialized.status_code == 202
    return headers


async def test_two_people_through_one_registered_client_keep_their_tasks_and_sessions_apart(oidc):
    """Alice and bob sign in through the same registered client: tasks and 2025 sessions follow the
    token's subject (and issuer and client), so bob can neither read nor cancel alice's task nor use
    her session."""
    async with serving(oidc) as server, httpx.AsyncClient() as http:
        client_id = oidc.register()
        alice, bob = (oidc.person(client_id, server.url, login) for login in ("alice", "bob"))
        claims = [json.loads(base64.urlsafe_b64decode(t.split(".")[1] + "==")) for t in (alice, bob)]
        assert [(c["client_id"], c["sub"]) for c in claims] == [(client_id, "alice"), (client_id, "bob")]
        as_alice, as_bob = await _session(http, server.url, alice), await _session(http, server.url, bob)
        created = await _rpc(http, server.url, as_alice, "tools/call", name="hold", arguments={}, task={"ttl": 60_000})
        task_id = created["result"]["task"]["taskId"]
        refused = [
            await _rpc(http, server.url, as_bob, method, taskId=task_id) for method in ("tasks/get", "tasks/cancel")
        ]
        got = await _rpc(http, server.url, as_alice, "tasks/get", taskId=task_id)
        stolen = await http.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**as_alice, "Authorization": f"Bearer {bob}"},
        )
        cancelled = await _rpc(http, server.url, as_alice, "tasks/cancel", taskId=task_id)
    for answer in refused:
        assert f'there is no task "{task_id}" for this client' in answer["error"]["message"], answer
    assert got["result"]["status"] == "working" and cancelled["result"]["status"] == "cancelled"
    assert stolen.status_code == 404


async def test_behind_a_proxy_the_documents_name_the_public_url_and_static_headers_are_refused(oidc):
    """``--public-url``: the RFC 9728 document and every challenge name it; the provider's token for it
    is served; fusion-nb is never an authorization server itself (no registration endpoint)."""
    async with serving(oidc, "--public-url", "http://localhost:1") as server, httpx.AsyncClient() as http:
        await server.wait_for("OAuth resource server for http://localhost:1/mcp")
        document = (await server.get("/.well-known/oauth-protected-resource/mcp")).json()
        bare = (await server.get("/.well-known/oauth-protected-resource")).status_code
        registration = await http.post(server.url.removesuffix("/mcp") + "/register", json={})
        static = await http.post(server.url, json=INIT, headers={**ACCEPT, "Authorization": "Bearer a-static-token"})
        anonymous = await http.post(server.url, json=INIT, headers=ACCEPT)
        server.token = oidc.token("http://localhost:1/mcp")
        async with server.client() as client:
            assert (await client.call_tool("echo", {"text": "a"})).structured_content["text"] == "a"
    assert (bare, registration.status_code) == (200, 404)
    assert document["resource"] == "http://localhost:1/mcp"
    assert document["authorization_servers"] in ([oidc.issuer], [oidc.issuer + "/"])
    metadata = 'resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp"'
    assert anonymous.headers["www-authenticate"] == (
        f'Bearer error_description="Authentication required", {metadata}, scope="notes:read"'
    )
    assert static.status_code == 401 and metadata in static.headers["www-authenticate"]
    assert static.json()["error_description"] == (
        "the issuer says the token is not active (expired, revoked or unknown)"
    )
