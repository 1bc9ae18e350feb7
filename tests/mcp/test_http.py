"""Streamable HTTP on loopback: uvicorn in this loop, the SDK client and raw httpx requests.

asyncio only: uvicorn runs on asyncio.
"""

from __future__ import annotations

import itertools
import json

import anyio
import httpx
import pytest
from eras import refused_for_capability
from fusion_mcp_testapp import make_app
from http_serving import INIT, JSON_HEADERS, serve

from fusion_nb.mcp import http_app

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_only]


@pytest.fixture
async def served():
    async with serve() as s:
        yield s


async def test_generated_token_is_exposed_and_long():
    app, _ = make_app()
    asgi = http_app(app)
    assert isinstance(asgi.token, str) and len(asgi.token) >= 32
    assert http_app(app, token="fixed").token == "fixed"
    assert http_app(app, auth=False).token is None


async def test_missing_or_wrong_token_is_401(served):
    async with httpx.AsyncClient() as http:
        missing = await http.post(served.url, json=INIT, headers=JSON_HEADERS)
        wrong = await http.post(served.url, json=INIT, headers={**JSON_HEADERS, "Authorization": "Bearer nope"})
        right = await http.post(served.url, json=INIT, headers=served.headers())
    assert missing.status_code == 401
    assert wrong.status_code == 401
    assert right.status_code == 200


async def test_the_401_is_the_sdks_bearer_refusal_and_other_paths_are_not_guarded(served):
    """fusion-nb's one-layer bearer check answers exactly as the SDK's bearer stack does."""
    wrong = ["Bearer nope", f"Basic {served.token}", f"Bearer {served.token}x", f"Bearer  {served.token}"]
    async with httpx.AsyncClient() as http:
        refusals = [
            await http.post(served.url, json=INIT, headers=JSON_HEADERS),
            *[await http.post(served.url, json=INIT, headers={**JSON_HEADERS, "Authorization": w}) for w in wrong],
            await http.get(served.url, headers={"Accept": "text/event-stream"}),
        ]
        lower_scheme = await http.post(
            served.url, json=INIT, headers={**JSON_HEADERS, "Authorization": f"bearer {served.token}"}
        )
        elsewhere = await http.post(f"{served.base}/elsewhere", json=INIT, headers=JSON_HEADERS)
    for refused in refusals:
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == (
            'Bearer error="invalid_token", error_description="Authentication required"'
        )
        assert refused.json() == {"error": "invalid_token", "error_description": "Authentication required"}
    assert lower_scheme.status_code == 200
    assert elsewhere.status_code == 404


async def test_a_2025_session_answers_only_the_token_that_opened_it():
    async with serve(tokens=TOKENS) as served, httpx.AsyncClient() as http:
        alice = {**JSON_HEADERS, "Authorization": f"Bearer {TOKENS['alice']}", "MCP-Protocol-Version": "2025-11-25"}
        opened = await http.post(served.url, json=INIT, headers=alice)
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        as_ci = await http.post(
            served.url, json=listing, headers={**alice, **session, "Authorization": f"Bearer {TOKENS['ci']}"}
        )
        as_alice = await http.post(served.url, json=listing, headers={**alice, **session})
    assert opened.status_code == 200
    assert as_ci.status_code == 404, "a session must not answer another client's token"
    assert as_alice.status_code == 200 and "echo" in as_alice.text


async def test_bad_host_is_421_and_bad_origin_is_403(served):
    async with httpx.AsyncClient() as http:
        bad_host = await http.post(served.url, json=INIT, headers=served.headers(Host="evil.example:80"))
        bad_origin = await http.post(served.url, json=INIT, headers=served.headers(Origin="http://evil.example"))
        good_origin = await http.post(served.url, json=INIT, headers=served.headers(Origin="http://localhost:8888"))
    assert bad_host.status_code == 421
    assert bad_origin.status_code == 403
    assert good_origin.status_code == 200


async def test_oversized_body_is_413_by_length_and_by_stream():
    async with serve(max_body_bytes=10_000) as served:
        big = json.dumps({**INIT, "padding": "x" * 20_000}).encode()

        async def chunks():  # no Content-Length: the limit must count streamed bytes
            for start in range(0, len(big), 4096):
                yield big[start : start + 4096]

        async with httpx.AsyncClient() as http:
            declared = await http.post(served.url, content=big, headers=served.headers())
            streamed = await http.post(served.url, content=chunks(), headers=served.headers())
            small = await http.post(served.url, json=INIT, headers=served.headers())
    assert declared.status_code == 413
    assert streamed.status_code == 413
    assert "content-length" not in streamed.request.headers
    assert small.status_code == 200


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_authorised_call_with_progress(served, mode):
    seen: list[float] = []

    async def on_progress(value, total, message):
        seen.append(value)

    async with served.client(mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert listed["echo"].annotations.read_only_hint is True
        result = await client.call_tool("echo", {"text": "over http"})
        noisy = await client.call_tool("noisy", {}, progress_callback=on_progress)
        who = await client.call_tool("whoami", {})
        failed = await client.call_tool("boom", {})
    assert result.structured_content == {"result": "over http"}
    assert noisy.content[0].text == "done"
    assert seen and seen[-1] == 100 and all(a < b for a, b in itertools.pairwise(seen))
    assert who.structured_content["http"] is True
    assert who.structured_content["token_client"] == "fusion-nb-client"
    assert failed.is_error and failed.content[0].text.startswith("[QUOTA_EXCEEDED]")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_cancelling_an_http_call_runs_the_handlers_cleanup(served, mode):
    async with served.client(mode) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("stall", {}, progress_callback=_ignore))
            with anyio.fail_after(10):
                await served.probe["entered"].wait()
            group.cancel_scope.cancel()
        with anyio.fail_after(10):
            await served.probe["cleaned"].wait()
        again = await client.call_tool("echo", {"text": "after cancel"})
    assert again.structured_content == {"result": "after cancel"}
    assert served.app.active_calls == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_stateless_json_mode_answers_without_progress(mode):
    seen: list[float] = []

    async def on_progress(value, total, message):
        seen.append(value)

    async with serve(json_response=True, stateless=True) as served, served.client(mode) as client:
        result = await client.call_tool("noisy", {}, progress_callback=on_progress)
    assert result.content[0].text == "done"
    assert seen == []  # documented: JSON responses carry no notifications


async def _ignore(*args):
    pass


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_refund_flow_and_unsupported_elicitation_over_http(served, mode):
    from mcp import types

    async def approve(context, params):
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with served.client(mode, elicitation_callback=approve) as client:
        result = await client.call_tool("billing.refund", {"id": "inv-7"})
    assert result.content[0].text == "refunded inv-7"
    async with served.client(mode) as client:
        call = client.call_tool("billing.refund", {"id": "inv-7"})
        said = await refused_for_capability(call, mode == "auto", {"elicitation": {"form": {}}})
    assert said.startswith('Tool "billing.refund" needs input')


async def test_tampered_request_state_is_refused_over_http(served):
    from mcp import MCPError, types

    async def unused(context, params):
        raise AssertionError("the test drives the rounds")

    async with served.client("auto", elicitation_callback=unused) as client:
        first = await client.session.call_tool("billing.refund", {"id": "inv-7"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        state = first.request_state
        tampered = state[:-6] + ("A" if state[-6] != "A" else "B") + state[-5:]
        answer = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}
        with pytest.raises(MCPError) as refused:
            await client.session.call_tool(
                "billing.refund",
                {"id": "inv-7"},
                input_responses=answer,
                request_state=tampered,
                allow_input_required=True,
            )
        accepted = await client.session.call_tool(
            "billing.refund", {"id": "inv-7"}, input_responses=answer, request_state=state, allow_input_required=True
        )
    assert refused.value.error.code == types.INVALID_PARAMS
    assert "was altered, has expired, or belongs to another call; call the tool again" in str(refused.value)
    assert accepted.content[0].text == "refunded inv-7"


async def test_json_response_mode_answers_input_requests_the_2026_way():
    """Stateless JSON mode: no live elicitation on 2025 (unsupported), InputRequiredResult on 2026."""
    from mcp import types

    async def approve(context, params):
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with serve(json_response=True, stateless=True) as s:
        async with s.client("legacy", elicitation_callback=approve) as client:
            legacy = await client.call_tool("billing.refund", {"id": "inv-7"})
        async with s.client("auto", elicitation_callback=approve) as client:
            modern = await client.call_tool("billing.refund", {"id": "inv-7"})
    assert legacy.is_error and legacy.content[0].text.startswith("[ELICITATION_UNSUPPORTED]")
    assert "this server answers with single JSON responses (json_response=True)" in legacy.content[0].text
    assert "keeps no 2025-11-25 sessions (stateless=True)" in legacy.content[0].text
    assert "Serve with http_app(json_response=False, stateless=False)" in legacy.content[0].text
    assert modern.content[0].text == "refunded inv-7"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"json_response": True}, "(json_response=True)"),
        ({"stateless": True}, "(stateless=True)"),
    ],
)
async def test_a_mode_without_back_channel_is_named_in_the_refusal(options, named):
    """The client declared elicitation: the refusal blames the server's mode and says how to change it."""
    from mcp import types

    async def approve(context, params):
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with serve(**options) as s, s.client("legacy", elicitation_callback=approve) as client:
        refused = await client.call_tool("billing.refund", {"id": "inv-7"})
    text = refused.content[0].text
    assert refused.is_error and text.startswith('[ELICITATION_UNSUPPORTED] Tool "billing.refund" needs input, but')
    assert named in text and "no way to ask a 2025-11-25 client" in text
    assert "this caller has no way" not in text


TOKENS = {"alice": "alice-" + "a" * 32, "ci": "ci-" + "c" * 32}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_each_named_token_is_its_own_client(mode):
    async with serve(tokens=TOKENS) as served:
        assert served.asgi.token is None and served.asgi.tokens == TOKENS
        for name, token in TOKENS.items():
            async with served.client(mode, token=token) as client:
                who = await client.call_tool("whoami", {})
            assert who.structured_content["token_client"] == name
        async with httpx.AsyncClient() as http:
            wrong = await http.post(served.url, json=INIT, headers={**JSON_HEADERS, "Authorization": "Bearer nope"})
        assert wrong.status_code == 401


async def test_request_state_minted_for_one_token_is_refused_under_another():
    from mcp import MCPError, types

    async def unused(context, params):
        raise AssertionError("the test drives the rounds")

    answer = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}
    async with serve(tokens=TOKENS) as served:
        async with served.client("auto", token=TOKENS["alice"], elicitation_callback=unused) as alice:
            first = await alice.session.call_tool("billing.refund", {"id": "inv-7"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
        async with served.client("auto", token=TOKENS["ci"], elicitation_callback=unused) as ci:
            with pytest.raises(MCPError) as stolen:
                await ci.session.call_tool(
                    "billing.refund",
                    {"id": "inv-7"},
                    input_responses=answer,
                    request_state=first.request_state,
                    allow_input_required=True,
                )
        async with served.client("auto", token=TOKENS["alice"], elicitation_callback=unused) as alice:
            resumed = await alice.session.call_tool(
                "billing.refund",
                {"id": "inv-7"},
                input_responses=answer,
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert stolen.value.error.code == types.INVALID_PARAMS and "belongs to another call" in str(stolen.value)
    assert resumed.content[0].text == "refunded inv-7"


def test_tokens_from_the_environment(monkeypatch):
    from fusion_nb.mcp.http import tokens_from_env

    monkeypatch.delenv("FUSION_NB_TOKENS", raising=False)
    assert tokens_from_env() is None
    monkeypatch.setenv("FUSION_NB_TOKENS", f" alice={TOKENS['alice']}, ci={TOKENS['ci']} ")
    assert tokens_from_env() == TOKENS
    monkeypatch.setenv("FUSION_NB_TOKENS", f"alice={TOKENS['alice']},broken")
    with pytest.raises(ValueError, match=r"FUSION_NB_TOKENS: entry 2 is not name=token") as refused:
        tokens_from_env()
    assert TOKENS["alice"] not in str(refused.value)


def test_token_options_are_checked():
    app, _ = make_app()
    with pytest.raises(ValueError, match="not both"):
        http_app(app, token="x" * 32, tokens=TOKENS)
    with pytest.raises(ValueError, match="each must be unique"):
        http_app(app, tokens={"a": "same-token-value", "b": "same-token-value"})
